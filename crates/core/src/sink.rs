//! Rows as stages. Whatever judges rows — the correlator (latency rows), its
//! chain tracker (chain rows), the flow matcher (packet rows) — hands each row
//! to a [`RowSink`] as it is judged; what the user asked for is a sink built
//! once from the options: a topic and domain [`Select`] in front of a fan-out
//! (a tuple or a `Vec` of sinks) of [`RowWriter`]s (every `RecordWriter`
//! format) and whatever else looks at rows (the incident explainer, a report's
//! series). A closure `FnMut(R)` is a sink too.

use crate::discovery::TopicNames;
use crate::output::RecordWriter;
use crate::record::Record;
use std::io;

/// Where rows go, one at a time, in the order they are judged.
pub trait RowSink<R> {
    /// Looks at a row (writes it, counts it, passes it on).
    fn row(&mut self, r: &R);
    /// Takes a row: a producer hands its rows over with `take`, so that the
    /// last sink of a fan-out (a closure, a store) gets each row without a copy.
    fn take(&mut self, r: R) {
        self.row(&r)
    }
    /// No row follows: flush and close what was written; the first error of
    /// the run, if any.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A closure is a sink: it gets each row by value (a copy only when it is
/// not the last sink of a fan-out).
impl<R: Clone, F: FnMut(R)> RowSink<R> for F {
    fn row(&mut self, r: &R) {
        self(r.clone())
    }
    fn take(&mut self, r: R) {
        self(r)
    }
}

/// A sink that may be absent (an option not given).
impl<R, S: RowSink<R>> RowSink<R> for Option<S> {
    fn row(&mut self, r: &R) {
        if let Some(s) = self {
            s.row(r)
        }
    }
    fn take(&mut self, r: R) {
        if let Some(s) = self {
            s.take(r)
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        self.as_mut().map_or(Ok(()), |s| s.finish())
    }
}

/// Fan-out: every row to each sink in turn (the last one takes it).
impl<R, S: RowSink<R>> RowSink<R> for Vec<S> {
    fn row(&mut self, r: &R) {
        for s in self.iter_mut() {
            s.row(r)
        }
    }
    fn take(&mut self, r: R) {
        if let Some((last, rest)) = self.split_last_mut() {
            for s in rest {
                s.row(&r)
            }
            last.take(r)
        }
    }
    /// Finishes every sink; the first error.
    fn finish(&mut self) -> io::Result<()> {
        self.iter_mut().map(|s| s.finish()).fold(Ok(()), |a, b| a.and(b))
    }
}

/// Fan-out to two sinks of different kinds: the first looks, the second takes.
impl<R, A: RowSink<R>, B: RowSink<R>> RowSink<R> for (A, B) {
    fn row(&mut self, r: &R) {
        self.0.row(r);
        self.1.row(r)
    }
    fn take(&mut self, r: R) {
        self.0.row(&r);
        self.1.take(r)
    }
    fn finish(&mut self) -> io::Result<()> {
        let a = self.0.finish();
        a.and(self.1.finish())
    }
}

/// Writes rows in one of the `RecordWriter` formats. A write error stops the
/// writing; [`finish`](RowSink::finish) reports it (or closes the format).
pub struct RowWriter<R: Record> {
    writer: Option<RecordWriter<R>>,
    error: Option<io::Error>,
}

impl<R: Record> RowWriter<R> {
    pub fn new(writer: RecordWriter<R>) -> Self {
        RowWriter { writer: Some(writer), error: None }
    }
}

impl<R: Record> RowSink<R> for RowWriter<R> {
    fn row(&mut self, r: &R) {
        if let (Some(w), None) = (&mut self.writer, &self.error) {
            if let Err(e) = w.write(r) {
                self.error = Some(e);
            }
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            self.writer = None;
            return Err(e);
        }
        self.writer.take().map_or(Ok(()), |w| w.finish())
    }
}

/// A row that belongs to a topic (names from discovery, when known) of a DDS domain.
pub trait OnTopic {
    fn topic_names(&self) -> Option<&TopicNames>;
    fn domain(&self) -> Option<u32>;
}

/// A topic pattern that is not a glob.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct TopicPatternError {
    /// The pattern at fault (none when the set of patterns as a whole failed).
    pub pattern: Option<String>,
    pub source: globset::Error,
}

/// Which topics a command looks at: glob patterns matched against the ROS 2
/// name and the raw DDS name, and a DDS domain. Built once; everything passes
/// when neither is given.
#[derive(Clone)]
pub struct TopicSelect {
    globs: Option<globset::GlobSet>,
    domain: Option<u32>,
}

impl TopicSelect {
    pub fn new(patterns: &[String], domain: Option<u32>) -> Result<Self, TopicPatternError> {
        if patterns.is_empty() {
            return Ok(TopicSelect { globs: None, domain });
        }
        let mut b = globset::GlobSetBuilder::new();
        for p in patterns {
            let g = globset::GlobBuilder::new(p)
                .literal_separator(false)
                .build()
                .map_err(|source| TopicPatternError { pattern: Some(p.clone()), source })?;
            b.add(g);
        }
        let globs = b.build().map_err(|source| TopicPatternError { pattern: None, source })?;
        Ok(TopicSelect { globs: Some(globs), domain })
    }

