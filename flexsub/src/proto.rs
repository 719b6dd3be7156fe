//! The protocol between the commands and flexd: length-prefixed JSON frames over a Unix socket.
//!
//! A connection starts with the client's [`Hello`] (its protocol version); flexd answers
//! [`Response::Hello`] or an [`ErrorKind::VersionMismatch`] error naming both versions. Then
//! the client sends [`Request`]s, one [`Response`] each. Each frame is a 4-byte big-endian
//! length and that many bytes of JSON. Who is asking comes from the socket (SO_PEERCRED), never
//! from the frames.
//!
//! This module needs neither tokio nor rusqlite, so the commands stay small.

use gres_plugin::{JobId, Request as ResourceRequest};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::PathBuf;

/// Bumped whenever a frame's meaning changes incompatibly.
pub const PROTOCOL_VERSION: u32 = 2;

/// Largest frame either side accepts unless configured otherwise (scripts travel in frames).
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// The first frame of every connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    /// The command's name, for the daemon's log.
    pub client: String,
}

/// A batch job as flexsub sends it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub name: String,
    /// The batch script's text; run with the interpreter its `#!` line names (sh without one).
    pub script: String,
    /// Arguments after the script name.
    pub args: Vec<String>,
    /// Where the job runs (`-D/--chdir`, else the submit directory).
    pub workdir: PathBuf,
    /// Where flexsub ran.
    pub submit_dir: PathBuf,
    /// The submitting environment, as sbatch's `--export=ALL`.
    pub env: Env,
    /// stdout/stderr path patterns (`%j` job id, `%x` name, `%u` user); relative to workdir.
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub request: ResourceRequest,
    pub account: Option<String>,
}

/// A job's environment: `[name, value]` pairs, kept as their JSON text. It is most of a
/// submission's bytes: flexd checks it and stores it as it came, without taking it apart into
/// a string per name and value; the job's supervisor does, when it starts the job. Its Debug
/// form shows only its size, so that it never reaches a log.
#[derive(Clone, Serialize, Deserialize)]
pub struct Env(Box<serde_json::value::RawValue>);

impl Env {
    /// The environment as stored: the JSON text of its pairs.
    pub fn from_json(text: String) -> Result<Env, serde_json::Error> {
        serde_json::value::RawValue::from_string(text).map(Env)
    }

    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// Each name and value in turn, borrowed from the text where they have no escapes;
    /// `f`'s first error stops the walk and is returned.
    pub fn check(&self, mut f: impl FnMut(&str, &str) -> Result<(), String>) -> Result<(), String> {
        let pairs: Vec<(Text<'_>, Text<'_>)> = serde_json::from_str(self.json())
            .map_err(|e| format!("the environment is not a list of [name, value] pairs: {e}"))?;
        pairs.iter().try_for_each(|(k, v)| f(&k.0, &v.0))
    }

    pub fn pairs(&self) -> Result<Vec<(String, String)>, serde_json::Error> {
        serde_json::from_str(self.json())
    }
}

impl FromIterator<(String, String)> for Env {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Env {
        let pairs: Vec<(String, String)> = pairs.into_iter().collect();
        Env(serde_json::value::to_raw_value(&pairs).expect("strings serialize"))
    }
}

impl From<Vec<(String, String)>> for Env {
    fn from(pairs: Vec<(String, String)>) -> Env {
        pairs.into_iter().collect()
    }
}

impl PartialEq for Env {
    fn eq(&self, other: &Env) -> bool {
        self.json() == other.json()
    }
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Env({} bytes)", self.json().len())
    }
}

