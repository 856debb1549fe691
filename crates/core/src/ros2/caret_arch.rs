//! CARET's `architecture.yaml` path definitions as `--path` input.
//!
//! CARET (tier4/caret_analyze) describes an application's nodes, callbacks and
//! the paths users measure in an architecture file. Two ways of naming a path
//! exist in the files users have:
//! - `path_name_aliases` (caret_analyze 0.1, 2021): a path is a list of
//!   callbacks `/node/callback_name`; the topic sequence is the subscription
//!   topic of each callback whose node differs from the previous callback's
//!   (the hops between nodes). Callbacks of one node in a row are the node's
//!   own work, linked by "variable passings" (a callback that stores its
//!   input, another that publishes from it).
//! - `named_paths` (later versions): a path is a `node_chain`, each entry with
//!   `node_name`, `subscribe_topic_name` and `publish_topic_name`; the topic
//!   sequence is the subscribed topic of every node after the first.
//!
//! The file is read with a size cap and refused if it uses YAML aliases
//! (a short file with nested aliases can expand to gigabytes; CARET never
//! writes them).

use std::collections::HashMap;
use std::path::Path;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;
use yaml_rust2::{Yaml, YamlLoader};

/// Architecture files larger than this are refused.
pub const MAX_ARCHITECTURE_BYTES: u64 = 16 << 20;
/// YAML events (nodes) an architecture file may hold.
pub const MAX_ARCHITECTURE_EVENTS: usize = 2_000_000;

/// One path of an architecture file, as ddscope measures it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaretPath {
    pub name: String,
    /// The topics between the path's nodes, in order.
    pub topics: Vec<String>,
    /// Some node passes its input to another callback (CARET's variable passing): measured
    /// through the node's latest input.
    pub variable_passing: bool,
}

/// Nesting depth (sequences and mappings inside each other) an architecture
/// file may reach: CARET's files are about 8 deep. The tree is only built
/// (and later walked and dropped, recursively) below it: 20 000 nested
/// sequences in 40 KB overflowed the stack.
pub const MAX_ARCHITECTURE_DEPTH: usize = 64;

/// Counts a file's events and nesting on the parser's event stream, read
/// iteratively, before any tree is built.
struct Guard {
    events: usize,
    alias: Option<Marker>,
    depth: usize,
    /// Where the nesting first went past [`MAX_ARCHITECTURE_DEPTH`].
    too_deep: Option<Marker>,
}

impl MarkedEventReceiver for Guard {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.events += 1;
        match ev {
            Event::Alias(_) if self.alias.is_none() => self.alias = Some(mark),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                self.depth += 1;
                if self.depth > MAX_ARCHITECTURE_DEPTH && self.too_deep.is_none() {
                    self.too_deep = Some(mark);
                }
            }
            Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }
}

fn text(y: &Yaml) -> Option<&str> {
    y.as_str().filter(|s| !s.is_empty() && *s != "UNDEFINED")
}

/// The paths defined in the architecture file at `path` (errors name the file and the reason).
pub fn read_paths(path: &Path) -> Result<Vec<CaretPath>, String> {
    let p = path.display();
    // Counted on what is read, not on the size the file reports (a device reports 0).
    let src = ddscope_traffic::fsio::read_bounded_text(path, MAX_ARCHITECTURE_BYTES, "architecture file").map_err(|e| e.to_string())?;
    let mut g = Guard { events: 0, alias: None, depth: 0, too_deep: None };
    // Event by event (`Parser::load` recurses once per nesting level), stopping at the first excess.
    let mut parser = Parser::new_from_str(&src);
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| format!("{p}: not YAML: {e}"))?;
        let end = matches!(ev, Event::StreamEnd);
        g.on_event(ev, mark);
        if end || g.too_deep.is_some() || g.alias.is_some() || g.events > MAX_ARCHITECTURE_EVENTS {
            break;
        }
    }
    if let Some(m) = g.too_deep {
        return Err(format!("{p}: line {}: nested more than {MAX_ARCHITECTURE_DEPTH} deep; an architecture file is not", m.line()));
    }
    if let Some(m) = g.alias {
        return Err(format!("{p}: line {}: YAML aliases are not accepted in architecture files", m.line()));
    }
    if g.events > MAX_ARCHITECTURE_EVENTS {
        return Err(format!("{p}: {} YAML nodes; at most {MAX_ARCHITECTURE_EVENTS}", g.events));
    }
    let docs = YamlLoader::load_from_str(&src).map_err(|e| format!("{p}: not YAML: {e}"))?;
    let doc = docs.first().ok_or_else(|| format!("{p}: empty file"))?;
    parse(doc).map_err(|e| format!("{p}: {e}"))
}

