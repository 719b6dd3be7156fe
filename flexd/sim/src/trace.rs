//! Trace files: CSV with a header naming the columns, in any order.
//!
//! Required: `job_id,submit_s,leaves,duration_s,kind` (kind = train|infer). Optional: `mem_gb`
//! (GPU memory, 10^9 bytes), `time_limit_s` (defaults to [`user_limit`] of the duration with
//! the middle overestimate, 1.5, on a 15-minute granularity), `after` (`:`-separated job_ids
//! that must have ended before the job may start, flexsub's `afterany`), `user` (who
//! submitted it, for `flexsim fairness`), `cpus` (cores for the whole job; also read as
//! Slurm's `ReqCPUS`, `NCPUS` or `AllocCPUS`, or Helios' `cpu_num`) and `host_mem` (host
//! memory in Slurm's sizes, also read as sacct's `ReqMem`: [`host_mem`]). A row of 0 leaves
//! with cores is a CPU-only job; without cores it is an error, as it always was.
//! `duration_s` is the job's run time on a one-to-one MIG instance of its size. Times may have
//! decimals; they are rounded up to whole seconds. Lines starting with `#` are comments. A bad
//! row is rejected with its line number, the column (as the header names it) and the value.

mod host_mem;

pub use host_mem::host_mem;

use flex_sched::JobKind;
use gres_plugin::HostMem;
use host_mem::host_mem_field;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::path::Path;

/// One job of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    pub id: u64,
    pub submit_s: u64,
    /// Compute slices (MIG leaves) it asks for; 0 for a CPU-only job.
    pub leaves: u32,
    /// Run time on a one-to-one instance of its size.
    pub duration_s: u64,
    pub kind: JobKind,
    pub mem_gb: Option<f64>,
    pub time_limit_s: Option<u64>,
    /// Who submitted it (optional column `user`): fair share is between users.
    pub user: Option<String>,
    /// Jobs (by `job_id`) that must have ended before it may start.
    pub after: Vec<u64>,
    /// Cores for the whole job at least (0: not given, one per leaf).
    pub cpus: u32,
    /// Host memory (None: not given, no limit).
    pub host_mem: Option<HostMem>,
}

impl TraceJob {
    /// The limit: the given one, else what a user would set (duration × 1.5, rounded up to a
    /// quarter hour). A job that runs longer ends TIMEOUT at it, as under flexd.
    pub fn limit_s(&self) -> u64 {
        self.time_limit_s
            .unwrap_or_else(|| user_limit(self.duration_s, 1.5, LIMIT_GRANULARITY_S))
    }
}

/// The granularity users set limits in: a quarter hour (`-t 0:45:00`, `-t 2:00:00`).
pub const LIMIT_GRANULARITY_S: u64 = 900;

/// A time limit as users set it: the run they expect times their overestimate `factor`,
/// rounded up to `granularity_s`.
pub fn user_limit(duration_s: u64, factor: f64, granularity_s: u64) -> u64 {
    let raw = (duration_s as f64 * factor - 1e-6).ceil().max(1.0) as u64;
    raw.div_ceil(granularity_s) * granularity_s
}

/// A whole trace, jobs in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub jobs: Vec<TraceJob>,
}

/// A trace that cannot be read; the message names the file and line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read trace {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}:{line}: {message}")]
    Bad {
        origin: String,
        line: u64,
        message: String,
    },
}

const REQUIRED: [&str; 5] = ["job_id", "submit_s", "leaves", "duration_s", "kind"];
const OPTIONAL: [&str; 4] = ["mem_gb", "time_limit_s", "after", "user"];
/// The names of the cores column, in order of preference: what the job asked for before what
/// it was given (sacct's `AllocCPUS` is 0 for a job that never ran).
const CPUS: [&str; 5] = ["cpus", "ReqCPUS", "NCPUS", "AllocCPUS", "cpu_num"];
/// The names of the host memory column.
const HOST_MEM: [&str; 2] = ["host_mem", "ReqMem"];
/// More cores than any host: a guard against a column of something else.
const MAX_CPUS: u32 = 65_536;
/// Larger than any host: a guard against typos such as `leaves=70000`.
const MAX_LEAVES: u32 = 4096;
/// Ten years: a guard against times given in milliseconds.
const MAX_SECONDS: f64 = 10.0 * 365.0 * 86400.0;

