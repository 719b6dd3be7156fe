//! Simulated telemetry: a CSV file of samples per leaf that a simulated topology names
//! (`telemetry = "FILE"`). Each row is one sample of one leaf, with the power its whole GPU
//! draws at that sample as an optional fifth field:
//!
//! ```text
//! # sample,leaf,mem_mib,util_pct[,power_w]
//! 0,0,3000,97,250
//! 1,0,3100,
//! ```
//!
//! `leaf` is the leaf's number (as `flexq --leaves` lists them) or its UUID. A job's n-th sample
//! of a leaf reads that leaf's row with `sample` n, so a job sees the same series whenever it
//! starts; a leaf with no row for n, and an empty field, report nothing. Lines starting with
//! `#` are comments.

use super::{Reading, Target, Telemetry};
use crate::ids::{JobId, LeafId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a telemetry file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read telemetry file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("telemetry file {path}, line {line}: {message}")]
    Row {
        path: PathBuf,
        line: u64,
        message: String,
    },
}

#[derive(Debug, serde::Deserialize)]
struct Row {
    sample: u32,
    leaf: String,
    mem_mib: Option<f64>,
    util_pct: Option<f64>,
    #[serde(default)]
    power_w: Option<f64>,
}

/// One row's figures: memory bytes, utilisation, GPU power.
type Figures = (Option<u64>, Option<f64>, Option<f64>);

/// Samples of a simulated topology's leaves, from a file.
#[derive(Debug)]
pub struct FileTelemetry {
    path: PathBuf,
    /// (leaf number or UUID, sample) -> its figures.
    rows: HashMap<(String, u32), Figures>,
    /// Samples each job has taken of each leaf so far.
    taken: HashMap<(JobId, LeafId), u32>,
}

impl FileTelemetry {
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parse a file's text; `path` names it in errors and in the label.
    pub fn parse(text: &str, path: &Path) -> Result<Self, FileError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .comment(Some(b'#'))
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut rows = HashMap::new();
        for r in reader.records() {
            let bad = |line: u64, message: String| FileError::Row {
                path: path.to_path_buf(),
                line,
                message,
            };
            let record = r.map_err(|e| bad(e.position().map_or(0, |p| p.line()), e.to_string()))?;
            let line = record.position().map_or(0, |p| p.line());
            let bad = |message: String| bad(line, message);
            if !(4..=5).contains(&record.len()) {
                return Err(bad(format!(
                    "expected sample,leaf,mem_mib,util_pct[,power_w], not {} fields",
                    record.len()
                )));
            }
            let row: Row = record
                .deserialize(None)
                .map_err(|e| bad(format!("expected sample,leaf,mem_mib,util_pct: {e}")))?;
            let mem = match row.mem_mib {
                Some(m) if !(m >= 0.0 && m.is_finite()) => {
                    return Err(bad(format!("leaf {}: bad mem_mib {m}", row.leaf)))
                }
                m => m.map(|m| (m * 1048576.0).round() as u64),
            };
            for (name, v) in [("util_pct", row.util_pct), ("power_w", row.power_w)] {
                if let Some(v) = v.filter(|v| !(*v >= 0.0 && v.is_finite())) {
                    return Err(bad(format!("leaf {}: bad {name} {v}", row.leaf)));
                }
            }
            rows.insert((row.leaf, row.sample), (mem, row.util_pct, row.power_w));
        }
        Ok(FileTelemetry {
            path: path.to_path_buf(),
            rows,
            taken: HashMap::new(),
        })
    }
}

impl Telemetry for FileTelemetry {
    fn label(&self) -> String {
        format!("simulated ({})", self.path.display())
    }

    fn read(&mut self, targets: &[Target]) -> Vec<Reading> {
        // Jobs that no longer hold their leaf start again from sample 0 when they return.
        let holding: Vec<(JobId, LeafId)> = targets.iter().map(|t| (t.job, t.leaf)).collect();
        self.taken.retain(|k, _| holding.contains(k));
        targets
            .iter()
            .map(|t| {
                let n = self.taken.entry((t.job, t.leaf)).or_insert(0);
                let sample = *n;
                *n += 1;
                let row = self
                    .rows
                    .get(&(t.leaf.0.to_string(), sample))
                    .or_else(|| self.rows.get(&(t.uuid.clone(), sample)));
                // A share's memory and utilisation are the whole GPU's: not the job's.
                let own = row.filter(|_| t.whole);
                Reading {
                    leaf: t.leaf,
                    job: t.job,
                    mem_bytes: own.and_then(|r| r.0),
                    util_pct: own.and_then(|r| r.1),
                    gpu_power_w: row.and_then(|r| r.2),
                }
            })
            .collect()
    }

    fn resume(&mut self, job: JobId, leaf: LeafId, taken: u32) {
        self.taken.insert((job, leaf), taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(leaf: u32, job: u64) -> Target {
        Target {
            leaf: LeafId(leaf),
            uuid: format!("MIG-{leaf}"),
            job: JobId(job),
            whole: true,
            gpu_uuid: "GPU-0".into(),
            gpu_share: 1.0 / 7.0,
            gpu_instance: Some(leaf),
            leaf_mem_bytes: 5 << 30,
        }
    }

    #[test]
    fn each_job_reads_its_leaves_series_from_the_start() {
        let text = "# sample,leaf,mem_mib,util_pct\n0,0,1024,50,300\n1,0,2048,\n0,MIG-1,,\n";
        let mut t = FileTelemetry::parse(text, Path::new("s.csv")).unwrap();
        assert_eq!(t.label(), "simulated (s.csv)");
        let r = t.read(&[target(0, 7), target(1, 7)]);
        assert_eq!(r[0].mem_bytes, Some(1 << 30));
        assert_eq!((r[0].util_pct, r[0].gpu_power_w), (Some(50.0), Some(300.0)));
        assert_eq!(r[1].gpu_power_w, None);
        assert_eq!((r[1].mem_bytes, r[1].util_pct), (None, None));
        let r = t.read(&[target(0, 7)]);
        assert_eq!((r[0].mem_bytes, r[0].util_pct), (Some(2 << 30), None));
        // Past its series the leaf reports nothing; another job starts it again.
        assert_eq!(t.read(&[target(0, 7)])[0].mem_bytes, None);
        assert_eq!(t.read(&[target(0, 8)])[0].mem_bytes, Some(1 << 30));
        // A share of a whole GPU reports its GPU's power, never the GPU's memory.
        let shared = Target {
            whole: false,
            ..target(0, 9)
        };
        let r = t.read(&[shared]);
        assert_eq!((r[0].mem_bytes, r[0].gpu_power_w), (None, Some(300.0)));
    }

    #[test]
    fn bad_rows_name_the_file_and_line() {
        let e = FileTelemetry::parse("0,0,1,2\nx,0,1,2\n", Path::new("s.csv")).unwrap_err();
        assert!(
            e.to_string().starts_with("telemetry file s.csv, line 2:"),
            "{e}"
        );
        let e = FileTelemetry::parse("0,0,-5,1\n", Path::new("s.csv")).unwrap_err();
        assert!(
            e.to_string().contains("line 1: leaf 0: bad mem_mib -5"),
            "{e}"
        );
        let e = FileTelemetry::parse("0,0,1,1,-2\n", Path::new("s.csv")).unwrap_err();
        assert!(e.to_string().contains("bad power_w -2"), "{e}");
        let e = FileTelemetry::parse("0,0,1\n", Path::new("s.csv")).unwrap_err();
        assert!(e.to_string().contains("not 3 fields"), "{e}");
    }
}
