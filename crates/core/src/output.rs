//! Sinks: write any [`Record`] type as an aligned table, CSV, JSON Lines, a
//! JSON array, or Parquet (readable by pandas, polars and DuckDB).
//! CSV/JSON/Parquet always carry every column; the table shows a chosen subset,
//! possibly under headers that carry a unit (values scaled to it), `-` where a
//! row has no value, and, when every row is known before it is printed, leaves
//! out the columns no row has a value in and says so under the table.

use crate::record::{ColType, Record, Value};
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::io::{self, Write};
use std::marker::PhantomData;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Jsonl,
    Json,
    Parquet,
}


impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "table" => Some(Format::Table),
            "csv" => Some(Format::Csv),
            "jsonl" => Some(Format::Jsonl),
            "json" => Some(Format::Json),
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }
}

/// Streams records of one type to a writer in one format.
pub struct RecordWriter<R: Record> {
    format: Format,
    out: Box<dyn Write + Send>,
    table_cols: Vec<usize>,
    /// Per table column: the header shown and the factor its numbers are scaled by.
    table_heads: Vec<(String, f64)>,
    /// Why a column can be empty in every row (said when it is left out).
    empty_reasons: Vec<(String, String)>,
    // table state
    pending: Vec<Vec<String>>,
    widths: Vec<usize>,
    header_done: bool,
    // json state
    rows: u64,
    line: String,
    parquet: Option<ParquetState>,
    _r: PhantomData<R>,
}

const TABLE_SAMPLE: usize = 500;
const PARQUET_BATCH: usize = 65536;

struct ParquetState {
    writer: parquet::arrow::ArrowWriter<Box<dyn Write + Send>>,
    schema: Arc<Schema>,
    columns: Vec<ColumnBuilder>,
    len: usize,
}

enum ColumnBuilder {
    U(UInt64Builder),
    I(Int64Builder),
    F(Float64Builder),
    B(BooleanBuilder),
    S(StringBuilder),
}

impl<R: Record> RecordWriter<R> {
    /// `table_columns`: names of the columns the table format shows (all when empty).
    pub fn new(format: Format, out: Box<dyn Write + Send>, table_columns: &[&str]) -> io::Result<Self> {
        let cols = R::columns();
        let table_cols: Vec<usize> = if table_columns.is_empty() {
            (0..cols.len()).collect()
        } else {
            table_columns.iter().filter_map(|n| cols.iter().position(|c| c.name == *n)).collect()
        };
        let table_heads = table_cols.iter().map(|&i| (cols[i].name.to_string(), 1.0)).collect();
        let mut w = RecordWriter {
            format,
            out,
            table_cols,
            table_heads,
            empty_reasons: Vec::new(),
            pending: Vec::new(),
            widths: Vec::new(),
            header_done: false,
            rows: 0,
            line: String::with_capacity(1024),
            parquet: None,
            _r: PhantomData,
        };
        if format == Format::Parquet {
            let fields: Vec<Field> = cols
                .iter()
                .map(|c| {
                    let dt = match c.ty {
                        ColType::U64 => DataType::UInt64,
                        ColType::I64 => DataType::Int64,
                        ColType::F64 => DataType::Float64,
                        ColType::Bool => DataType::Boolean,
                        ColType::Str => DataType::Utf8,
                    };
                    Field::new(c.name, dt, true)
                })
                .collect();
            let schema = Arc::new(Schema::new(fields));
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build();
            let out = std::mem::replace(&mut w.out, Box::new(io::sink()));
            let writer = parquet::arrow::ArrowWriter::try_new(out, schema.clone(), Some(props))
                .map_err(|e| io::Error::new(io::ErrorKind::Other, e))?;
            w.parquet = Some(ParquetState { writer, schema, columns: new_builders::<R>(), len: 0 });
        }
        if format == Format::Csv {
            let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            writeln!(w.out, "{}", names.join(","))?;
        }
        if format == Format::Json {
            w.out.write_all(b"[")?;
        }
        Ok(w)
    }

    /// Shows table column `column` under `header`, its numbers multiplied by `scale`
    /// (`bandwidth_bps` as `Mbit/s` with 1e-6). Other formats are unchanged.
    pub fn table_header(mut self, column: &str, header: &str, scale: f64) -> Self {
        let cols = R::columns();
        for (k, &i) in self.table_cols.iter().enumerate() {
            if cols[i].name == column {
                self.table_heads[k] = (header.to_string(), scale);
            }
        }
        self
    }