impl Trace {
    /// Read a trace file.
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let f = std::fs::File::open(path).map_err(|source| TraceError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_reader(f, &path.display().to_string())
    }

    /// Parse a trace; `origin` names it in errors.
    pub fn from_reader<R: Read>(mut r: R, origin: &str) -> Result<Self, TraceError> {
        let mut data = Vec::new();
        r.read_to_end(&mut data)
            .map_err(|source| TraceError::Read {
                path: origin.to_string(),
                source,
            })?;
        let lines = LineIndex::new(&data);
        let bad = |line: u64, message: String| TraceError::Bad {
            origin: origin.to_string(),
            line,
            message,
        };
        let mut rdr = csv::ReaderBuilder::new()
            // Fields are trimmed as they are read (`Row::field`): the csv crate's own trimming
            // copies every record.
            .trim(csv::Trim::Headers)
            .comment(Some(b'#'))
            .from_reader(data.as_slice());
        let headers = rdr
            .headers()
            .map_err(|e| bad(lines.of_error(&e, 1), csv_message(&e)))?
            .clone();
        let header_line = headers.position().map_or(1, |p| lines.line_at(p.byte()));
        let cols = Columns::find(&headers, origin, header_line)?;

        let rows = data.iter().filter(|&&c| c == b'\n').count();
        let mut jobs = Vec::with_capacity(rows);
        let mut first_at = SeenIds::with_capacity(rows);
        // One record reused for every row; line numbers are found only for an error.
        let mut rec = csv::StringRecord::new();
        while rdr
            .read_record(&mut rec)
            .map_err(|e| bad(lines.of_error(&e, 0), csv_message(&e)))?
        {
            let row = Row {
                rec: &rec,
                at: rec.position().map(|p| p.byte()),
                lines: &lines,
                origin,
            };
            jobs.push(row.job(&cols, &mut first_at)?);
        }
        if jobs.is_empty() {
            return Err(bad(header_line, "the trace has no jobs".into()));
        }
        Ok(Trace { jobs })
    }

    /// Write the trace as CSV; optional columns only when some job has them.
    pub fn write<W: Write>(&self, w: W) -> std::io::Result<()> {
        let with_mem = self.jobs.iter().any(|j| j.mem_gb.is_some());
        let with_limit = self.jobs.iter().any(|j| j.time_limit_s.is_some());
        let with_after = self.jobs.iter().any(|j| !j.after.is_empty());
        let mut out = csv::Writer::from_writer(w);
        let mut header: Vec<&str> = REQUIRED.to_vec();
        if with_mem {
            header.push("mem_gb");
        }
        if with_limit {
            header.push("time_limit_s");
        }
        if with_after {
            header.push("after");
        }
        let with_user = self.jobs.iter().any(|j| j.user.is_some());
        if with_user {
            header.push("user");
        }
        let with_cpus = self.jobs.iter().any(|j| j.cpus > 0);
        if with_cpus {
            header.push("cpus");
        }
        let with_host_mem = self.jobs.iter().any(|j| j.host_mem.is_some());
        if with_host_mem {
            header.push("host_mem");
        }
        out.write_record(&header)?;
        for j in &self.jobs {
            let mut row = vec![
                j.id.to_string(),
                j.submit_s.to_string(),
                j.leaves.to_string(),
                j.duration_s.to_string(),
                kind_name(j.kind).to_string(),
            ];
            if with_mem {
                row.push(j.mem_gb.map(|g| g.to_string()).unwrap_or_default());
            }
            if with_limit {
                row.push(j.time_limit_s.map(|t| t.to_string()).unwrap_or_default());
            }
            if with_after {
                let ids: Vec<String> = j.after.iter().map(u64::to_string).collect();
                row.push(ids.join(":"));
            }
            if with_user {
                row.push(j.user.clone().unwrap_or_default());
            }
            if with_cpus {
                row.push(if j.cpus > 0 {
                    j.cpus.to_string()
                } else {
                    String::new()
                });
            }
            if with_host_mem {
                row.push(j.host_mem.map(host_mem_field).unwrap_or_default());
            }
            out.write_record(&row)?;
        }
        out.flush()
    }
}