/// Which jobs flexq shows; empty lists mean "all".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFilter {
    pub users: Vec<String>,
    pub states: Vec<JobState>,
    pub jobs: Vec<JobId>,
    /// Also jobs that ended (within the daemon's retention of finished jobs in the queue view).
    pub include_finished: bool,
    /// Only jobs with a larger id (how flexd goes on with a long listing).
    #[serde(default)]
    pub after: Option<JobId>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Queue a job; answered with [`Response::Submitted`] once it is committed to disk.
    Submit(JobSpec),
    /// Where and when the job would start; queues nothing.
    TestOnly(JobSpec),
    /// Every selected job in full (`flexq --json`), in pages: see [`Response::Queue`].
    Queue(QueueFilter),
    /// The selected jobs as flexq's table shows them ([`QueueRow`]s, 70 bytes a job), in pages
    /// like `Queue`.
    QueueRows(QueueFilter),
    /// Cancel jobs (no signal), or send them a signal (by number).
    Cancel {
        jobs: Vec<JobId>,
        signal: Option<i32>,
    },
    /// Every leaf of every host and the job holding it.
    LeafMap,
    Ping,
    /// Internal, from a job's supervisor: the job ended and its status file is written. flexd
    /// reads the outcome from that file, never from the frame; only root or flexd's own user
    /// may send it. Answered with [`Response::Pong`].
    JobEnded {
        job: JobId,
    },
    /// Accounting records from the database (flexacct, flexreport); answered with
    /// [`Response::Accounting`]. Users other than root see only their own jobs.
    Accounting(AcctQuery),
}

/// Which jobs accounting reports: those whose [eligible, end (now while not ended)] overlaps
/// [`start`, `end`] (seconds since the epoch) and that match every non-empty list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctQuery {
    pub start: u64,
    pub end: u64,
    /// User names or uids; empty: every user the caller may see (root: all; others: their own).
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub states: Vec<JobState>,
    pub jobs: Vec<JobId>,
    /// Only jobs with a larger id: the last id of the previous page, when it said `more`.
    #[serde(default)]
    pub after: Option<JobId>,
}

/// One allocated unit as accounting reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctLeaf {
    pub uuid: String,
    /// `1g.5gb`, or `gpu` for a whole GPU.
    pub profile: String,
    pub gpu: u32,
    /// Thousandths of the unit held (1000 for a leaf or a whole GPU).
    pub share: u32,
    /// SM slices of the unit, out of its GPU's 7 (7 for a whole GPU).
    pub sm_slices: u32,
    /// The unit's memory (all of it, whatever the share); None when not recorded.
    pub memory_bytes: Option<u64>,
}

/// A job as accounting keeps it. Times are seconds since the epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcctRecord {
    pub id: JobId,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub account: String,
    pub state: JobState,
    pub submit_time: u64,
    pub eligible_time: u64,
    pub start_time: Option<u64>,
    pub end_time: Option<u64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Why it failed or was not run.
    pub reason: Option<String>,
    /// What was asked (leaves, fraction, memory, cores per leaf, time limit).
    pub request: ResourceRequest,
    pub host: Option<String>,
    /// What it held, in rank order (empty when it never started).
    pub leaves: Vec<AcctLeaf>,
    pub cores: Vec<u32>,
}

/// A host's capacity, for utilization.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctHost {
    pub host: String,
    pub gpus: u32,
    pub leaves: u32,
    pub cores: u32,
}

/// The answer to [`Request::Accounting`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcctReply {
    /// flexd's clock when it answered (the end of jobs still running).
    pub now: u64,
    pub hosts: Vec<AcctHost>,
    /// The selected jobs by id, one page of them.
    pub jobs: Vec<AcctRecord>,
    /// The page is full: ask again with `after` = the last job's id for the rest.
    #[serde(default)]
    pub more: bool,
}

/// A job's state, with Slurm's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    NodeFail,
}

impl JobState {
    pub const ALL: [JobState; 7] = [
        JobState::Pending,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
    ];

    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
        }
    }

    /// squeue's compact code.
    pub fn code(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Completed => "CD",
            JobState::Failed => "F",
            JobState::Cancelled => "CA",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
        }
    }

    pub fn is_finished(self) -> bool {
        !matches!(self, JobState::Pending | JobState::Running)
    }

    /// Parse a name or a code, case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        let u = s.to_ascii_uppercase();
        Self::ALL.into_iter().find(|st| {
            st.name() == u || st.code() == u || (u == "CANCELED" && *st == JobState::Cancelled)
        })
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One allocated unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafView {
    pub uuid: String,
    /// `1g.5gb`, or `gpu` for a whole GPU.
    pub profile: String,
    pub gpu: u32,
    /// Thousandths of the unit held (1000 for a leaf or a whole GPU).
    pub share: u32,
}

/// Where a job runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocView {
    pub host: String,
    pub leaves: Vec<LeafView>,
    pub cores: Vec<u32>,
}