    /// Why `column` may have no value in any row: said under the table when it is left out.
    pub fn empty_reason(mut self, column: &str, reason: &str) -> Self {
        self.empty_reasons.push((column.to_string(), reason.to_string()));
        self
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn write(&mut self, r: &R) -> io::Result<()> {
        self.rows += 1;
        match self.format {
            Format::Csv => {
                self.line.clear();
                for i in 0..R::columns().len() {
                    if i > 0 {
                        self.line.push(',');
                    }
                    let start = self.line.len();
                    let v = r.value(i);
                    v.write_text(&mut self.line);
                    // Only text cells can hold a comma, quote or newline.
                    if v.may_need_quoting() && self.line[start..].contains([',', '"', '\n']) {
                        let cell = self.line.split_off(start);
                        self.line.push('"');
                        self.line.push_str(&cell.replace('"', "\"\""));
                        self.line.push('"');
                    }
                }
                self.line.push('\n');
                self.out.write_all(self.line.as_bytes())
            }
            Format::Jsonl | Format::Json => {
                self.line.clear();
                if self.format == Format::Json && self.rows > 1 {
                    self.line.push(',');
                }
                if self.format == Format::Json {
                    self.line.push('\n');
                }
                crate::record::record_json(r, &mut self.line);
                if self.format == Format::Jsonl {
                    self.line.push('\n');
                }
                self.out.write_all(self.line.as_bytes())
            }
            Format::Table => {
                let row: Vec<String> = self
                    .table_cols
                    .iter()
                    .zip(&self.table_heads)
                    .map(|(&i, (_, scale))| {
                        let mut s = String::new();
                        let v = match r.value(i) {
                            v @ (Value::U(_) | Value::I(_) | Value::F(_)) if *scale != 1.0 => Value::F(v.as_f64().unwrap_or(f64::NAN) * scale),
                            v => v,
                        };
                        match v {
                            // Tables are for reading: three decimals are plenty.
                            Value::F(v) if v.is_finite() => {
                                let t = format!("{v:.3}");
                                let t = t.trim_end_matches('0').trim_end_matches('.');
                                // A tiny negative value rounds to "-0": print 0.
                                s.push_str(if t == "-0" { "0" } else { t });
                            }
                            v => v.write_text(&mut s),
                        }
                        // Names from the wire reach a terminal here: no control characters.
                        match crate::names::for_terminal(&s) {
                            std::borrow::Cow::Borrowed(_) => s,
                            std::borrow::Cow::Owned(safe) => safe,
                        }
                    })
                    .collect();
                if self.header_done {
                    self.print_row(&row)
                } else {
                    self.pending.push(row);
                    if self.pending.len() >= TABLE_SAMPLE {
                        self.flush_table(false)?;
                    }
                    Ok(())
                }
            }
            Format::Parquet => {
                let st = self.parquet.as_mut().expect("parquet state");
                for (i, b) in st.columns.iter_mut().enumerate() {
                    append(b, r.value(i));
                }
                st.len += 1;
                if st.len >= PARQUET_BATCH {
                    self.flush_parquet()?;
                }
                Ok(())
            }
        }
    }

    /// Prints the header and the rows held back. `all_rows`: no row follows, so
    /// columns without a value in any row can be left out (and named).
    fn flush_table(&mut self, all_rows: bool) -> io::Result<()> {
        let mut left_out: Vec<String> = vec![];
        if all_rows && !self.pending.is_empty() {
            let keep: Vec<bool> = (0..self.table_cols.len()).map(|k| self.pending.iter().any(|row| !row[k].is_empty())).collect();
            if keep.iter().any(|k| !k) {
                let cols = R::columns();
                for (k, &i) in self.table_cols.iter().enumerate() {
                    if !keep[k] {
                        left_out.push(cols[i].name.to_string());
                    }
                }
                fn pick<T>(v: &mut Vec<T>, keep: &[bool]) {
                    let mut k = 0;
                    v.retain(|_| {
                        k += 1;
                        keep[k - 1]
                    })
                }
                pick(&mut self.table_cols, &keep);
                pick(&mut self.table_heads, &keep);
                for row in &mut self.pending {
                    pick(row, &keep);
                }
            }
        }
        self.widths = self.table_heads.iter().map(|(h, _)| h.chars().count()).collect();
        for row in &self.pending {
            for (w, cell) in self.widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count().max(1)).min(48);
            }
        }
        let header: Vec<String> = self.table_heads.iter().map(|(h, _)| h.clone()).collect();
        self.header_done = true;
        if header.is_empty() {
            return Ok(());
        }
        self.print_row(&header)?;
        let rule: Vec<String> = self.widths.iter().map(|w| "-".repeat(*w)).collect();
        self.print_row(&rule)?;
        for row in std::mem::take(&mut self.pending) {
            self.print_row(&row)?;
        }
        if !left_out.is_empty() {
            let (with, without): (Vec<&String>, Vec<&String>) =
                left_out.iter().partition(|c| self.empty_reasons.iter().any(|(n, _)| n == *c));
            let mut parts: Vec<String> = vec![];
            if !without.is_empty() {
                parts.push(without.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", "));
            }
            // Columns left out for the same reason are named together.
            let mut by_reason: Vec<(&str, Vec<&str>)> = vec![];
            for c in with {
                let why = self.empty_reasons.iter().find(|(n, _)| n == c).expect("partitioned above").1.as_str();
                match by_reason.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, cs)) => cs.push(c),
                    None => by_reason.push((why, vec![c])),
                }
            }
            for (why, cs) in by_reason {
                parts.push(format!("{} ({why})", cs.join(", ")));
            }
            writeln!(self.out, "(no value in any row, not shown: {})", parts.join("; "))?;
        }
        Ok(())
    }

    fn print_row(&mut self, row: &[String]) -> io::Result<()> {
        let cols = R::columns();
        let dash = String::from("-");
        self.line.clear();
        for (k, cell) in row.iter().enumerate() {
            let w = self.widths[k];
            let numeric = matches!(cols[self.table_cols[k]].ty, ColType::U64 | ColType::I64 | ColType::F64);
            // No value: a dash, so that the table reads (and splits) column by column.
            let cell: &String = if cell.is_empty() { &dash } else { cell };
            let cell: String = if cell.chars().count() > w {
                let mut s: String = cell.chars().take(w.saturating_sub(1)).collect();
                s.push('…');
                s
            } else {
                cell.clone()
            };
            if k > 0 {
                self.line.push_str("  ");
            }
            let pad = w - cell.chars().count();
            if numeric {
                self.line.extend(std::iter::repeat(' ').take(pad));
                self.line.push_str(&cell);
            } else {
                self.line.push_str(&cell);
                if k + 1 < row.len() {
                    self.line.extend(std::iter::repeat(' ').take(pad));
                }
            }
        }
        self.line.push('\n');
        self.out.write_all(self.line.as_bytes())
    }

    fn flush_parquet(&mut self) -> io::Result<()> {
        let st = self.parquet.as_mut().expect("parquet state");
        if st.len == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = st
            .columns
            .iter_mut()
            .map(|b| -> ArrayRef {
                match b {
                    ColumnBuilder::U(b) => Arc::new(b.finish()),
                    ColumnBuilder::I(b) => Arc::new(b.finish()),
                    ColumnBuilder::F(b) => Arc::new(b.finish()),
                    ColumnBuilder::B(b) => Arc::new(b.finish()),
                    ColumnBuilder::S(b) => Arc::new(b.finish()),
                }
            })
            .collect();
        let batch = RecordBatch::try_new(st.schema.clone(), arrays).map_err(|e| io::Error::new(io::ErrorKind::Other, e))?;
        st.writer.write(&batch).map_err(|e| io::Error::new(io::ErrorKind::Other, e))?;
        st.len = 0;
        Ok(())
    }

    /// Like [`finish`](Self::finish) but hands the writer back (not for Parquet).
    pub fn finish_into(mut self) -> io::Result<Box<dyn Write + Send>> {
        if self.format == Format::Parquet {
            self.finish()?;
            return Ok(Box::new(io::sink()));
        }
        self.close()?;
        Ok(std::mem::replace(&mut self.out, Box::new(io::sink())))
    }

    /// Flushes buffered rows and closes the format (JSON bracket, Parquet footer).
    pub fn finish(mut self) -> io::Result<()> {
        self.close()
    }

    fn close(&mut self) -> io::Result<()> {
        match self.format {
            Format::Table => {
                if !self.header_done {
                    self.flush_table(true)?;
                }
            }
            Format::Json => self.out.write_all(b"\n]\n")?,
            Format::Parquet => {
                self.flush_parquet()?;
                if let Some(st) = self.parquet.take() {
                    st.writer.close().map_err(|e| io::Error::new(io::ErrorKind::Other, e))?;
                }
                return Ok(());
            }
            _ => {}
        }
        self.out.flush()
    }
}