/// A map keyed by job id.
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A hash of job ids (and other small keys of a trace) with one multiply per word (FxHash's):
/// they come from a trace, and a hash that resists chosen collisions costs more than reading it.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// Every job_id seen so far and where its record starts, to refuse one seen twice. While ids
/// come in increasing order, as generated traces have them, a new one is checked against the
/// last alone and noted in a list; the first one out of order turns the list into a map.
struct SeenIds {
    in_order: Vec<(u64, Option<u64>)>,
    map: Option<IdMap<Option<u64>>>,
}

impl SeenIds {
    fn with_capacity(rows: usize) -> Self {
        Self {
            in_order: Vec::with_capacity(rows),
            map: None,
        }
    }

    /// Note `id`, whose record starts at `at`; where it was seen first if it was.
    fn insert(&mut self, id: u64, at: Option<u64>) -> Option<Option<u64>> {
        let map = match &mut self.map {
            Some(map) => map,
            None => match self.in_order.last() {
                Some(&(last, _)) if id <= last => {
                    self.map.insert(self.in_order.drain(..).collect())
                }
                _ => {
                    self.in_order.push((id, at));
                    return None;
                }
            },
        };
        match map.entry(id) {
            std::collections::hash_map::Entry::Occupied(first) => Some(*first.get()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(at);
                None
            }
        }
    }
}

/// Line numbers of byte offsets in a trace's text.
///
/// The csv crate counts neither comment lines nor blank lines, and a record's position may be
/// at the comments before it: those are skipped, then the newlines before it counted (only
/// for an error or the header, so they are counted then).
struct LineIndex<'d> {
    data: &'d [u8],
}

impl<'d> LineIndex<'d> {
    fn new(data: &'d [u8]) -> Self {
        Self { data }
    }