/// A job as flexq shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: JobId,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub account: String,
    pub state: JobState,
    /// Seconds since the epoch.
    pub submit_time: u64,
    pub start_time: Option<u64>,
    pub end_time: Option<u64>,
    pub request: ResourceRequest,
    pub alloc: Option<AllocView>,
    /// Why a pending job waits (Resources, Priority, Reservation, …).
    pub reason: Option<String>,
    pub estimated_start: Option<u64>,
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

/// One line of flexq's table: what it shows and nothing more. On the wire a JSON array of the
/// fields in this order. Strings borrow from the text they are read from where they can.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueRow<'a> {
    pub id: JobId,
    pub name: Cow<'a, str>,
    pub user: Cow<'a, str>,
    pub state: JobState,
    /// Seconds it has run (so far, or in all).
    pub elapsed_s: u64,
    pub time_limit_s: u64,
    /// What it holds (running) or asks for (pending), as [`units_text`] writes it.
    pub units: Cow<'a, str>,
    /// When it started, or for a pending job when it is expected to (seconds since the epoch).
    pub start: Option<u64>,
    /// Where it runs or ran.
    pub host: Option<Cow<'a, str>>,
    /// Why it waits, or why it ended.
    pub reason: Option<Cow<'a, str>>,
}

impl Serialize for QueueRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            self.id,
            &self.name,
            &self.user,
            self.state,
            self.elapsed_s,
            self.time_limit_s,
            &self.units,
            self.start,
            &self.host,
            &self.reason,
        )
            .serialize(s)
    }
}

/// A string that borrows from the input unless it had escapes to undo.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for QueueRow<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        type Wire<'a> = (
            JobId,
            Text<'a>,
            Text<'a>,
            JobState,
            u64,
            u64,
            Text<'a>,
            Option<u64>,
            Option<Text<'a>>,
            Option<Text<'a>>,
        );
        let (id, name, user, state, elapsed_s, time_limit_s, units, start, host, reason) =
            Wire::deserialize(d)?;
        Ok(QueueRow {
            id,
            name: name.0,
            user: user.0,
            state,
            elapsed_s,
            time_limit_s,
            units: units.0,
            start,
            host: host.map(|t| t.0),
            reason: reason.map(|t| t.0),
        })
    }
}

/// flexq's rows: one JSON array of [`QueueRow`]s, kept as its text. flexd writes it straight
/// from its state and flexq reads it row by row, so that a listing of 100,000 jobs costs
/// neither side a copy of every job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueueRows(Box<serde_json::value::RawValue>);

impl PartialEq for QueueRows {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl QueueRows {
    /// Serialize the rows as they come.
    pub fn new<'a>(rows: impl Iterator<Item = QueueRow<'a>>) -> QueueRows {
        struct Lazy<I>(std::cell::Cell<Option<I>>);
        impl<'a, I: Iterator<Item = QueueRow<'a>>> Serialize for Lazy<I> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.take().into_iter().flatten())
            }
        }
        let raw = serde_json::value::to_raw_value(&Lazy(std::cell::Cell::new(Some(rows))))
            .expect("rows always serialize");
        QueueRows(raw)
    }

    /// Each row in turn, its strings borrowed from the answer.
    pub fn for_each<'s>(&'s self, f: impl FnMut(QueueRow<'s>)) -> Result<(), serde_json::Error> {
        let mut d = serde_json::Deserializer::from_str(self.0.get());
        serde::Deserializer::deserialize_seq(&mut d, EachRow(f))?;
        d.end()
    }

    /// The length of the rows' JSON text.
    pub fn text_len(&self) -> usize {
        self.0.get().len()
    }

    /// All rows at once.
    pub fn rows(&self) -> Result<Vec<QueueRow<'_>>, serde_json::Error> {
        let mut v = Vec::new();
        self.for_each(|r| v.push(r))?;
        Ok(v)
    }
}

/// Hands each row of an array to its function as it is read.
struct EachRow<F>(F);

impl<'de, F: FnMut(QueueRow<'de>)> serde::de::Visitor<'de> for EachRow<F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of rows")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut a: A) -> Result<(), A::Error> {
        while let Some(row) = a.next_element()? {
            (self.0)(row);
        }
        Ok(())
    }
}

