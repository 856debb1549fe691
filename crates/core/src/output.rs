//! Sinks: write any [`Record`] type as an aligned table, CSV, JSON Lines, a
//! JSON array, or Parquet (readable by pandas, polars and DuckDB).
//! CSV/JSON/Parquet always carry every column; the table shows a chosen subset.

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
        let mut w = RecordWriter {
            format,
            out,
            table_cols,
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
                    .map(|&i| {
                        let mut s = String::new();
                        match r.value(i) {
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
                        self.flush_table()?;
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

    fn flush_table(&mut self) -> io::Result<()> {
        let cols = R::columns();
        self.widths = self.table_cols.iter().map(|&i| cols[i].name.len()).collect();
        for row in &self.pending {
            for (w, cell) in self.widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count()).min(48);
            }
        }
        let header: Vec<String> = self.table_cols.iter().map(|&i| cols[i].name.to_string()).collect();
        self.header_done = true;
        self.print_row(&header)?;
        let rule: Vec<String> = self.widths.iter().map(|w| "-".repeat(*w)).collect();
        self.print_row(&rule)?;
        for row in std::mem::take(&mut self.pending) {
            self.print_row(&row)?;
        }
        Ok(())
    }

    fn print_row(&mut self, row: &[String]) -> io::Result<()> {
        let cols = R::columns();
        self.line.clear();
        for (k, cell) in row.iter().enumerate() {
            let w = self.widths[k];
            let numeric = matches!(cols[self.table_cols[k]].ty, ColType::U64 | ColType::I64 | ColType::F64);
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
                    self.flush_table()?;
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