fn parse(doc: &Yaml) -> Result<Vec<CaretPath>, String> {
    // callback "/node/callback_name" → (node, subscription topic)
    let mut callbacks: HashMap<String, (String, Option<String>)> = HashMap::new();
    let mut passing_nodes: Vec<String> = vec![];
    for n in doc["nodes"].as_vec().map(Vec::as_slice).unwrap_or_default() {
        let Some(node) = text(&n["node_name"]) else { continue };
        for c in n["callbacks"].as_vec().map(Vec::as_slice).unwrap_or_default() {
            if let Some(name) = text(&c["callback_name"]) {
                let topic = text(&c["topic_name"]).map(str::to_string);
                callbacks.insert(format!("{node}/{name}"), (node.to_string(), topic));
            }
        }
        let passes = n["variable_passings"].as_vec().is_some_and(|v| v.iter().any(|x| text(&x["callback_name_write"]).is_some()));
        if passes {
            passing_nodes.push(node.to_string());
        }
    }
    let mut out = vec![];
    for a in doc["path_name_aliases"].as_vec().map(Vec::as_slice).unwrap_or_default() {
        let name = text(&a["path_name"]).ok_or("a path_name_aliases entry without path_name")?.to_string();
        let mut topics = vec![];
        let mut prev_node: Option<String> = None;
        let mut passing = false;
        for cb in a["callbacks"].as_vec().map(Vec::as_slice).unwrap_or_default() {
            let Some(cb) = text(cb) else { continue };
            let (node, topic) = callbacks.get(cb).ok_or_else(|| format!("path {name}: callback {cb} is not among the nodes' callbacks"))?;
            match &prev_node {
                Some(p) if p == node => passing |= passing_nodes.contains(node),
                Some(_) => topics.push(topic.clone().ok_or_else(|| format!("path {name}: {cb} starts a node's part of the path but is not a subscription callback"))?),
                None => {}
            }
            prev_node = Some(node.clone());
        }
        out.push(CaretPath { name, topics, variable_passing: passing });
    }
    for a in doc["named_paths"].as_vec().map(Vec::as_slice).unwrap_or_default() {
        let name = text(&a["path_name"]).ok_or("a named_paths entry without path_name")?.to_string();
        let chain = a["node_chain"].as_vec().map(Vec::as_slice).unwrap_or_default();
        let mut topics = vec![];
        for (i, n) in chain.iter().enumerate() {
            if i == 0 {
                continue;
            }
            let t = text(&n["subscribe_topic_name"]).ok_or_else(|| format!("path {name}: node {} without subscribe_topic_name", text(&n["node_name"]).unwrap_or("?")))?;
            topics.push(t.to_string());
        }
        let passing = chain.iter().skip(1).take(chain.len().saturating_sub(2)).any(|n| text(&n["node_name"]).is_some_and(|x| passing_nodes.iter().any(|p| p == x)));
        out.push(CaretPath { name, topics, variable_passing: passing });
    }
    if out.is_empty() {
        return Err("no path defined (neither path_name_aliases nor named_paths)".into());
    }
    Ok(out)
}