impl<'de, F: FnMut(QueueRow<'de>)> serde::de::DeserializeSeed<'de> for EachRow<F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

/// Read a [`Response::QueueRows`] frame body row by row, the rows' strings borrowed from it:
/// how flexq makes its table without a copy of every job. `Ok(None)`, having read no row,
/// when the body is another answer (decode it as a [`Response`]); otherwise the page's `next`.
pub fn read_queue_rows<'a>(
    body: &'a [u8],
    f: impl FnMut(QueueRow<'a>),
) -> Result<Option<Option<JobId>>, serde_json::Error> {
    /// `{"rows": [...], "next": ...}`, in any order.
    struct Page<F>(F);
    impl<'de, F: FnMut(QueueRow<'de>)> serde::de::Visitor<'de> for Page<F> {
        type Value = Option<JobId>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a page of rows")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            mut self,
            mut m: A,
        ) -> Result<Option<JobId>, A::Error> {
            let (mut rows, mut next) = (false, None);
            while let Some(key) = m.next_key::<Text<'de>>()? {
                match &*key.0 {
                    "rows" if !rows => {
                        m.next_value_seed(EachRow(&mut self.0))?;
                        rows = true;
                    }
                    "next" if next.is_none() => next = Some(m.next_value::<Option<JobId>>()?),
                    k => return Err(serde::de::Error::unknown_field(k, &["rows", "next"])),
                }
            }
            match (rows, next) {
                (true, Some(next)) => Ok(next),
                (false, _) => Err(serde::de::Error::missing_field("rows")),
                (true, None) => Err(serde::de::Error::missing_field("next")),
            }
        }
    }
    impl<'de, F: FnMut(QueueRow<'de>)> serde::de::DeserializeSeed<'de> for Page<F> {
        type Value = Option<JobId>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<JobId>, D::Error> {
            d.deserialize_map(self)
        }
    }
    /// `{"QueueRows": page}`, or any other answer.
    struct Answer<F>(F);
    impl<'de, F: FnMut(QueueRow<'de>)> serde::de::Visitor<'de> for Answer<F> {
        type Value = Option<Option<JobId>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an answer")
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let Some(variant) = m.next_key::<Text<'de>>()? else {
                return Ok(None);
            };
            if variant.0 == "QueueRows" {
                m.next_value_seed(Page(self.0)).map(Some)
            } else {
                m.next_value::<serde::de::IgnoredAny>()?;
                Ok(None)
            }
        }
    }
    let mut d = serde_json::Deserializer::from_slice(body);
    let page = serde::Deserializer::deserialize_any(&mut d, Answer(f))?;
    d.end()?;
    Ok(page)
}

/// Thousandths as a short decimal (`0.25`, `1`).
pub fn thousandths(v: u32) -> String {
    let s = format!("{:.3}", v as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What a job holds, from its units' shares in thousandths (`2` leaves, `0.5gpu`), or, when it
/// holds nothing, what it asks for (`4`, `gpu=0.5`, `mem=16G`, joined by commas).
pub fn units_text(held: &[u32], asked: &ResourceRequest) -> String {
    if !held.is_empty() {
        return if held.iter().all(|&s| s >= 1000) {
            held.len().to_string()
        } else {
            format!("{}gpu", thousandths(held.iter().sum()))
        };
    }
    let mut s = String::new();
    let sep = |s: &mut String| {
        if !s.is_empty() {
            s.push(',');
        }
    };
    if let Some(n) = asked.leaves {
        crate::units::push_u64(&mut s, n.into());
    }
    if let Some(f) = asked.gpus {
        sep(&mut s);
        let _ = write!(s, "gpu={f}");
    }
    if let Some(m) = asked.mem_bytes {
        sep(&mut s);
        s.push_str("mem=");
        s.push_str(&crate::units::format_size(m));
    }
    s
}

/// What `--test-only` reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WouldStart {
    /// Where it would go if it started now (None when it must wait).
    pub alloc: Option<AllocView>,
    /// When it is expected to start (seconds since the epoch).
    pub estimated_start: Option<u64>,
    /// Why it would wait, if it would.
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelOutcome {
    pub job: JobId,
    /// None when it worked; otherwise why not.
    pub error: Option<String>,
}

/// One leaf in the host's leaf map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafMapEntry {
    pub uuid: String,
    pub profile: String,
    pub gpu: u32,
    pub gpu_name: String,
    pub numa_node: u32,
    /// Thousandths free.
    pub free: u32,
    pub jobs: Vec<JobId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostLeaves {
    pub host: String,
    pub leaves: Vec<LeafMapEntry>,
}

/// What went wrong, for exit codes and for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    VersionMismatch,
    PermissionDenied,
    InvalidRequest,
    NotFound,
    Unsatisfiable,
    LimitExceeded,
    Internal,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    Hello {
        version: u32,
        server: String,
    },
    Submitted {
        job: JobId,
    },
    WouldStart(WouldStart),
    /// One page of a listing, jobs in id order. When `next` names a job, the listing goes on
    /// after it and flexd sends the next page right behind this one, unasked: a long listing
    /// never holds flexd up or fills its memory at once, and the client reads page after
    /// page while flexd makes the next.
    Queue {
        jobs: Vec<JobView>,
        next: Option<JobId>,
    },
    /// One page of flexq's rows, paged like `Queue`.
    QueueRows {
        rows: QueueRows,
        next: Option<JobId>,
    },
    Cancelled(Vec<CancelOutcome>),
    LeafMap(Vec<HostLeaves>),
    Pong,
    Error(ErrorReply),
    Accounting(AcctReply),
}

impl Response {
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Response::Error(ErrorReply {
            kind,
            message: message.into(),
        })
    }
}