fn new_builders<R: Record>() -> Vec<ColumnBuilder> {
    R::columns()
        .iter()
        .map(|c| match c.ty {
            ColType::U64 => ColumnBuilder::U(UInt64Builder::with_capacity(PARQUET_BATCH)),
            ColType::I64 => ColumnBuilder::I(Int64Builder::with_capacity(PARQUET_BATCH)),
            ColType::F64 => ColumnBuilder::F(Float64Builder::with_capacity(PARQUET_BATCH)),
            ColType::Bool => ColumnBuilder::B(BooleanBuilder::with_capacity(PARQUET_BATCH)),
            ColType::Str => ColumnBuilder::S(StringBuilder::with_capacity(PARQUET_BATCH, PARQUET_BATCH * 16)),
        })
        .collect()
}

fn append(b: &mut ColumnBuilder, v: Value<'_>) {
    match b {
        ColumnBuilder::U(b) => match v {
            Value::U(x) => b.append_value(x),
            Value::I(x) if x >= 0 => b.append_value(x as u64),
            _ => b.append_null(),
        },
        ColumnBuilder::I(b) => match v {
            Value::I(x) => b.append_value(x),
            Value::U(x) => b.append_value(x as i64),
            _ => b.append_null(),
        },
        ColumnBuilder::F(b) => match v.as_f64() {
            Some(x) => b.append_value(x),
            None => b.append_null(),
        },
        ColumnBuilder::B(b) => match v {
            Value::B(x) => b.append_value(x),
            _ => b.append_null(),
        },
        ColumnBuilder::S(b) => match v {
            Value::Null => b.append_null(),
            Value::S(s) => b.append_value(s),
            other => {
                let mut s = String::new();
                other.write_text(&mut s);
                b.append_value(s);
            }
        },
    }
}