    /// The line (from 1) of the record at `byte`.
    fn line_at(&self, byte: u64) -> u64 {
        let data = self.data;
        let mut b = (byte as usize).min(data.len());
        while b < data.len() {
            let end = data[b..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(data.len(), |i| b + i);
            let line = &data[b..end];
            if line.first() == Some(&b'#') || line.iter().all(|c| c.is_ascii_whitespace()) {
                // A last line without its newline ends the data.
                b = (end + 1).min(data.len());
            } else {
                break;
            }
        }
        1 + data[..b].iter().filter(|&&c| c == b'\n').count() as u64
    }

    /// The line of the record at `at`, 0 where it is not known.
    fn line(&self, at: Option<u64>) -> u64 {
        at.map_or(0, |b| self.line_at(b))
    }

    /// The line a csv error is about; `unknown` where it names no position.
    fn of_error(&self, e: &csv::Error, unknown: u64) -> u64 {
        csv_byte(e).map_or(unknown, |b| self.line_at(b))
    }
}

/// Where each known column is in the header.
struct Columns {
    /// The [`REQUIRED`] columns, in that order.
    required: [usize; 5],
    mem_gb: Option<usize>,
    time_limit_s: Option<usize>,
    after: Option<usize>,
    user: Option<usize>,
    /// The cores column and its name in the header.
    cpus: Option<(usize, &'static str)>,
    /// The host memory column and its name in the header.
    host_mem: Option<(usize, &'static str)>,
}

impl Columns {
    /// Find the columns of a header on line `line`; a missing required column is an error,
    /// an unknown one a warning.
    fn find(headers: &csv::StringRecord, origin: &str, line: u64) -> Result<Self, TraceError> {
        let col = |name: &str| headers.iter().position(|h| h == name);
        let mut required = [0usize; 5];
        for (i, name) in REQUIRED.iter().enumerate() {
            required[i] = col(name).ok_or_else(|| TraceError::Bad {
                origin: origin.to_string(),
                line,
                message: format!(
                    "missing column \"{name}\" (the header needs {})",
                    REQUIRED.join(",")
                ),
            })?;
        }
        for h in headers.iter() {
            let known = |names: &[&str]| names.contains(&h);
            if !known(&REQUIRED) && !known(&OPTIONAL) && !known(&CPUS) && !known(&HOST_MEM) {
                tracing::warn!("{origin}:{line}: ignoring unknown column \"{h}\"");
            }
        }
        Ok(Self {
            required,
            mem_gb: col("mem_gb"),
            time_limit_s: col("time_limit_s"),
            after: col("after"),
            user: col("user"),
            cpus: CPUS.iter().find_map(|&n| col(n).map(|i| (i, n))),
            host_mem: HOST_MEM.iter().find_map(|&n| col(n).map(|i| (i, n))),
        })
    }
}

/// One record of a trace, with the line it is on for errors.
struct Row<'r> {
    rec: &'r csv::StringRecord,
    /// Where the record starts in the text.
    at: Option<u64>,
    lines: &'r LineIndex<'r>,
    origin: &'r str,
}

impl<'r> Row<'r> {
    /// The job of this row. `first_at` holds where every job_id seen so far is; a job_id seen
    /// before is an error.
    fn job(&self, cols: &Columns, first_at: &mut SeenIds) -> Result<TraceJob, TraceError> {
        let [id_col, submit_col, leaves_col, duration_col, kind_col] = cols.required;
        let id_s = self.field(id_col);
        let id: u64 = id_s
            .parse()
            .map_err(|_| self.err("job_id", id_s, "is not a whole number"))?;
        if let Some(prev) = first_at.insert(id, self.at) {
            let prev = self.lines.line(prev);
            return Err(self.err(
                "job_id",
                id_s,
                &format!("appears twice (first on line {prev})"),
            ));
        }
        let submit_s = self.seconds("submit_s", self.field(submit_col), true)?;
        let cpus = match cols.cpus {
            None => 0,
            Some((i, name)) => self.cpus(name, self.field(i))?,
        };
        let leaves = self.leaves(self.field(leaves_col), cpus, cols.cpus.map(|(_, n)| n))?;
        let duration_s = self.seconds("duration_s", self.field(duration_col), false)?;
        let kind = self.kind(self.field(kind_col))?;
        let mem_gb = match self.optional(cols.mem_gb) {
            None => None,
            Some(s) => match s.parse::<f64>() {
                Ok(_) if leaves == 0 => {
                    return Err(self.err("mem_gb", s, "is GPU memory for a job of 0 leaves"))
                }
                Ok(g) if g.is_finite() && g > 0.0 => Some(g),
                _ => return Err(self.err("mem_gb", s, "must be a number of GB greater than 0")),
            },
        };
        let host_mem = match cols.host_mem {
            None => None,
            Some((i, name)) => match self.field(i) {
                "" => None,
                s => match host_mem(s) {
                    Ok(HostMem::PerGpu(_)) if leaves == 0 => {
                        return Err(self.err(name, s, "is memory per GPU for a job of 0 leaves"))
                    }
                    Ok(m) => Some(m),
                    Err(why) => return Err(self.err(name, s, why)),
                },
            },
        };
        let time_limit_s = match self.optional(cols.time_limit_s) {
            None => None,
            Some(s) => Some(self.seconds("time_limit_s", s, false)?),
        };
        let user = self.optional(cols.user).map(String::from);
        let after = match self.optional(cols.after) {
            None => Vec::new(),
            Some(s) => s
                .split(':')
                .map(|d| d.trim().parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| self.err("after", s, "is not job_ids separated by ':'"))?,
        };
        Ok(TraceJob {
            id,
            submit_s,
            leaves,
            duration_s,
            kind,
            mem_gb,
            time_limit_s,
            user,
            after,
            cpus,
            host_mem,
        })
    }

    /// The field in column `i`, trimmed; empty where the record is short.
    fn field(&self, i: usize) -> &'r str {
        self.rec.get(i).unwrap_or("").trim()
    }

    /// An optional column's field; None where the column is absent or the field empty.
    fn optional(&self, col: Option<usize>) -> Option<&'r str> {
        col.map(|i| self.field(i)).filter(|s| !s.is_empty())
    }

    /// A bad field: its column's name, its value and what is wrong with it.
    fn err(&self, name: &str, value: &str, why: &str) -> TraceError {
        TraceError::Bad {
            origin: self.origin.to_string(),
            line: self.lines.line(self.at),
            message: format!("{name} \"{value}\" {why}"),
        }
    }

