//! Why: one run produces one set of figures, shown two ways: a table a person reads on stdout and
//! JSON a script (or the test) reads. Both come from the same rows, so they cannot disagree.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde::ser::Serializer;

use crate::machine::Machine;

/// One value in a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Int(u64),
    /// A figure and the decimals it is printed with.
    Float(f64, usize),
    Text(String),
    Empty,
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Int(n) => serializer.serialize_u64(*n),
            Cell::Float(x, _) if x.is_finite() => serializer.serialize_f64(*x),
            Cell::Text(t) => serializer.serialize_str(t),
            Cell::Float(..) | Cell::Empty => serializer.serialize_none(),
        }
    }
}

impl Cell {
    /// A figure with as many decimals as its size deserves.
    pub fn figure(x: f64) -> Cell {
        let decimals = if x.abs() >= 100.0 {
            0
        } else if x.abs() >= 10.0 {
            1
        } else {
            2
        };
        Cell::Float(x, decimals)
    }

    pub fn maybe(x: Option<f64>) -> Cell {
        x.map_or(Cell::Empty, Cell::figure)
    }

    fn render(&self) -> String {
        match self {
            Cell::Int(n) => n.to_string(),
            Cell::Float(x, d) if x.is_finite() => format!("{x:.d$}", d = *d),
            Cell::Text(t) => t.clone(),
            Cell::Float(..) | Cell::Empty => "-".to_owned(),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(n) => Some(*n as f64),
            Cell::Float(x, _) => Some(*x),
            _ => None,
        }
    }
}

/// How a row turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every call succeeded.
    Ok,
    /// Some calls failed; figures come from the others.
    Errors,
    /// Nothing could be measured.
    Failed,
    /// The contender cannot take part in this case.
    NotApplicable,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Errors => "errors",
            Status::Failed => "failed",
            Status::NotApplicable => "n/a",
        }
    }
}

/// One contender in one case of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub case: String,
    pub contender: String,
    pub status: Status,
    /// Why the row is n/a or failed, or the first error of a row with errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub values: BTreeMap<String, Cell>,
}

impl Row {
    pub fn new(case: impl Into<String>, contender: &str) -> Row {
        Row {
            case: case.into(),
            contender: contender.to_owned(),
            status: Status::Ok,
            note: None,
            values: BTreeMap::new(),
        }
    }

    pub fn not_applicable(case: impl Into<String>, contender: &str, why: &str) -> Row {
        let mut row = Row::new(case, contender);
        row.status = Status::NotApplicable;
        row.note = Some(why.to_owned());
        row
    }

    pub fn failed(case: impl Into<String>, contender: &str, why: impl Into<String>) -> Row {
        let mut row = Row::new(case, contender);
        row.status = Status::Failed;
        row.note = Some(why.into());
        row
    }

    pub fn set(&mut self, key: &str, cell: Cell) -> &mut Self {
        self.values.insert(key.to_owned(), cell);
        self
    }

    pub fn value(&self, key: &str) -> Option<f64> {
        self.values.get(key).and_then(Cell::as_f64)
    }

    /// Records call counts; any error turns the row to `errors` (or `failed` when none succeeded).
    pub fn set_calls(&mut self, calls: u64, errors: u64, first_error: Option<&str>) -> &mut Self {
        self.set("calls", Cell::Int(calls));
        self.set("errors", Cell::Int(errors));
        if errors > 0 && self.status == Status::Ok {
            self.status = if calls == 0 {
                Status::Failed
            } else {
                Status::Errors
            };
            if self.note.is_none() {
                self.note = first_error.map(|e| format!("first error: {e}"));
            }
        } else if calls == 0 && self.status == Status::Ok {
            self.status = Status::Failed;
            self.note
                .get_or_insert_with(|| "no call completed".to_owned());
        }
        self
    }
}

/// A column of a scenario's table.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub key: &'static str,
    pub header: &'static str,
}

pub const fn column(key: &'static str, header: &'static str) -> Column {
    Column { key, header }
}

