//! The messages: the [`Hello`] that opens a connection, one [`Request`] variant per verb and the
//! [`Response`] variants that answer them, with the small types they carry.

use crate::array::JobRef;
use crate::job::{AllocView, JobSpec, JobState, JobView};
use crate::rows::QueueRows;
use gres_plugin::{JobId, Request as ResourceRequest};
use serde::{Deserialize, Serialize};

/// The first frame of every connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    /// The command's name, for the daemon's log.
    pub client: String,
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
    /// How rows show array tasks; None (older clients): each task as a plain job id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrays: Option<ArrayRows>,
    /// Fill in each job's [`crate::JobDetails`] (its group, directory, script path), which
    /// flexd reads from its database: squeue's `%g %Z %o %f` fields ask for it. Older servers
    /// ignore it and send none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub details: bool,
}

/// How flexq's rows show the tasks of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArrayRows {
    /// Pending tasks of an array as one row (`12_[4-15%2]`), as squeue does.
    Collapse,
    /// Every task its own row (`flexq -r`).
    Expand,
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
    Cancel(CancelRequest),
    /// Every leaf of every host and the job holding it.
    LeafMap,
    Ping,
    /// Internal, from a job's supervisor: the job ended, with its outcome in the frame
    /// (answered once the end is committed), or in its status file when the frame has none.
    /// Only root or flexd's own user may send it. Answered with [`Response::Pong`].
    JobEnded(JobEndedRequest),
    /// Accounting records from the database (flexacct, flexreport); answered with
    /// [`Response::Accounting`]. Users other than root see only their own jobs.
    Accounting(AcctQuery),
    /// Each pending job's priority factors (flexprio); answered with [`Response::Priority`].
    Priority(PrioQuery),
    /// Users' and accounts' shares, usage and fair-share factors (flexshare); answered with
    /// [`Response::Shares`].
    Shares(ShareQuery),
    /// flexcontrol: hold, release, requeue or update jobs (answered with
    /// [`Response::Controlled`]), or show them (answered with [`Response::Queue`]).
    Control(ControlRequest),
    /// flexd's settings and what it enforces on this host (`flexcontrol show config`);
    /// answered with [`Response::Config`].
    Config,
}

/// Which pending jobs flexprio shows; empty lists mean all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioQuery {
    pub users: Vec<String>,
    pub jobs: Vec<JobId>,
}

/// One pending job's priority and its factors (each from 0 to 1) with their weights applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrioRow {
    pub job: JobId,
    pub user: String,
    pub account: String,
    pub qos: String,
    pub priority: i64,
    /// Weight × factor, as added into `priority`.
    pub age: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub qos_part: f64,
    /// `--nice`, subtracted.
    pub nice: i32,
}

/// The weights flexprio prints above its rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioWeights {
    pub age: u32,
    pub fairshare: u32,
    pub job_size: u32,
    pub qos: u32,
}

/// The answer to [`Request::Priority`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioReply {
    pub weights: PrioWeights,
    pub jobs: Vec<PrioRow>,
}

/// Which users flexshare shows; empty means all it knows of.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareQuery {
    pub users: Vec<String>,
}

/// One account, or one user (with the account it is charged to), as flexshare shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShareRow {
    pub account: String,
    /// None for the account's own row.
    pub user: Option<String>,
    pub raw_shares: u32,
    /// Of all shares at its level (0 to 1).
    pub norm_shares: f64,
    /// Decayed usage in slice-hours (a 1g leaf for an hour is 1).
    pub raw_usage: f64,
    /// Of all usage at its level (0 to 1).
    pub effective_usage: f64,
    pub fairshare: f64,
}

/// What flexcontrol asks for, on which jobs (`12`, `12_3`, `12_[3-5]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlRequest {
    pub action: ControlAction,
    pub jobs: Vec<JobRef>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControlAction {
    /// Keep pending jobs from starting (JobHeldUser; JobHeldAdmin when root holds them).
    Hold,
    Release,
    /// Put a running or finished job back in the queue (a running one is ended first), held
    /// when `hold`.
    Requeue {
        hold: bool,
    },
    /// `key=value` pairs: TimeLimit (in seconds: flexcontrol converts Slurm's forms), JobName,
    /// and for root Priority and Nice.
    Update(Vec<(String, String)>),
    /// The jobs in full.
    Show,
}

/// What came of a flexcontrol action on one job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlOutcome {
    /// The job as named (`12`, `12_3`).
    pub job: String,
    /// None when it worked; otherwise why not.
    pub error: Option<String>,
}

/// Cancel jobs (no signal), or send them a signal (by number).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub jobs: Vec<JobId>,
    pub signal: Option<i32>,
    /// Array tasks (`12_3`, `12_[3-5]`); a plain id in `jobs` that is an array's job id
    /// names every task of the array.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<JobRef>,
}

