//! The domain types both sides share: a job as submitted ([`JobSpec`] and its [`Env`]), its
//! [`JobState`] with Slurm's names, and a job as flexq shows it ([`JobView`]).

use crate::array::{ArraySpec, Dependency};
use crate::rows::Text;
use gres_plugin::{JobId, Request as ResourceRequest};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

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
    /// Arrays, dependencies, hold and requeue (left out when there are none, as in the
    /// first protocol-v2 frames).
    #[serde(default, skip_serializing_if = "QueueOptions::is_plain")]
    pub queue: Box<QueueOptions>,
    /// The submitter's umask, which the job runs with (as Slurm carries it). Frames of
    /// protocol version 2 have none: the job then runs with 022.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
    /// `--signal`: a signal sent before the time limit (left out when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<Box<WarnSignal>>,
    /// The quality of service (`--qos`); None for flexd's default_qos (left out when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// `--nice`: subtracted from the job's priority (negative only for root; left out when 0).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub nice: i32,
    /// sbatch's options for how the job runs (left out when none is given).
    #[serde(default, skip_serializing_if = "JobOptions::is_plain")]
    pub options: Box<JobOptions>,
}

/// sbatch options that shape how a job runs rather than what it holds: `--comment`,
/// `--exclusive`, `--open-mode`, `--constraint`, `--mail-type`/`--mail-user`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOptions {
    /// `--comment`: free text, shown by `flexq -o %k` and `flexcontrol show job`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `--exclusive`: the job gets every leaf and every core of the host.
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclusive: bool,
    /// `--open-mode=append`: output files are appended to, never truncated.
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    /// `--constraint`: features the host must have (`a100&80gb`, `h100|a100`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// `--mail-type` and `--mail-user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mail: Option<Mail>,
    /// The batch script's path, made absolute, when sbatch read it from a file (squeue's
    /// `%o`, Command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `-n/--ntasks` (or `--ntasks-per-node`): the tasks a job script's `srun` starts when its
    /// line does not say (`FLEX_NTASKS`, and `SLURM_NTASKS` with the Slurm aliases); None: one,
    /// as in Slurm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`, as given (`SLURM_NTASKS_PER_NODE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntasks_per_node: Option<u32>,
    /// `-c`: each task's cores (`SLURM_CPUS_PER_TASK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_task: Option<u32>,
    /// `--gpus-per-task`: each task's leaves, bound to it (`SLURM_GPUS_PER_TASK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_task: Option<u32>,
    /// `--gpus-per-node` as given (`SLURM_GPUS_PER_NODE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<String>,
    /// `-G/--gpus` as given (`SLURM_GPUS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
    /// The submitting shell's soft resource limits (`ulimit`), which flexd gives the job as
    /// Slurm's PropagateResourceLimits does: name (`NOFILE`, `NPROC`, ...) and value (None:
    /// unlimited).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rlimits: Vec<(String, Option<u64>)>,
}

/// The resource limits a job may carry from its submitter, by Slurm's names.
pub const RLIMIT_NAMES: [&str; 10] = [
    "AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK",
];

impl JobOptions {
    pub fn is_plain(&self) -> bool {
        *self == JobOptions::default()
    }
}

/// Mail about a job: on which events (sbatch's `--mail-type`), to whom (`--mail-user`; the
/// submitting user when None).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mail {
    pub events: MailEvents,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// sbatch's mail types as flags: BEGIN, END, FAIL, REQUEUE, TIME_LIMIT (the job reached its
/// limit) and TIME_LIMIT_90, _80, _50 (that share of it elapsed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MailEvents(pub u8);