    /// A field of seconds ([`seconds`]).
    fn seconds(&self, name: &str, value: &str, zero_ok: bool) -> Result<u64, TraceError> {
        seconds(value, zero_ok).map_err(|why| self.err(name, value, why))
    }

    /// The `leaves` field: a whole number up to [`MAX_LEAVES`]; 0 only for a CPU-only job, one
    /// with `cpus` cores from the column `cpus_col`.
    fn leaves(&self, s: &str, cpus: u32, cpus_col: Option<&str>) -> Result<u32, TraceError> {
        let leaves: u32 = s
            .parse()
            .map_err(|_| self.err("leaves", s, "is not a whole number"))?;
        match (leaves, cpus_col) {
            (0, None) => return Err(self.err("leaves", s, "must be at least 1")),
            (0, Some(col)) if cpus == 0 => {
                let why = format!("must be at least 1, or {col} at least 1 for a CPU-only job");
                return Err(self.err("leaves", s, &why));
            }
            _ => {}
        }
        if leaves > MAX_LEAVES {
            return Err(self.err("leaves", s, &format!("is more than {MAX_LEAVES}")));
        }
        Ok(leaves)
    }

    /// A cores field: a whole number up to [`MAX_CPUS`]; empty or 0 when not given.
    fn cpus(&self, name: &str, s: &str) -> Result<u32, TraceError> {
        if s.is_empty() {
            return Ok(0);
        }
        let n: u32 = s
            .parse()
            .map_err(|_| self.err(name, s, "is not a whole number of cores"))?;
        if n > MAX_CPUS {
            return Err(self.err(name, s, &format!("is more than {MAX_CPUS} cores")));
        }
        Ok(n)
    }

    /// The `kind` field: train or infer.
    fn kind(&self, s: &str) -> Result<JobKind, TraceError> {
        match s {
            "train" => Ok(JobKind::Batch),
            "infer" => Ok(JobKind::Infer),
            _ => Err(self.err("kind", s, "must be train or infer")),
        }
    }
}

/// The trace name of a job kind.
pub fn kind_name(k: JobKind) -> &'static str {
    match k {
        JobKind::Batch => "train",
        JobKind::Infer => "infer",
    }
}

/// Seconds from a decimal, rounded up; zero only where `zero_ok`.
fn seconds(s: &str, zero_ok: bool) -> Result<u64, &'static str> {
    // Whole seconds, the common case, without going through a float.
    if let Ok(whole) = s.parse::<u64>() {
        return match whole {
            w if w as f64 > MAX_SECONDS => Err("is more than ten years"),
            0 if !zero_ok => Err("must be more than 0 seconds"),
            w => Ok(w),
        };
    }
    let v: f64 = s.parse().map_err(|_| "is not a number of seconds")?;
    if !v.is_finite() || v < 0.0 {
        return Err("must be a number of seconds, 0 or more");
    }
    if v > MAX_SECONDS {
        return Err("is more than ten years");
    }
    let whole = v.ceil() as u64;
    if whole == 0 && !zero_ok {
        return Err("must be more than 0 seconds");
    }
    Ok(whole)
}

/// Byte offset of the record a csv error is about.
fn csv_byte(e: &csv::Error) -> Option<u64> {
    match e.kind() {
        csv::ErrorKind::UnequalLengths { pos, .. } => pos.as_ref().map(|p| p.byte()),
        _ => e.position().map(|p| p.byte()),
    }
}

