//! The scheduling pass as the state takes part in it: [`State::plan`] takes the pass's input
//! under the lock (dependencies, priorities and limits decided first), [`Plan::decide`] runs
//! the pure core on it off the lock, and [`State::apply`] carries out what it decided.

use super::{prepare, Effect, State};
use crate::config::Settings;
use crate::exec::launch::Launch;
use crate::store::writer::Op;
use crate::store::{JobRow, StoredAlloc};
use flex_proto::JobState;
use flex_sched::{self as sched, Allocation, Cluster, Decisions, PendingJob, Reason, RunningJob};
use gres_plugin::env::EnvUnit;
use gres_plugin::JobId;
use std::sync::Arc;

impl State {
    #[cfg(test)]
    /// One scheduling pass under the caller's lock (tests, and callers without one).
    pub(crate) fn schedule(&mut self, s: &Settings, now: u64) -> usize {
        match self.plan(s, now) {
            Some(p) => {
                let d = p.decide(&s.policy);
                self.apply(s, d, now)
            }
            None => 0,
        }
    }

    /// The input of a pass, so the core can run without the lock; None with an empty queue.
    /// Dependencies are decided first: the core sees only jobs that may start. Then priorities
    /// and limits (state/priority.rs, state/prepare.rs): the core gets plain numbers and only
    /// the jobs no limit holds back.
    pub(crate) fn plan(&mut self, s: &Settings, now: u64) -> Option<Plan> {
        self.release_begun(now);
        self.refresh_dependencies(s, now);
        self.dirty = false;
        if self.pending.is_empty() {
            return None;
        }
        let snapshot = self.pending.snapshot();
        let mut submitted = Vec::new();
        let (queue, held) = match prepare::prepare(&s.priority, self, &snapshot, now) {
            // All weights 0 and no limits: the queue as it was, priorities as submitted (given
            // back when an earlier pass, before flexd.toml changed, wrote others in).
            None if self.priorities.is_empty() => (snapshot, Vec::new()),
            None => {
                self.priorities.clear();
                let bases: Vec<i64> = snapshot.iter().map(|p| self.roster.base(p.id)).collect();
                drop(snapshot);
                (self.pending.reprioritize(&bases), Vec::new())
            }
            Some(p) => {
                self.priorities = p.priorities;
                submitted = p.submitted;
                match p.queue {
                    Some(queue) => (Arc::new(queue), p.held),
                    None => {
                        drop(snapshot);
                        (self.pending.reprioritize(&p.in_order), p.held)
                    }
                }
            }
        };
        // The core reads these off the lock, found by id: taken from the roster, not from
        // each job (a lookup in the jobs' map and a cache miss per job, half of a pass's time
        // under the lock with 100,000 queued).
        if s.policy.order == sched::Order::Submit {
            submitted = Vec::new();
        } else if submitted.is_empty() {
            submitted = queue
                .iter()
                .map(|p| (p.id, self.roster.submitted(p.id).unwrap_or(now)))
                .collect();
            submitted.sort_unstable_by_key(|s| s.0);
        }
        self.half_life_s = s.priority.half_life_s;
        Some(Plan {
            cluster: self.cluster.clone(),
            queue,
            running: self.running_for_core(now),
            now,
            held,
            submitted,
        })
    }

    /// A pending job's priority as of the last plan (its base priority when the last plan
    /// computed none).
    pub(super) fn priority_of(&self, r: &JobRow) -> i64 {
        match self.priorities.binary_search_by_key(&r.id, |p| p.0) {
            Ok(i) => self.priorities[i].1,
            Err(_) => r.priority - r.q.nice,
        }
    }

    /// Carry out what the core decided on a plan: start what it starts (unless the job left
    /// the queue or its resources were taken since the plan: then another pass follows), keep
    /// each pending job's reason and estimated start, fail what no host can run.
    pub(crate) fn apply(&mut self, s: &Settings, d: Decisions<Allocation>, now: u64) -> usize {
        let mut started = 0;
        for st in d.starts {
            if !self.pending.contains(st.job) || self.cluster.try_occupy(&st.placement).is_err() {
                self.dirty = true;
                continue;
            }
            self.start(s, st.job, st.placement, now);
            started += 1;
        }
        let mut waiting = d.pending;
        for p in &waiting {
            if let Reason::Unsatisfiable(why) = &p.reason {
                if self.pending.contains(p.job) {
                    let why = format!("Unsatisfiable: {why}");
                    self.end_pending(p.job, JobState::Failed, now, Some(why), None);
                }
            }
        }
        // Kept whole and looked up by id when a view asks: no per-job work per pass.
        waiting.sort_unstable_by_key(|p| p.job);
        self.waiting = waiting;
        started
    }

