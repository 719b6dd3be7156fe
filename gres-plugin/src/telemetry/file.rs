//! Simulated telemetry: a CSV file of samples per leaf that a simulated topology names
//! (`telemetry = "FILE"`). Each row is one sample of one leaf, with the power its whole GPU
//! draws at that sample as an optional fifth field, and, for a whole GPU that jobs share
//! (`--gpu-fraction`), what each job's own processes use as optional sixth and seventh fields
//! (NVML's per-process figures; a share reports those, never the GPU's own):
//!
//! ```text
//! # sample,leaf,mem_mib,util_pct[,power_w[,share_mem_mib,share_util_pct]]
//! 0,0,3000,97,250
//! 1,0,3100,
//! 0,1,30000,80,300,12000,35
//! ```
//!
//! `leaf` is the leaf's number (as `flexq --leaves` lists them) or its UUID. A job's n-th sample
//! of a leaf reads that leaf's row with `sample` n, so a job sees the same series whenever it
//! starts; a leaf with no row for n, and an empty field, report nothing. Lines starting with
//! `#` are comments.

use super::{Reading, Series, Target, Telemetry};
use crate::ids::JobId;
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
    #[serde(default)]
    share_mem_mib: Option<f64>,
    #[serde(default)]
    share_util_pct: Option<f64>,
}

/// One row's figures: the leaf's memory bytes and utilisation, its GPU's power, and a share's
/// own memory bytes and utilisation.
#[derive(Clone, Copy, Debug)]
struct Figures {
    mem: Option<u64>,
    util: Option<f64>,
    power: Option<f64>,
    share_mem: Option<u64>,
    share_util: Option<f64>,
}

/// Samples of a simulated topology's leaves, from a file.
#[derive(Debug)]
pub struct FileTelemetry {
    path: PathBuf,
    /// (leaf number or UUID, sample) -> its figures.
    rows: HashMap<(String, u32), Figures>,
    /// Where each job is in its series.
    series: Series,
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
            if !(4..=7).contains(&record.len()) {
                return Err(bad(format!(
                    "expected sample,leaf,mem_mib,util_pct[,power_w[,share_mem_mib,\
                     share_util_pct]], not {} fields",
                    record.len()
                )));
            }
            let row: Row = record
                .deserialize(None)
                .map_err(|e| bad(format!("expected sample,leaf,mem_mib,util_pct: {e}")))?;
            for (name, v) in [
                ("mem_mib", row.mem_mib),
                ("util_pct", row.util_pct),
                ("power_w", row.power_w),
                ("share_mem_mib", row.share_mem_mib),
                ("share_util_pct", row.share_util_pct),
            ] {
                if let Some(v) = v.filter(|v| !(*v >= 0.0 && v.is_finite())) {
                    return Err(bad(format!("leaf {}: bad {name} {v}", row.leaf)));
                }
            }
            let bytes = |m: Option<f64>| m.map(|m| (m * 1048576.0).round() as u64);
            let figures = Figures {
                mem: bytes(row.mem_mib),
                util: row.util_pct,
                power: row.power_w,
                share_mem: bytes(row.share_mem_mib),
                share_util: row.share_util_pct,
            };
            rows.insert((row.leaf, row.sample), figures);
        }
        Ok(FileTelemetry {
            path: path.to_path_buf(),
            rows,
            series: Series::default(),
        })
    }
}

impl Telemetry for FileTelemetry {
    fn label(&self) -> String {
        format!("simulated ({})", self.path.display())
    }

    fn read(&mut self, targets: &[Target]) -> Vec<Reading> {
        let samples = self.series.next(targets);
        targets
            .iter()
            .zip(samples)
            .map(|(t, sample)| {
                let row = self
                    .rows
                    .get(&(t.leaf.0.to_string(), sample))
                    .or_else(|| self.rows.get(&(t.uuid.clone(), sample)));
                // A share reads its own processes' figures, never the whole GPU's.
                let (mem, util) = match (row, t.whole) {
                    (Some(r), true) => (r.mem, r.util),
                    (Some(r), false) => (r.share_mem, r.share_util),
                    (None, _) => (None, None),
                };
                Reading {
                    leaf: t.leaf,
                    job: t.job,
                    mem_bytes: mem,
                    util_pct: util,
                    gpu_power_w: row.and_then(|r| r.power),
                }
            })
            .collect()
    }

    fn resume(&mut self, job: JobId, taken: u32) {
        self.series.resume(job, taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(leaf: u32, job: u64) -> Target {
        Target::test_mig_leaf(leaf, job)
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
        let r = t.read(std::slice::from_ref(&shared));
        assert_eq!((r[0].mem_bytes, r[0].gpu_power_w), (None, Some(300.0)));
        // Where the row gives a share's own figures, the share reports those.
        let mut t = FileTelemetry::parse("0,0,30000,80,300,512,35\n", Path::new("s.csv")).unwrap();
        let r = t.read(&[shared]);
        assert_eq!(
            (r[0].mem_bytes, r[0].util_pct),
            (Some(512 << 20), Some(35.0))
        );
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
        let e = FileTelemetry::parse("0,0,1,1,1,-1,1\n", Path::new("s.csv")).unwrap_err();
        assert!(e.to_string().contains("bad share_mem_mib -1"), "{e}");
    }
}