fn csv_message(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("expected {expected_len} fields as in the header, found {len}"),
        csv::ErrorKind::Utf8 { .. } => "the line is not valid UTF-8".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Trace, String> {
        Trace::from_reader(text.as_bytes(), "t.csv").map_err(|e| e.to_string())
    }

    #[test]
    fn columns_in_any_order_with_optional_ones() {
        let t = parse(
            "kind,duration_s,job_id,leaves,submit_s,mem_gb\n\
             train,600.5,7,2,0,\n\
             # a comment\n\
             infer,1800,9,1,12.2,4.5\n",
        )
        .unwrap();
        assert_eq!(t.jobs.len(), 2);
        assert_eq!(t.jobs[0].duration_s, 601);
        assert_eq!(t.jobs[0].mem_gb, None);
        assert_eq!(t.jobs[1].submit_s, 13);
        assert_eq!(t.jobs[1].kind, JobKind::Infer);
        assert_eq!(t.jobs[1].mem_gb, Some(4.5));
        // no limit given: 1800 × 1.5 = 2700, a whole number of quarter hours; 601 × 1.5 → 1800
        assert_eq!(t.jobs[1].limit_s(), 2700);
        assert_eq!(t.jobs[0].limit_s(), 1800);
    }

    #[test]
    fn bad_rows_name_the_line_field_and_value() {
        let head = "job_id,submit_s,leaves,duration_s,kind\n";
        let cases = [
            (
                "1,0,1,60,train\n2,0,0,60,train\n",
                "t.csv:3: leaves \"0\" must be at least 1",
            ),
            (
                "1,0,1,60,batch\n",
                "t.csv:2: kind \"batch\" must be train or infer",
            ),
            (
                "1,-5,1,60,train\n",
                "t.csv:2: submit_s \"-5\" must be a number of seconds, 0 or more",
            ),
            (
                "1,0,1,0,train\n",
                "t.csv:2: duration_s \"0\" must be more than 0 seconds",
            ),
            (
                "1,0,1,x,train\n",
                "t.csv:2: duration_s \"x\" is not a number of seconds",
            ),
            (
                "1,0,1,60,train\n1,0,1,60,train\n",
                "t.csv:3: job_id \"1\" appears twice (first on line 2)",
            ),
            (
                "5,0,1,60,train\n3,0,1,60,train\n7,0,1,60,train\n5,0,1,60,train\n",
                "t.csv:5: job_id \"5\" appears twice (first on line 2)",
            ),
            (
                "2,0,1,60,train\n1,0,1,60,train\n3,0,1,60,train\n1,0,1,60,train\n",
                "t.csv:5: job_id \"1\" appears twice (first on line 3)",
            ),
            (
                "1,0,1,60\n",
                "t.csv:2: expected 5 fields as in the header, found 4",
            ),
            (
                "# c\n\n1,0,1,60,train\n# c\n\n2,0,1,0,train\n",
                "t.csv:7: duration_s \"0\" must be more than 0 seconds",
            ),
        ];
        for (rows, want) in cases {
            assert_eq!(parse(&format!("{head}{rows}")).unwrap_err(), want);
        }
        assert_eq!(
            parse("job_id,submit_s,leaves,kind\n1,0,1,train\n").unwrap_err(),
            "t.csv:1: missing column \"duration_s\" (the header needs job_id,submit_s,leaves,duration_s,kind)"
        );
        assert_eq!(parse(head).unwrap_err(), "t.csv:1: the trace has no jobs");
    }

    /// Found by fuzzing: a blank or comment line last, without its newline, made the line
    /// count slice past the end of the data (a panic instead of an error).
    #[test]
    fn a_last_blank_or_comment_line_without_a_newline_is_an_error_not_a_panic() {
        for text in [
            " ",
            "\n ",
            "# only a comment",
            "job_id,submit_s,leaves,duration_s,kind\n#",
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with("t.csv:"), "{text:?}: {e}");
        }
    }

    #[test]
    fn write_then_read_is_identity() {
        let t = parse(
            "job_id,submit_s,leaves,duration_s,kind,time_limit_s\n1,0,4,600,train,900\n2,5,1,60,infer,\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        t.write(&mut buf).unwrap();
        assert_eq!(parse(std::str::from_utf8(&buf).unwrap()).unwrap(), t);
        let users = parse(
            "job_id,submit_s,leaves,duration_s,kind,user\n1,0,1,60,train,ann\n2,1,1,60,train,\n",
        )
        .unwrap();
        assert_eq!(users.jobs[0].user.as_deref(), Some("ann"));
        assert_eq!(users.jobs[1].user, None);
        let mut buf = Vec::new();
        users.write(&mut buf).unwrap();
        assert_eq!(parse(std::str::from_utf8(&buf).unwrap()).unwrap(), users);
    }
}