impl MailEvents {
    pub const BEGIN: u8 = 1;
    pub const END: u8 = 2;
    pub const FAIL: u8 = 4;
    pub const REQUEUE: u8 = 8;
    pub const TIME_LIMIT: u8 = 16;
    pub const TIME_LIMIT_90: u8 = 32;
    pub const TIME_LIMIT_80: u8 = 64;
    pub const TIME_LIMIT_50: u8 = 128;
    /// sbatch's ALL: BEGIN, END, FAIL, REQUEUE (and stage-out and dependency events, which
    /// Flex has not).
    pub const ALL: u8 = Self::BEGIN | Self::END | Self::FAIL | Self::REQUEUE;
    const NAMES: [(&'static str, u8); 11] = [
        ("NONE", 0),
        ("BEGIN", Self::BEGIN),
        ("END", Self::END),
        ("FAIL", Self::FAIL),
        ("REQUEUE", Self::REQUEUE),
        ("ALL", Self::ALL),
        ("TIME_LIMIT", Self::TIME_LIMIT),
        ("TIME_LIMIT_90", Self::TIME_LIMIT_90),
        ("TIME_LIMIT_80", Self::TIME_LIMIT_80),
        ("TIME_LIMIT_50", Self::TIME_LIMIT_50),
        // One mail per task, as sbatch's ARRAY_TASKS: Flex mails per task always.
        ("ARRAY_TASKS", 0),
    ];

    /// sbatch's comma-separated list, case-insensitively (`END,FAIL`, `all`).
    pub fn parse(v: &str) -> Result<MailEvents, String> {
        let mut bits = 0;
        for word in v.split(',') {
            let w = word.trim().to_ascii_uppercase();
            let (_, b) = Self::NAMES.iter().find(|(n, _)| *n == w).ok_or_else(|| {
                format!(
                    "invalid mail type {word:?}: expected NONE, BEGIN, END, FAIL, REQUEUE, ALL, \
                     TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50 or ARRAY_TASKS"
                )
            })?;
            bits |= b;
        }
        Ok(MailEvents(bits))
    }

    pub fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// sbatch's `--signal=[B:]SIG[@SECONDS]`: send `signal` `before_s` seconds before the job's
/// time limit, to the batch shell only (`B:`) or to the whole job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarnSignal {
    pub signal: i32,
    pub before_s: u32,
    pub batch_only: bool,
}

pub(crate) fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

impl QueueOptions {
    /// Nothing asked: a plain job.
    pub fn is_plain(&self) -> bool {
        *self == QueueOptions::default()
    }
}

/// How a submission waits in the queue: `--array`, `--dependency`, `--hold`, `--requeue`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueOptions {
    /// `--array`: one task per index, all submitted together.
    #[serde(default)]
    pub array: Option<ArraySpec>,
    #[serde(default)]
    pub dependency: Option<Dependency>,
    /// `--hold`: submitted held (released by `flexcontrol release`).
    #[serde(default)]
    pub hold: bool,
    /// `--requeue` / `--no-requeue`; None: may be requeued (Slurm's JobRequeue=1).
    #[serde(default)]
    pub requeue: Option<bool>,
    /// `--begin`: not before this time (seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<u64>,
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
    /// Ended after the kernel killed one of its processes for reaching the job's memory
    /// limit (its cgroup's OOM killer), as Slurm's OUT_OF_MEMORY.
    OutOfMemory,
}

impl JobState {
    pub const ALL: [JobState; 8] = [
        JobState::Pending,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::OutOfMemory,
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
            JobState::OutOfMemory => "OUT_OF_MEMORY",
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
            JobState::OutOfMemory => "OOM",
        }
    }

    /// Slurm's `ExitCode` text, `code:signal`: 0:125 for a job ended by the OOM killer, as
    /// sacct and scontrol show it (whatever its first process returned).
    pub fn exit_code_text(self, code: Option<i32>, signal: Option<i32>) -> String {
        match self {
            JobState::OutOfMemory => "0:125".into(),
            _ => format!("{}:{}", code.unwrap_or(0), signal.unwrap_or(0)),
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
    /// Host memory held, in bytes (0: none reserved).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub mem_bytes: u64,
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
    /// The array it is a task of, and its index.
    #[serde(default)]
    pub array: Option<ArrayTask>,
    #[serde(default)]
    pub dependency: Option<Dependency>,
    /// How often it was requeued.
    #[serde(default)]
    pub restarts: u32,
    #[serde(default)]
    pub requeue: bool,
    /// A pending job's priority as of the last pass (flexq's `%Q`); another job's base
    /// priority.
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub nice: i64,
    /// Its quality of service.
    #[serde(default)]
    pub qos: Option<String>,
    /// `--comment`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The pending tasks of an array shown in this one row (`0-2%3`, squeue's `%K`), when the
    /// listing collapsed them ([`crate::ArrayRows::Collapse`]); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_tasks: Option<String>,
    /// What the submission said besides its request, read from flexd's database when the
    /// listing asks for it ([`crate::QueueFilter::details`]); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<JobDetails>>,
}

/// A job's submission as squeue's `%g %Z %o %f` fields (and `-O STDOUT`, `NumTasks`, ...)
/// show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobDetails {
    /// The group the job runs as.
    pub gid: u32,
    /// Where it runs (`-D/--chdir`, else the submit directory).
    pub workdir: PathBuf,
    /// The batch script's path as sbatch was given it (absolute), None for a script read
    /// from stdin or made by `--wrap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `--constraint`, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// `-o`/`-e` patterns as given (relative to `workdir`); None: flexd's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// `-n` and `-c` as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntasks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_task: Option<u32>,
}

/// A task of an array: the array's job id (the id flexsub printed) and its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArrayTask {
    pub job: JobId,
    pub index: u32,
}

impl fmt::Display for ArrayTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.job, self.index)
    }
}