/// The path to measure: the one named `name`, or the only one.
pub fn select(paths: Vec<CaretPath>, name: Option<&str>) -> Result<CaretPath, String> {
    let names = || paths.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
    let p = match name {
        Some(n) => paths.iter().find(|p| p.name == n).cloned().ok_or_else(|| format!("no path named {n:?} (the file defines {})", names()))?,
        None if paths.len() == 1 => paths[0].clone(),
        None => return Err(format!("the file defines {} paths ({}): name one with FILE:NAME", paths.len(), names())),
    };
    if p.topics.len() < 2 {
        return Err(format!("path {} crosses {} topic(s); a chain needs two or more", p.name, p.topics.len()));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(s: &str) -> Result<Vec<CaretPath>, String> {
        parse(&YamlLoader::load_from_str(s).unwrap()[0])
    }

    #[test]
    fn callbacks_between_nodes_give_the_topics() {
        let y = "
path_name_aliases:
- path_name: p
  callbacks: [/a/timer_callback_0, /b/subscription_callback_0, /b/subscription_callback_1, /c/subscription_callback_0]
nodes:
- node_name: /a
  callbacks: [{callback_name: timer_callback_0, type: timer_callback}]
- node_name: /b
  callbacks:
  - {callback_name: subscription_callback_0, type: subscription_callback, topic_name: /t1}
  - {callback_name: subscription_callback_1, type: subscription_callback, topic_name: /drive}
  variable_passings: [{callback_name_write: subscription_callback_0, callback_name_read: subscription_callback_1}]
- node_name: /c
  callbacks: [{callback_name: subscription_callback_0, type: subscription_callback, topic_name: /t2}]
";
        let p = load(y).unwrap();
        assert_eq!(p, vec![CaretPath { name: "p".into(), topics: vec!["/t1".into(), "/t2".into()], variable_passing: true }]);
        let named = "
named_paths:
- path_name: q
  node_chain:
  - {node_name: /a, publish_topic_name: /t1, subscribe_topic_name: UNDEFINED}
  - {node_name: /b, publish_topic_name: /t2, subscribe_topic_name: /t1}
  - {node_name: /c, publish_topic_name: UNDEFINED, subscribe_topic_name: /t2}
";
        assert_eq!(load(named).unwrap()[0].topics, ["/t1", "/t2"]);
        assert!(select(load(named).unwrap(), Some("x")).unwrap_err().contains("no path named"));
        assert!(load("nodes: []").unwrap_err().contains("no path defined"));
    }

    #[test]
    fn deep_nesting_is_refused_before_any_tree_is_built() {
        // 20 000 nested block sequences in 40 KB, flow sequences, and mappings:
        // a clean error (this thread's 2 MiB stack overflowed before).
        let dir = std::env::temp_dir().join(format!("ddscope-caret-deep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mapping: String = (0..3000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        for (name, body) in [("block", "- ".repeat(20_000) + "x\n"), ("flow", "[".repeat(20_000) + &"]".repeat(20_000)), ("map", mapping)] {
            let f = dir.join(format!("{name}.yaml"));
            std::fs::write(&f, body).unwrap();
            let e = read_paths(&f).unwrap_err();
            // (the parser refuses deep flow collections itself, also cleanly)
            let deep = e.contains("nested more than 64 deep") || e.contains("recursion limit exceeded");
            assert!(deep && e.contains(&format!("{name}.yaml")), "{name}: {e}");
        }
        // A real file's depth passes.
        let ok = dir.join("ok.yaml");
        std::fs::write(&ok, "named_paths:\n- path_name: q\n  node_chain:\n  - {node_name: /a, publish_topic_name: /t1, subscribe_topic_name: UNDEFINED}\n  - {node_name: /b, publish_topic_name: UNDEFINED, subscribe_topic_name: /t1}\n").unwrap();
        assert_eq!(read_paths(&ok).unwrap()[0].name, "q");
        // A device is refused in one line, at once.
        let e = read_paths(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("character device"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