/// From a job's supervisor: the job ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEndedRequest {
    pub job: JobId,
    /// How it ended. None: read the job's status file (what supervisors of earlier flexds
    /// and a supervisor that could not reach flexd at first do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobEndStatus>,
}

/// How a job ended, as its supervisor saw it: sent to flexd, or written to the job's status
/// file when flexd cannot be told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEndStatus {
    pub job: u64,
    /// COMPLETED, FAILED, CANCELLED or TIMEOUT; PENDING when the job's start could not be
    /// recorded for want of room (its run file, on a full disk) and nothing of it ran: flexd
    /// queues it again.
    pub state: JobState,
    pub exit_code: Option<i32>,
    /// The signal that ended the job's first process.
    pub signal: Option<i32>,
    /// Seconds since the epoch.
    pub end_time: u64,
    /// Why it failed to start, or what happened at its end.
    pub note: Option<String>,
    /// The job's peak resident memory in bytes (flexacct's MaxRSS): its cgroup's memory.peak,
    /// else the largest of the processes its supervisor waited for. Older supervisors send
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss: Option<u64>,
    /// The CPU time the job used, in microseconds: its cgroup's `cpu.stat` usage_usec, else
    /// user and system time of the processes its supervisor waited for. Older supervisors
    /// send none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usec: Option<u64>,
    /// The kernel's OOM killer killed one of the job's processes for reaching its memory
    /// limit: flexd records OUT_OF_MEMORY for a job that `state` says completed or failed.
    /// A flag beside `state`, not a state of its own, so that older flexds read the frame
    /// (as FAILED) and older supervisors' files read as not killed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
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
    /// Host memory it held, in bytes (0: none reserved, or it never started).
    #[serde(default, skip_serializing_if = "crate::job::is_zero_u64")]
    pub mem_bytes: u64,
    /// The array it is a task of (shown `12_3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<crate::job::ArrayTask>,
    /// How often it was requeued (its earlier runs are kept in the database).
    #[serde(default, skip_serializing_if = "crate::job::is_zero")]
    pub restarts: u32,
    /// Its latest run's peak resident memory in bytes (sacct's MaxRSS), when its supervisor
    /// measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss: Option<u64>,
    /// Its latest run's CPU time in microseconds (sacct's TotalCPU), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usec: Option<u64>,
    /// What its leaves' GPU telemetry said while it ran, when flexd sampled any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_usage: Option<GpuUsage>,
    /// `--comment` (sacct's Comment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A job's GPU use as flexd sampled it (the type lives beside the totals that make it, in
/// `gres_plugin::telemetry::summary`, which flexsim shares).
pub use gres_plugin::telemetry::summary::GpuUsage;

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

/// What `--test-only` reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WouldStart {
    /// Where it would go if it started now (None when it must wait).
    pub alloc: Option<AllocView>,
    /// When it is expected to start (seconds since the epoch).
    pub estimated_start: Option<u64>,
    /// Why it would wait, if it would.
    pub reason: Option<String>,
    /// As [`SubmitReply::warnings`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
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
    Hello(HelloReply),
    Submitted(SubmitReply),
    WouldStart(Box<WouldStart>),
    /// One page of a listing, jobs in id order. When `next` names a job, the listing goes on
    /// after it and flexd sends the next page right behind this one, unasked: a long listing
    /// never holds flexd up or fills its memory at once, and the client reads page after
    /// page while flexd makes the next.
    Queue(QueuePage),
    /// One page of flexq's rows, paged like `Queue`.
    QueueRows(RowsPage),
    Cancelled(Vec<CancelOutcome>),
    LeafMap(Vec<HostLeaves>),
    Pong,
    Error(ErrorReply),
    Accounting(AcctReply),
    Priority(PrioReply),
    Shares(Vec<ShareRow>),
    Controlled(Vec<ControlOutcome>),
    /// `KEY`, value pairs in the order flexd gives them: its settings, the host's resources
    /// and, for each job limit, where it is enforced or why not.
    Config(Vec<(String, String)>),
}

/// flexd's answer to a client's [`Hello`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    pub version: u32,
    /// flexd's name and version, for the client's messages.
    pub server: String,
}

/// A submission committed to disk, with its id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitReply {
    pub job: JobId,
    /// What flexd accepted but ignored (a GPU type or feature its `[aliases]` accepts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One page of a full listing (`Queue`), jobs in id order; `next` names the last job of the
/// page when another page follows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueuePage {
    pub jobs: Vec<JobView>,
    pub next: Option<JobId>,
}

/// One page of flexq's rows (`QueueRows`), paged like [`QueuePage`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowsPage {
    pub rows: QueueRows,
    pub next: Option<JobId>,
}

impl Response {
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Response::Error(ErrorReply {
            kind,
            message: message.into(),
        })
    }
}