    /// What the launcher needs to start a job on `alloc`.
    pub(super) fn launch(
        &self,
        s: &Settings,
        row: &JobRow,
        alloc: &Allocation,
        time_limit_s: u64,
    ) -> Launch {
        let id = row.id;
        let host = self.cluster.host(alloc.host);
        let units = alloc
            .units
            .iter()
            .map(|u| {
                let l = host.leaf(u.leaf);
                EnvUnit {
                    uuid: l.uuid.clone(),
                    gpu: l.gpu.0,
                    share: u.share,
                    memory_bytes: l.memory_bytes,
                }
            })
            .collect();
        let cores: Vec<u32> = alloc.cores.iter().map(|c| c.0).collect();
        Launch {
            job: id,
            host: host.hostname.clone(),
            units,
            bind_cpus: self.cpus.map(&cores),
            cores_per_unit: (cores.len() / alloc.units.len().max(1)) as u32,
            cores,
            time_limit_s,
            kill_grace: s.kill_grace,
            start_timeout: s.batch_start_timeout,
            nccl: s.nccl.clone(),
            slurm_aliases: s.slurm_aliases,
            srun_in_jobs: s.srun_in_jobs,
            torchrun_in_jobs: s.torchrun_in_jobs,
            mem_bytes: alloc.mem_bytes,
            host_mem: row.request.host_mem,
            pids_max: s.job_pids_max,
            job_tmpdir: s.job_tmpdir.clone(),
            propagate_limits: s.propagate_limits.clone(),
        }
    }

    /// Start a pending job on `alloc`, which the caller has occupied.
    fn start(&mut self, s: &Settings, id: JobId, alloc: Allocation, now: u64) {
        let stored = StoredAlloc::new(&alloc, self.cluster.host(alloc.host));
        let limit = self.jobs[&id].row.request.time_limit_s;
        let launch = self.launch(s, &self.jobs[&id].row, &alloc, limit);
        self.leave_queue(id, true);
        let j = self.jobs.get_mut(&id).expect("a started job is known");
        j.row.state = JobState::Running;
        j.row.start_time = Some(now);
        j.row.reason = None;
        j.row.alloc = Some(Box::new(stored.clone()));
        j.alloc = Some(Box::new(alloc));
        self.running.insert(id);
        tracing::debug!("job {id}: starting on {}", stored.host);
        self.outbox.push(Effect::Start(
            Op::Start {
                job: id,
                time: now,
                alloc: stored,
            },
            Box::new(launch),
        ));
    }

    /// The queue as the core sees it, with `extra` appended (for --test-only).
    pub(crate) fn queue_with(&mut self, extra: Option<PendingJob>) -> Vec<PendingJob> {
        let snapshot = self.pending.snapshot();
        let mut q = Vec::with_capacity(snapshot.len() + 1);
        q.extend(snapshot.iter().cloned());
        q.extend(extra);
        q
    }

    pub(crate) fn running_for_core(&self, now: u64) -> Vec<RunningJob<Allocation>> {
        self.running
            .iter()
            .filter_map(|id| {
                let j = &self.jobs[id];
                Some(RunningJob {
                    id: *id,
                    placement: j.alloc.as_deref()?.clone(),
                    expected_end: j.row.start_time.unwrap_or(now) + j.row.request.time_limit_s,
                })
            })
            .collect()
    }
}

/// A pass's input, taken from the state under its lock.
pub(crate) struct Plan {
    pub cluster: Cluster,
    pub queue: Arc<Vec<PendingJob>>,
    pub running: Vec<RunningJob<Allocation>>,
    pub now: u64,
    /// Jobs a limit holds back, with their reasons (not in `queue`).
    pub held: Vec<sched::Pending>,
    /// Submission times by id, for the aging of the ordered policies (empty for `submit`).
    pub submitted: Vec<(JobId, u64)>,
}

/// Pending jobs, in queue order, that get an estimated start after each pass (the head always
/// has its reservation). Playing the queue forward costs a few placements per job, so it stops
/// here; flexq shows no estimate further back.
pub(crate) const ESTIMATE_DEPTH: usize = 100;

impl Plan {
    /// Run the scheduler core on it, with estimated starts for the first pending jobs.
    pub(crate) fn decide(&self, policy: &sched::Policy) -> Decisions<Allocation> {
        let submitted = |p: &PendingJob| match self.submitted.binary_search_by_key(&p.id, |s| s.0) {
            Ok(i) => self.submitted[i].1,
            Err(_) => self.now,
        };
        let (queue, running, now) = (&self.queue, &self.running, self.now);
        let mut d = sched::schedule_with(&self.cluster, queue, running, now, policy, submitted);
        sched::estimate_starts(
            &self.cluster,
            &self.queue,
            &self.running,
            self.now,
            &mut d,
            ESTIMATE_DEPTH,
        );
        d.pending.extend(self.held.iter().cloned());
        d
    }
}
