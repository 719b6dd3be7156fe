//! The scheduler core: one pure function that decides every placement, for flexd and flexsim
//! alike. It is called with the world as it is (the free state of the hosts, the queue, the
//! running jobs and `now`) and answers with decisions; it has no I/O and reads no clock.
//!
//! - [`Model`] is what a pass places jobs on. [`Cluster`] is Flex's own model: MIG leaves and
//!   whole GPUs over the Gaia access-cost tree. flexsim plugs its Static- and Dynamic-MIG
//!   baselines in as other models.
//! - [`schedule`] is the pass: FIFO, aggressive (EASY) or conservative backfilling with a
//!   window of K, over the queue in a [`Order`] (submission, shortest or longest limit first
//!   with aging, or Flex's adaptive order); [`schedule_with`] also takes submission times, and
//!   [`schedule_ordered`] takes a queue already in order and reads only what the pass looks at
//!   (flexsim, whose queue grows long, keeps it in order between passes).
//! - [`fairshare`]: the multifactor priority's arithmetic (decayed usage, fair share, weights),
//!   which flexd and flexsim use to compute [`PendingJob::priority`] before a pass.
//! - [`PolicyKeys`] parses the policy keys of flexd.toml, for flexd and flexsim alike.

mod alloc;
mod cluster;
mod config;
pub mod fairshare;
mod keys;
mod order;
mod pass;
mod place;
#[cfg(test)]
mod tests;

pub use alloc::{Allocation, Unit};
pub use cluster::Cluster;
pub use config::ClusterConfig;
pub use keys::PolicyKeys;
pub use order::{sort_queue, Load, Order};
pub use pass::{estimate_starts, schedule, schedule_ordered, schedule_with};

use gres_plugin::{JobId, Request};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Seconds: since the Unix epoch in flexd, since the start of the trace in flexsim.
pub type Time = u64;

/// What a job is for; a model that reconfigures hardware must never drain an `Infer` job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobKind {
    /// A batch job (training or anything else that tolerates a pause).
    #[default]
    Batch,
    /// A latency-sensitive inference job.
    Infer,
}

/// A job waiting in the queue.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingJob {
    pub id: JobId,
    pub request: Request,
    /// Higher runs first; equal priorities run in submission (id) order.
    pub priority: i64,
    pub kind: JobKind,
}

/// A job holding resources.
#[derive(Clone, Debug, PartialEq)]
pub struct RunningJob<P> {
    pub id: JobId,
    pub placement: P,
    /// Start plus time limit: when its resources are free at the latest.
    pub expected_end: Time,
}

/// Which jobs may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// The head of the queue blocks everything behind it.
    Fifo,
    /// Aggressive (EASY) backfilling: the head gets a reservation; later jobs start now when
    /// they fit and do not delay it.
    Backfill,
    /// Conservative backfilling: every job in the window gets a reservation in queue order;
    /// a later job starts now only when it delays none of them.
    Conservative,
}

