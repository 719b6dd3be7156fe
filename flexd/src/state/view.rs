//! The state as people see it: a job in full (flexq --json, flexcontrol show job) and flexq's
//! rows, each pending job with why it waits (the last pass's reason, or what holds it back
//! before the pass) and array tasks as `12_3` or, pending, `12_[4-15%2]`.

use super::{group_id, Job, State};
use crate::store::{JobRow, StoredAlloc};
use flex_proto::{units_text, ArrayRows, JobState, JobView, QueueRow};
use flex_sched as sched;
use std::borrow::Cow;

/// The reason shown for a job whose start is decided but whose supervisor does not run yet.
const STARTING: &str = "Starting";

/// Whether the job's start is decided but its supervisor does not run yet: its start waits to
/// be written (a full state disk) or is being launched.
fn starting(r: &JobRow) -> bool {
    r.state == JobState::Running && r.supervisor_pid.is_none()
}

/// The state people see: a job shows RUNNING, its time counting, only once its supervisor
/// runs; until then it is PENDING with the reason "Starting".
pub(crate) fn shown_state(r: &JobRow) -> JobState {
    if starting(r) {
        JobState::Pending
    } else {
        r.state
    }
}

impl State {
    /// What the last pass said about a pending job.
    fn waiting(&self, r: &JobRow) -> Option<&sched::Pending> {
        if r.state != JobState::Pending {
            return None;
        }
        let i = self.waiting.binary_search_by_key(&r.id, |p| p.job).ok()?;
        Some(&self.waiting[i])
    }

    /// "Resources:memory" or "Resources:cores" for a job that waits on resources when host
    /// memory or cores alone keep it off the host now; None when its leaves do ("Resources").
    fn short_of(&self, r: &JobRow, waiting: Option<&sched::Pending>) -> Option<&'static str> {
        if !waiting.is_some_and(|w| w.reason == sched::Reason::Resources) {
            return None;
        }
        match self.cluster.shortage(&r.request)? {
            "memory" => Some("Resources:memory"),
            _ => Some("Resources:cores"),
        }
    }

    /// A job in full (flexq --json); a pending job with what the last pass said about it.
    pub(crate) fn view(&self, j: &Job) -> JobView {
        let r = &j.row;
        let waiting = self.waiting(r);
        JobView {
            id: r.id,
            name: r.name.clone(),
            user: r.user.to_string(),
            uid: r.uid,
            account: r.account.to_string(),
            state: shown_state(r),
            submit_time: r.submit_time,
            start_time: r.start_time.filter(|_| !starting(r)),
            end_time: r.end_time,
            request: r.request.clone(),
            alloc: r.alloc.as_deref().map(StoredAlloc::view),
            reason: match (self.held_back(j), waiting) {
                _ if starting(r) => Some(STARTING.to_string()),
                (Some(h), _) => Some(h.to_string()),
                (None, w) if self.short_of(r, w).is_some() => self.short_of(r, w).map(String::from),
                (None, Some(w)) => Some(w.reason.to_string()),
                (None, None) => r.reason.clone(),
            },
            estimated_start: waiting.and_then(|w| w.estimated_start),
            exit_code: r.exit_code,
            signal: r.signal,
            array: r.q.array,
            dependency: r.q.dependency.as_deref().cloned(),
            restarts: r.q.restarts,
            requeue: r.q.requeue,
            priority: match r.state {
                JobState::Pending => self.priority_of(r),
                _ => r.priority,
            },
            nice: r.q.nice,
            qos: r.qos.as_deref().map(String::from),
            comment: r.q.comment.as_deref().map(String::from),
            pending_tasks: None,
            details: None,
        }
    }

    /// Jobs as flexq's table shows them; `jobs` in increasing id order, so that what the last
    /// pass said about them is found by walking alongside. With `arrays`, tasks show as
    /// `12_3`, and with [`ArrayRows::Collapse`] the pending tasks of an array as one row at
    /// its first pending task (the caller leaves the others out).
    pub(crate) fn queue_rows<'a>(
        &'a self,
        jobs: impl Iterator<Item = &'a Job>,
        now: u64,
        arrays: Option<ArrayRows>,
    ) -> impl Iterator<Item = QueueRow<'a>> {
        let mut next = 0;
        jobs.map(move |j| {
            let r = &j.row;
            let mut waiting = None;
            if r.state == JobState::Pending {
                // Most often the very next entry: a pass leaves most pending jobs waiting.
                let rest = &self.waiting[next..];
                if rest.first().is_some_and(|p| p.job < r.id) {
                    next += rest.partition_point(|p| p.job < r.id);
                }
                waiting = self.waiting.get(next).filter(|p| p.job == r.id);
                next += usize::from(waiting.is_some());
            }
            let mut row = Self::queue_row(r, waiting, now);
            if let Some(s) = self.short_of(r, waiting) {
                row.reason = Some(Cow::Borrowed(s));
            }
            if let Some(h) = self.held_back(j) {
                row.reason = Some(Cow::Borrowed(h));
            }
            if let (Some(mode), Some(a)) = (arrays, r.q.array) {
                row.id = a.job;
                row.array = Some(Cow::Owned(match mode {
                    ArrayRows::Collapse if r.state == JobState::Pending => {
                        self.pending_tasks_text(j)
                    }
                    _ => a.index.to_string(),
                }));
            }
            row
        })
    }

    /// `[4-15%2]`: the pending tasks of `j`'s array, as squeue writes them.
    fn pending_tasks_text(&self, j: &Job) -> String {
        match self.pending_tasks(j) {
            Some(t) => format!("[{t}]"),
            None => j.row.q.array.map_or(String::new(), |a| a.index.to_string()),
        }
    }

    /// `4-15%2`: the pending tasks of `j`'s array and its throttle (squeue's `%K` of the
    /// array's one pending row); None when `j` is no array task.
    pub(crate) fn pending_tasks(&self, j: &Job) -> Option<String> {
        j.row.q.array?;
        let g = self.group(group_id(j))?;
        let indices = g
            .pending()
            .iter()
            .filter_map(|id| Some(self.jobs.get(id)?.row.q.array?.index));
        let mut text = flex_proto::array::compress(indices);
        if let Some(n) = g.throttle() {
            text.push_str(&format!("%{n}"));
        }
        Some(text)
    }

    fn queue_row<'a>(r: &'a JobRow, waiting: Option<&'a sched::Pending>, now: u64) -> QueueRow<'a> {
        let alloc = r.alloc.as_deref();
        let shares: Vec<u32> =
            alloc.map_or_else(Vec::new, |a| a.units.iter().map(|u| u.share).collect());
        QueueRow {
            id: r.id,
            name: Cow::Borrowed(&r.name),
            user: Cow::Borrowed(&r.user),
            state: shown_state(r),
            elapsed_s: match (r.start_time, r.end_time) {
                _ if starting(r) => 0,
                (Some(s), Some(e)) => e.saturating_sub(s),
                (Some(s), None) => now.saturating_sub(s),
                _ => 0,
            },
            time_limit_s: r.request.time_limit_s,
            units: units(&shares, &r.request),
            start: match waiting {
                Some(w) => w.estimated_start,
                None => r.start_time.filter(|_| !starting(r)),
            },
            host: alloc.map(|a| Cow::Borrowed(a.host.as_str())),
            reason: match waiting {
                _ if starting(r) => Some(Cow::Borrowed(STARTING)),
                Some(w) => Some(reason_text(&w.reason)),
                None => r.reason.as_deref().map(Cow::Borrowed),
            },
            array: None,
        }
    }
}

