//! The engine's queue, kept in the policy's order between passes, so that a pass reads only
//! the jobs the policy looks at (those that start, the head and the backfill window) through
//! the core's [`schedule_ordered`](flex_sched::schedule_ordered): with a long queue, sorting it
//! and walking it at every pass would make a replay quadratic in the queue's length.
//!
//! The order is exactly the core's [`sort_queue`] at every pass time. That order is fixed over
//! time when every priority is equal (no fair share) and the aging is a whole number of seconds
//! of limit per second waited (`aging_pct` a multiple of 100, the default 100): a job's key
//! `limit − wait × m` is then `limit + submit × m − now × m`, and `now × m` is common to all.
//! The adaptive order adds the critical-path split, which depends only on the queue's backlog
//! (kept as a running sum). Any other setup (fair share, which changes priorities at every
//! pass, or an aging with fractions of a second) sorts the queue at each pass, as before.

use flex_sched::{sort_queue, Load, Order, PendingJob, Policy, PolicyKind, Time};
use std::collections::BTreeSet;

/// How the queue's order is kept.
#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    /// A fixed rank per job: submission (rank 0, then job) or an aged limit.
    Ranked,
    /// The adaptive order: critical jobs from `by_limit`, the others from `ranked`.
    Adaptive,
    /// Sorted at each pass by the core.
    Sorted,
}

/// Queued jobs (indices into the engine's jobs, which are numbered in submission order).
pub(crate) struct Queue {
    how: How,
    policy: Policy,
    /// Seconds of limit per second waited (`aging_pct` / 100) when it is whole.
    per_s: i128,
    /// (rank, job): in the policy's order (`Ranked`), the non-critical order (`Adaptive`), or
    /// just by job (`Sorted`).
    ranked: BTreeSet<(i128, usize)>,
    /// (−limit, job), longest first: the adaptive order's critical jobs come from its front.
    by_limit: BTreeSet<(i128, usize)>,
    /// Pending leaf-seconds (leaves × limit), for the adaptive order's backlog.
    work: u128,
    /// The model's units, for the backlog.
    units: u64,
    /// The last job the last pass read, when it left jobs unread and its decisions can repeat
    /// (see [`Queue::examined`]).
    frontier: Option<(i128, usize)>,
    /// A job was queued at or before `frontier` since.
    ahead: bool,
}

impl Queue {
    /// An empty queue for `policy`; `prioritized` when priorities change between passes.
    pub(crate) fn new(policy: &Policy, prioritized: bool, units: u64) -> Self {
        let whole = policy.aging_pct.is_multiple_of(100);
        let how = match policy.order {
            _ if prioritized => How::Sorted,
            Order::Submit => How::Ranked,
            Order::Shortest | Order::Longest if whole => How::Ranked,
            Order::Adaptive if whole => How::Adaptive,
            _ => How::Sorted,
        };
        Queue {
            how,
            policy: *policy,
            per_s: i128::from(policy.aging_pct / 100),
            ranked: BTreeSet::new(),
            by_limit: BTreeSet::new(),
            work: 0,
            units,
            frontier: None,
            ahead: false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranked.is_empty()
    }

    /// The jobs queued, by job (for fair share's priorities).
    pub(crate) fn jobs(&self) -> impl Iterator<Item = usize> + '_ {
        self.ranked.iter().map(|&(_, k)| k)
    }

    /// Queue job `k`, submitted at `submit`.
    pub(crate) fn push(&mut self, k: usize, job: &PendingJob, submit: Time) {
        let key = (self.rank(job, submit), k);
        self.ahead |= self.frontier.is_some_and(|f| key <= f);
        self.ranked.insert(key);
        if self.how == How::Adaptive {
            self.by_limit.insert((-limit(job), k));
            self.work += work(job);
        }
    }

    /// Take job `k` (queued by `push` with these arguments) off the queue.
    pub(crate) fn remove(&mut self, k: usize, job: &PendingJob, submit: Time) {
        self.ranked.remove(&(self.rank(job, submit), k));
        if self.how == How::Adaptive {
            self.by_limit.remove(&(-limit(job), k));
            self.work -= work(job);
        }
    }

    /// The last pass read the first `n` jobs of the queue and started none. Its decisions hold
    /// again at a later time as long as nothing is freed or started (the caller knows) and no job
    /// is queued among those `n`: under FIFO and EASY backfilling a job that did not start
    /// cannot start later on the same free state (a job's end only moves away from the head's
    /// reservation as time passes), the head's reservation comes from the running jobs' ends,
    /// and the jobs after the `n` are not read. This holds only for an order fixed over time;
    /// conservative backfilling plans from `now` and is always run.
    pub(crate) fn examined(&mut self, n: usize) {
        self.ahead = false;
        self.frontier = match (self.how, self.policy.kind) {
            (How::Ranked, PolicyKind::Fifo | PolicyKind::Backfill) if n < self.ranked.len() => n
                .checked_sub(1)
                .and_then(|i| self.ranked.iter().nth(i).copied()),
            _ => None,
        };
    }

    /// Whether the last pass's decisions hold (see [`Queue::examined`]) as far as the queue
    /// goes.
    pub(crate) fn unchanged(&self) -> bool {
        self.frontier.is_some() && !self.ahead
    }

    /// A job's fixed rank: its key at time 0 (see the module doc), 0 in submission order.
    fn rank(&self, job: &PendingJob, submit: Time) -> i128 {
        let aged = |limit: i128| limit + i128::from(submit) * self.per_s;
        match (self.how, self.policy.order) {
            (How::Sorted, _) | (_, Order::Submit) => 0,
            (_, Order::Longest) => aged(-limit(job)),
            _ => aged(limit(job)),
        }
    }

    /// The queue in the order [`sort_queue`] gives at `now`. `pending` gives a job's pending
    /// state and `submitted` its submission time.
    pub(crate) fn ordered<'j>(
        &'j self,
        pending: impl Fn(usize) -> &'j PendingJob + Copy + 'j,
        submitted: impl Fn(&PendingJob) -> Time,
        now: Time,
    ) -> Box<dyn Iterator<Item = &'j PendingJob> + 'j> {
        match self.how {
            How::Ranked => Box::new(self.ranked.iter().map(move |&(_, k)| pending(k))),
            How::Adaptive => {
                // As the core: a job is critical when its limit is at least the backlog.
                let backlog = (self.work / u128::from(self.units.max(1))) as i128;
                let critical = self
                    .by_limit
                    .iter()
                    .take_while(move |&&(neg, _)| -neg >= backlog);
                // At most `units` jobs are critical (each holds at least a backlog of work),
                // so skipping them here costs a bounded time too.
                let rest = self
                    .ranked
                    .iter()
                    .filter(move |&&(_, k)| limit(pending(k)) < backlog);
                Box::new(critical.chain(rest).map(move |&(_, k)| pending(k)))
            }
            How::Sorted => {
                let mut order: Vec<&PendingJob> =
                    self.ranked.iter().map(|&(_, k)| pending(k)).collect();
                let load = Load { units: self.units };
                sort_queue(&mut order, &self.policy, now, &submitted, load);
                Box::new(order.into_iter())
            }
        }
    }
}

/// A job's time limit.
fn limit(job: &PendingJob) -> i128 {
    i128::from(job.request.time_limit_s)
}

/// A job's leaf-seconds, as the adaptive order counts them.
fn work(job: &PendingJob) -> u128 {
    u128::from(job.request.leaves.unwrap_or(1).max(1)) * u128::from(job.request.time_limit_s)
}