impl PolicyKind {
    pub const NAMES: [&'static str; 3] = ["fifo", "backfill", "conservative"];
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PolicyKind::NAMES[*self as usize])
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fifo" => Ok(PolicyKind::Fifo),
            "backfill" | "easy" => Ok(PolicyKind::Backfill),
            "conservative" => Ok(PolicyKind::Conservative),
            _ => Err(format!(
                "unknown policy {s:?} (fifo, backfill or conservative)"
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub kind: PolicyKind,
    /// Backfill candidates examined behind the head; 0 means the whole queue.
    pub window: usize,
    /// The order of jobs of equal priority.
    #[serde(default)]
    pub order: Order,
    /// Aging of the `shortest`, `longest` and `adaptive` orders: each second waited counts as
    /// this many hundredths of a second of time limit.
    #[serde(default)]
    pub aging_pct: u32,
}

impl Policy {
    /// The Flex-MIG evaluation's window.
    pub const DEFAULT_WINDOW: usize = 14;

    /// The default aging of the ordered policies: one second of limit per second waited.
    pub const DEFAULT_AGING_PCT: u32 = 100;

    pub fn fifo() -> Self {
        Self {
            kind: PolicyKind::Fifo,
            window: Self::DEFAULT_WINDOW,
            order: Order::Submit,
            aging_pct: Self::DEFAULT_AGING_PCT,
        }
    }

    pub fn backfill(window: usize) -> Self {
        Self {
            kind: PolicyKind::Backfill,
            window,
            ..Self::fifo()
        }
    }

    pub fn conservative(window: usize) -> Self {
        Self {
            kind: PolicyKind::Conservative,
            window,
            ..Self::fifo()
        }
    }

    /// The same policy over another order.
    pub fn ordered(self, order: Order) -> Self {
        Self { order, ..self }
    }
}

/// Why a job is still pending.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// Not enough free resources for it now.
    Resources,
    /// A job ahead of it goes first.
    Priority,
    /// It would fit now, but would delay the head job's reservation.
    Reservation,
    /// No host could ever run it; the message says why.
    Unsatisfiable(String),
    /// Held back before the pass by a limit (a QOS or account limit); Slurm's name for it,
    /// such as `QOSMaxGRESPerUser`. The core never gives this reason: its caller does.
    Limit(std::borrow::Cow<'static, str>),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Resources => f.write_str("Resources"),
            Reason::Priority => f.write_str("Priority"),
            Reason::Reservation => f.write_str("Reservation"),
            Reason::Unsatisfiable(m) => write!(f, "Unsatisfiable: {m}"),
            Reason::Limit(name) => f.write_str(name),
        }
    }
}

/// A job the pass starts now.
#[derive(Clone, Debug, PartialEq)]
pub struct Start<P> {
    pub job: JobId,
    pub placement: P,
}

/// The head job's reservation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub job: JobId,
    pub start: Time,
}

/// A pending job's state after the pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub job: JobId,
    pub reason: Reason,
    pub estimated_start: Option<Time>,
}

/// What one pass decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Decisions<P> {
    pub starts: Vec<Start<P>>,
    pub reservation: Option<Reservation>,
    /// Every pending job that does not start, in queue order.
    pub pending: Vec<Pending>,
}

/// What a pass places jobs on: the free state of some hardware under some allocation rules.
///
/// `Clone` must be cheap enough to do twice per pass (the pass plans on copies).
pub trait Model: Clone {
    type Placement: Clone + fmt::Debug;

    /// Could the job ever run here, on idle hardware? The error says why not.
    fn admit(&self, job: &PendingJob) -> Result<(), String>;

    /// Where the job would go now, or None when it does not fit now.
    fn place(&self, job: &PendingJob) -> Option<Self::Placement>;

    /// Like [`Model::place`], called right after `released` was given back; a model may look
    /// only where that freed something (nothing else changed since the last failed `place`).
    fn place_after_release(
        &self,
        job: &PendingJob,
        released: &Self::Placement,
    ) -> Option<Self::Placement> {
        let _ = released;
        self.place(job)
    }

    /// Whether [`Model::place`] would place the job now. A pass asks this where it needs no
    /// placement (will the head still fit?); a model may answer without building one.
    fn fits(&self, job: &PendingJob) -> bool {
        self.place(job).is_some()
    }

    /// Whether [`Model::place_after_release`] would place the job.
    fn fits_after_release(&self, job: &PendingJob, released: &Self::Placement) -> bool {
        self.place_after_release(job, released).is_some()
    }

    /// Mark a placement's resources as used.
    fn occupy(&mut self, p: &Self::Placement);

    /// Give a placement's resources back.
    fn release(&mut self, p: &Self::Placement);

    /// Units of the whole model (leaves), for the adaptive order's backlog; 0 when unknown.
    fn units(&self) -> u64 {
        0
    }
}