/// One scenario's results.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub id: &'static str,
    pub title: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub seconds: f64,
}

impl ScenarioReport {
    pub fn new(id: &'static str, title: impl Into<String>, columns: Vec<Column>) -> Self {
        ScenarioReport {
            id,
            title: title.into(),
            columns,
            rows: Vec::new(),
            notes: Vec::new(),
            seconds: 0.0,
        }
    }

    pub fn row(&self, case: &str, contender: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.case == case && r.contender == contender)
    }

    /// The table as text.
    pub fn render(&self) -> String {
        let mut headers = vec!["case", "contender", "status"];
        headers.extend(self.columns.iter().map(|c| c.header));
        let mut lines: Vec<Vec<String>> = Vec::new();
        for row in &self.rows {
            let mut line = vec![
                row.case.clone(),
                row.contender.clone(),
                row.status.label().to_owned(),
            ];
            for column in &self.columns {
                line.push(
                    row.values
                        .get(column.key)
                        .map_or("-".to_owned(), Cell::render),
                );
            }
            lines.push(line);
        }
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for line in &lines {
            for (i, cell) in line.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        let _ = writeln!(out, "== {} ==", self.title);
        let pad = |cells: &[String], out: &mut String| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let width = widths.get(i).copied().unwrap_or(0);
                // Text columns (case, contender, status) left-aligned, figures right-aligned.
                if i < 3 {
                    let _ = write!(text, "{cell:<width$}  ");
                } else {
                    let _ = write!(text, "{cell:>width$}  ");
                }
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        pad(
            &headers.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>(),
            &mut out,
        );
        for line in &lines {
            pad(line, &mut out);
        }
        let notes: Vec<String> = self
            .rows
            .iter()
            .filter_map(|r| {
                r.note
                    .as_ref()
                    .map(|n| format!("  {} / {}: {n}", r.case, r.contender))
            })
            .collect();
        for note in notes {
            let _ = writeln!(out, "{note}");
        }
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        out
    }
}

/// Everything one run found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tool: String,
    pub command: String,
    pub mode: &'static str,
    pub started_unix: u64,
    pub seconds: f64,
    pub machine: Machine,
    /// What each contender is and runs as.
    pub contenders: BTreeMap<String, String>,
    pub scenarios: Vec<ScenarioReport>,
}

impl Report {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "manifold-bench ({}) on {} x {}, {:.1} GiB, Linux {}; load before {}, after {}; {:.0} s",
            self.mode,
            m.cpus,
            m.cpu_model,
            m.memory_bytes as f64 / (1u64 << 30) as f64,
            m.kernel,
            m.load_before,
            m.load_after,
            self.seconds
        );
        let _ = writeln!(out, "command: {}", self.command);
        for (name, what) in &self.contenders {
            let _ = writeln!(out, "  {name}: {what}");
        }
        for scenario in &self.scenarios {
            let _ = writeln!(out);
            out.push_str(&scenario.render());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn rows_with_errors_say_so_and_keep_the_first_error() {
        let mut row = Row::new("case", "x");
        row.set_calls(10, 2, Some("boom"));
        assert_eq!(row.status, Status::Errors);
        assert_eq!(row.note.as_deref(), Some("first error: boom"));
        let mut none = Row::new("case", "x");
        none.set_calls(0, 3, Some("down"));
        assert_eq!(none.status, Status::Failed);
    }

    #[test]
    fn the_table_aligns_columns_and_lists_notes() {
        let mut report = ScenarioReport::new("t", "Title", vec![column("p50_us", "p50 us")]);
        let mut row = Row::new("small", "direct");
        row.set("p50_us", Cell::figure(12.345));
        report.rows.push(row);
        report
            .rows
            .push(Row::not_applicable("small", "other", "cannot"));
        let text = report.render();
        assert!(text.contains("== Title =="));
        assert!(text.contains("12.3"));
        assert!(text.contains("small / other: cannot"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rows"][0]["values"]["p50_us"], 12.345);
        assert_eq!(json["rows"][1]["status"], "not_applicable");
    }
}
