//! The queue as the scheduler core takes it, kept so that a pass does not copy it: passes share
//! one snapshot (`Arc`), and jobs that arrive or leave while a pass runs are set aside and
//! folded in when the next pass takes the snapshot.

use flex_sched::PendingJob;
use gres_plugin::JobId;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Every pending job: who is in the queue.
    ids: BTreeSet<JobId>,
    /// The core's input as of the last pass (in arrival order; the core orders it).
    snapshot: Arc<Vec<PendingJob>>,
    /// Arrived since the snapshot.
    incoming: Vec<PendingJob>,
    /// In the snapshot but no longer pending.
    gone: HashSet<JobId>,
}

impl Queue {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub(crate) fn contains(&self, id: JobId) -> bool {
        self.ids.contains(&id)
    }

    pub(crate) fn push(&mut self, job: PendingJob) {
        if self.ids.insert(job.id) {
            self.incoming.push(job);
        }
    }

    pub(crate) fn remove(&mut self, id: JobId) {
        if !self.ids.remove(&id) {
            return;
        }
        match self.incoming.iter().position(|j| j.id == id) {
            Some(i) => {
                self.incoming.swap_remove(i);
            }
            None => {
                self.gone.insert(id);
            }
        }
    }

    /// The queue for a pass, in the core's order (priority, then id), so that its own sort
    /// finds it sorted. Costs a copy only when a previous snapshot is still held, and a sweep
    /// only when jobs left since the last one.
    pub(crate) fn snapshot(&mut self) -> Arc<Vec<PendingJob>> {
        if !self.incoming.is_empty() || !self.gone.is_empty() {
            let v = Arc::make_mut(&mut self.snapshot);
            if !self.gone.is_empty() {
                v.retain(|j| !self.gone.contains(&j.id));
                self.gone.clear();
            }
            self.incoming.sort_unstable_by_key(order);
            let in_order = match (v.last(), self.incoming.first()) {
                (Some(a), Some(b)) => order(a) <= order(b),
                _ => true,
            };
            // By an eighth at a time: a doubling Vec of 100,000 queued jobs would hold up to
            // 10 MB unused, and growing by each pass's arrivals alone would copy the queue on
            // every pass of a stream of submissions.
            let want = v.len() + self.incoming.len();
            if want > v.capacity() {
                v.reserve_exact(self.incoming.len().max(v.len() / 8));
            }
            v.append(&mut self.incoming);
            if !in_order {
                // Two sorted runs: the stable sort merges them in one sweep.
                v.sort_by_key(order);
            }
        }
        self.snapshot.clone()
    }
}

impl Queue {
    /// Give the snapshot's jobs these priorities (in the snapshot's order, as the last
    /// [`Queue::snapshot`] returned it) and put it in the core's order again. In place when no
    /// pass holds the snapshot any more, which is the case between passes.
    pub(crate) fn reprioritize(&mut self, priorities: &[i64]) -> Arc<Vec<PendingJob>> {
        let v = Arc::make_mut(&mut self.snapshot);
        debug_assert_eq!(v.len(), priorities.len());
        for (j, &p) in v.iter_mut().zip(priorities) {
            j.priority = p;
        }
        v.sort_by_key(order);
        self.snapshot.clone()
    }
}

/// The core's queue order: higher priority first, then submission (id) order.
fn order(j: &PendingJob) -> (std::cmp::Reverse<i64>, JobId) {
    (std::cmp::Reverse(j.priority), j.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::Request;

    fn job(id: u64) -> PendingJob {
        PendingJob {
            id: JobId(id),
            request: Request::leaves(1, 60),
            priority: 0,
            kind: Default::default(),
        }
    }

    fn ids(q: &mut Queue) -> Vec<u64> {
        q.snapshot().iter().map(|j| j.id.0).collect()
    }

    #[test]
    fn arrivals_and_departures_reach_the_next_snapshot() {
        let mut q = Queue::default();
        for i in [1, 3, 2, 4] {
            q.push(job(i));
        }
        q.push(job(2));
        assert_eq!(ids(&mut q), [1, 2, 3, 4]);
        let held = q.snapshot();
        q.remove(JobId(2));
        q.push(job(5));
        q.remove(JobId(5));
        q.push(job(6));
        assert_eq!((q.len(), q.contains(JobId(2))), (4, false));
        assert_eq!(ids(&mut q), [1, 3, 4, 6]);
        // A pass still holding the old snapshot sees it unchanged.
        assert_eq!(held.len(), 4);
        q.remove(JobId(9));
        assert_eq!(q.len(), 4);
        // Late arrivals and higher priorities land where the core would put them.
        let mut urgent = job(7);
        urgent.priority = 5;
        q.push(job(5));
        q.push(urgent);
        assert_eq!(ids(&mut q), [7, 1, 3, 4, 5, 6]);
    }
}