/// [`units_text`], borrowed for the usual ask of a few whole leaves: a listing makes one per
/// pending job, and an allocation for each was a tenth of a page's time.
fn units(held: &[u32], asked: &gres_plugin::Request) -> Cow<'static, str> {
    const FEW: [&str; 17] = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    ];
    match (held, asked.leaves, asked.gpus, asked.mem_bytes) {
        ([], Some(n), None, None) if (n as usize) < FEW.len() => Cow::Borrowed(FEW[n as usize]),
        _ => Cow::Owned(units_text(held, asked)),
    }
}

/// Why a job waits, as flexq shows it; borrowed unless it carries a message.
fn reason_text(r: &sched::Reason) -> Cow<'_, str> {
    match r {
        sched::Reason::Resources => Cow::Borrowed("Resources"),
        sched::Reason::Priority => Cow::Borrowed("Priority"),
        sched::Reason::Reservation => Cow::Borrowed("Reservation"),
        sched::Reason::Limit(name) => Cow::Borrowed(name),
        r @ sched::Reason::Unsatisfiable(_) => Cow::Owned(r.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::Request;

    #[test]
    fn borrowed_texts_read_as_the_written_ones() {
        for n in 0..40 {
            let r = Request::leaves(n, 60);
            assert_eq!(units(&[], &r), units_text(&[], &r));
            assert_eq!(units(&[1000; 3], &r), units_text(&[1000; 3], &r));
        }
        let mut r = Request::leaves(2, 60);
        r.mem_bytes = Some(16 << 30);
        assert_eq!(units(&[], &r), "2,gpumem=16G");
        assert_eq!(units(&[], &Request::cpus(4, 60)), "0");
        for reason in [
            sched::Reason::Resources,
            sched::Reason::Priority,
            sched::Reason::Reservation,
            sched::Reason::Unsatisfiable("no host has 9 leaves".into()),
            sched::Reason::Limit("QOSMaxGRESPerUser".into()),
        ] {
            assert_eq!(reason_text(&reason), reason.to_string());
        }
    }
}