/// A frame that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("frame of {size} bytes is larger than the limit of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Encode one frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("protocol types always serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decode one frame from the front of `buf`: the message and the bytes it used, or None when
/// `buf` does not hold a whole frame yet. Pure, so the daemon's async reader and the fuzzer
/// share it.
pub fn decode<T: DeserializeOwned>(
    buf: &[u8],
    max: usize,
) -> Result<Option<(T, usize)>, FrameError> {
    let Some(len) = buf.get(..4) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    let Some(body) = buf.get(4..4 + size) else {
        return Ok(None);
    };
    let msg = serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))?;
    Ok(Some((msg, 4 + size)))
}

/// Read one frame (blocking).
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read, max: usize) -> Result<T, FrameError> {
    let body = read_body(r, max)?;
    serde_json::from_slice(&body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Read one frame's body, undecoded (blocking).
pub fn read_body(r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    if let Err(e) = r.read_exact(&mut len) {
        return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Closed
        } else {
            e.into()
        });
    }
    let size = u32::from_be_bytes(len) as usize;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    let mut body = vec![0u8; size];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// Write one frame (blocking).
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), FrameError> {
    w.write_all(&encode(msg))?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u64, name: &str, reason: Option<&str>) -> QueueRow<'static> {
        QueueRow {
            id: JobId(id),
            name: Cow::Owned(name.into()),
            user: Cow::Borrowed("ann"),
            state: JobState::Pending,
            elapsed_s: 0,
            time_limit_s: 60,
            units: Cow::Borrowed("4"),
            start: None,
            host: None,
            reason: reason.map(|r| Cow::Owned(r.into())),
        }
    }

    #[test]
    fn queue_rows_are_arrays_read_back_borrowed_where_they_can_be() {
        let rows = vec![
            row(1, "plain", Some("Resources")),
            row(2, "say \"hi\"", None),
        ];
        let answer = Response::QueueRows {
            rows: QueueRows::new(rows.clone().into_iter()),
            next: Some(JobId(2)),
        };
        let body = serde_json::to_vec(&answer).unwrap();
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(
            text.starts_with(
                r#"{"QueueRows":{"rows":[[1,"plain","ann","PENDING",0,60,"4",null,null,"Resources"]"#
            ),
            "{text}"
        );
        let mut read = Vec::new();
        assert_eq!(
            read_queue_rows(&body, |r| read.push(r)).unwrap(),
            Some(Some(JobId(2)))
        );
        assert_eq!(read, rows);
        assert!(matches!(read[0].name, Cow::Borrowed("plain")));
        // An escaped string cannot be borrowed; it is unescaped into its own.
        assert!(matches!(&read[1].name, Cow::Owned(n) if n == "say \"hi\""));
        // The whole answer decodes as a Response, too.
        let back: Response = serde_json::from_slice(&body).unwrap();
        assert_eq!(back, answer);
        let Response::QueueRows { rows: back, .. } = back else {
            unreachable!()
        };
        assert_eq!(back.rows().unwrap(), rows);
        // The fields in the other order, and the last page.
        let last = br#"{"QueueRows":{"next":null,"rows":[]}}"#;
        assert_eq!(read_queue_rows(last, |_| {}).unwrap(), Some(None));
    }

    #[test]
    fn other_answers_are_not_rows() {
        for answer in [
            Response::error(ErrorKind::PermissionDenied, "no"),
            Response::Pong,
        ] {
            let body = serde_json::to_vec(&answer).unwrap();
            let mut n = 0;
            assert_eq!(read_queue_rows(&body, |_| n += 1).unwrap(), None);
            assert_eq!(n, 0);
        }
        for bad in [
            &br#"{"QueueRows":{"rows":[[1,"x"]],"next":null}}"#[..],
            br#"{"QueueRows":{"rows":[],"next":null}} x"#,
            br#"{"QueueRows":{"rows":[]}}"#,
            br#"{"QueueRows":{"next":null}}"#,
            br#"{"QueueRows":{"rows":[],"rows":[],"next":null}}"#,
            br#"{"QueueRows":[]}"#,
        ] {
            let e = read_queue_rows(bad, |_| {});
            assert!(e.is_err(), "{}: {e:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn units_say_what_is_held_else_what_is_asked() {
        let mut asked = ResourceRequest::leaves(4, 60);
        assert_eq!(units_text(&[], &asked), "4");
        assert_eq!(units_text(&[1000, 1000], &asked), "2");
        assert_eq!(units_text(&[250, 500], &asked), "0.75gpu");
        asked.leaves = None;
        asked.gpus = Some(0.5);
        asked.mem_bytes = Some(16 << 30);
        assert_eq!(units_text(&[], &asked), "gpu=0.5,mem=16G");
        asked.gpus = None;
        assert_eq!(units_text(&[], &asked), "mem=16G");
    }

    #[test]
    fn frames_round_trip_and_split_anywhere() {
        let msg = Request::Cancel {
            jobs: vec![JobId(3), JobId(9)],
            signal: Some(15),
        };
        let bytes = encode(&msg);
        for cut in 0..bytes.len() {
            assert!(decode::<Request>(&bytes[..cut], DEFAULT_MAX_FRAME)
                .unwrap()
                .is_none());
        }
        let (back, used) = decode::<Request>(&bytes, DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        assert_eq!((back, used), (msg.clone(), bytes.len()));
        let mut r = std::io::Cursor::new(bytes);
        assert_eq!(read_frame::<Request>(&mut r, 1 << 10).unwrap(), msg);
    }

    #[test]
    fn oversized_and_malformed_frames_are_errors() {
        let mut big = (1u32 << 30).to_be_bytes().to_vec();
        big.extend_from_slice(b"{}");
        assert!(matches!(
            decode::<Request>(&big, DEFAULT_MAX_FRAME),
            Err(FrameError::TooLarge { .. })
        ));
        let mut bad = 3u32.to_be_bytes().to_vec();
        bad.extend_from_slice(b"{x}");
        assert!(matches!(
            decode::<Request>(&bad, 100),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn states_parse_by_name_and_code() {
        assert_eq!(JobState::parse("pd"), Some(JobState::Pending));
        assert_eq!(JobState::parse("NODE_FAIL"), Some(JobState::NodeFail));
        assert_eq!(JobState::parse("canceled"), Some(JobState::Cancelled));
        assert_eq!(JobState::parse("bogus"), None);
    }
}

#[cfg(test)]
mod hostile {
    //! Hostile input for the frame decoder: never a panic, never a read past the limit.
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            match decode::<Request>(&bytes, 256) {
                Ok(Some((_, used))) => prop_assert!(used <= bytes.len()),
                Ok(None) => {}
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
            let mut r = std::io::Cursor::new(&bytes);
            let _ = read_frame::<Hello>(&mut r, 256);
        }

        #[test]
        fn valid_length_with_junk_body(body in "\\PC{0,200}") {
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(body.as_bytes());
            if let Err(e) = decode::<Request>(&f, DEFAULT_MAX_FRAME) {
                prop_assert!(e.to_string().starts_with("malformed frame"));
            }
        }
    }
}