    /// True for a topic with these names (none: not known) in `domain`.
    pub fn matches(&self, names: Option<&TopicNames>, domain: Option<u32>) -> bool {
        let topic = match (&self.globs, names) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(s), Some(n)) => s.is_match(&n.topic_name) || s.is_match(&n.topic_raw),
        };
        topic && (self.domain.is_none() || domain == self.domain)
    }

    /// True for a row of a selected topic.
    pub fn keeps<R: OnTopic>(&self, r: &R) -> bool {
        self.matches(r.topic_names(), r.domain())
    }
}

/// The rows of the selected topics go on to `next`; the others stop here.
pub struct Select<S> {
    pub topics: TopicSelect,
    pub next: S,
}

impl<R: OnTopic, S: RowSink<R>> RowSink<R> for Select<S> {
    fn row(&mut self, r: &R) {
        if self.topics.keeps(r) {
            self.next.row(r)
        }
    }
    fn take(&mut self, r: R) {
        if self.topics.keeps(&r) {
            self.next.take(r)
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        self.next.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Debug, PartialEq)]
    struct Row(Option<Arc<TopicNames>>, Option<u32>);

    impl OnTopic for Row {
        fn topic_names(&self) -> Option<&TopicNames> {
            self.0.as_deref()
        }
        fn domain(&self) -> Option<u32> {
            self.1
        }
    }

    fn names(n: &str) -> Option<Arc<TopicNames>> {
        Some(Arc::new(TopicNames::from_parts(format!("rt{n}"), String::new(), n.into(), String::new(), None, &mut crate::names::NameCap::default())))
    }

    #[test]
    fn select_fans_out_and_the_last_sink_takes() {
        let (mut a, mut b) = (vec![], vec![]);
        {
            let topics = TopicSelect::new(&["/ima*".to_string()], Some(0)).expect("globs");
            let mut sink = Select { topics, next: (|r: Row| a.push(r), Some(|r: Row| b.push(r))) };
            for r in [Row(names("/image"), Some(0)), Row(names("/image"), Some(1)), Row(names("/scan"), Some(0)), Row(None, Some(0))] {
                sink.take(r);
            }
            sink.finish().expect("nothing to close");
        }
        assert_eq!(a, vec![Row(names("/image"), Some(0))]);
        assert_eq!(a, b);
        let all = TopicSelect::new(&[], None).expect("no globs");
        assert!(all.keeps(&Row(None, None)));
        assert!(TopicSelect::new(&["rt/sc[".to_string()], None).is_err_and(|e| e.pattern.as_deref() == Some("rt/sc[")));
    }
}
