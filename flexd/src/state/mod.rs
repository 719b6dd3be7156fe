//! What flexd knows while it runs: the jobs (pending, running and recently finished), the one
//! persistent [`Cluster`] that running jobs occupy, and the changes waiting for the database.
//!
//! Every transition goes through here and leaves its database change in the outbox, so the
//! order of changes is the order of transitions. No I/O happens here except through
//! [`Signaller`] (signals to supervisors and job groups); the daemon flushes the outbox to the
//! writer while it still holds the lock.

use crate::config::Settings;
use crate::exec::affinity::CpuMap;
use crate::exec::files::StatusFile;
use crate::exec::launch::Launch;
use crate::store::writer::{End, Op};
use crate::store::{JobRow, NewJob, StoredAlloc};
use flex_proto::JobState;
use flex_sched::{self as sched, Allocation, Cluster, Model, PendingJob};
use gres_plugin::JobId;
use std::collections::{BTreeMap, BTreeSet};

pub(crate) mod control;
pub(crate) use pass::ESTIMATE_DEPTH;
mod count;
mod depend;
mod eligible;
mod pass;
mod prepare;
pub(crate) mod priority;
mod queue;
mod recover;
mod taskset;
#[cfg(test)]
mod tests;
mod view;
pub(crate) use count::Text;
pub(crate) use eligible::group_id;
use eligible::Group;
use queue::Queue;
pub(crate) use recover::Found;
pub(crate) use view::shown_state;

/// Seconds before a job whose start could not be recorded is tried again.
const START_RETRY_S: u64 = 5;

/// Side effects that are not database writes.
pub(crate) trait Signaller: Send {
    /// Signal a job's supervisor (SIGTERM means cancel).
    fn supervisor(&self, pid: u32, signal: i32) -> Result<(), String>;
    /// Signal every process of a running job's process group.
    fn job_group(&self, job: JobId, signal: i32) -> Result<(), String>;
}

/// A change for the database, and what follows its commit.
#[derive(Debug)]
pub(crate) enum Effect {
    Write(Op),
    /// Start the job's supervisor once its start is committed.
    Start(Op, Box<Launch>),
    /// Remove the job's run and status files once its end (or its requeue, when its start
    /// could not be recorded) is committed.
    End(Op),
    /// Start the supervisor of a job whose start was committed with its submission.
    Launch(Box<Launch>),
}

/// A job in memory: its row (everything but script and environment) and scheduling state.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub row: JobRow,
    /// The scheduler's form of `row.alloc` while it runs.
    pub alloc: Option<Box<Allocation>>,
    /// Someone asked to cancel it while it runs (its supervisor is told once known; a start
    /// that could not be recorded then ends CANCELLED instead of being queued again).
    pub cancel_pending: Option<u32>,
    /// Someone asked to requeue it before its supervisor was known.
    pub requeue_pending: bool,
    /// Its script and environment in the byte quota's count (`count::Held`).
    pub texts: count::Slots,
}

/// How a job ended, from its status file or flexd's own judgement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Outcome {
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub time: u64,
    pub note: Option<String>,
    /// The run's peak resident memory in bytes, when its supervisor measured it.
    pub max_rss: Option<u64>,
    /// The run's CPU time in microseconds, when its supervisor measured it.
    pub cpu_usec: Option<u64>,
}

impl From<&StatusFile> for Outcome {
    fn from(s: &StatusFile) -> Self {
        // As Slurm: a job whose process the OOM killer took ended OUT_OF_MEMORY, whatever its
        // script returned after; a cancel or time limit is still told as such.
        let oom = s.oom_killed && matches!(s.state, JobState::Completed | JobState::Failed);
        Outcome {
            state: if oom { JobState::OutOfMemory } else { s.state },
            exit_code: s.exit_code,
            signal: s.signal,
            time: s.end_time,
            note: s.note.clone(),
            max_rss: s.max_rss,
            cpu_usec: s.cpu_usec,
        }
    }
}

pub(crate) struct State {
    pub cluster: Cluster,
    /// Boxed: a `Job` is ~460 bytes and B-tree nodes are about half full, so inline values
    /// would cost twice that per job in a long queue.
    jobs: BTreeMap<JobId, Box<Job>>,
    /// The queue as the core takes it: eligible pending jobs, a few per array.
    pending: Queue,
    /// Pending and running jobs by submission (a job, or an array): see [`eligible`].
    /// Boxed: most groups are one job, and B-tree nodes of large values run half empty.
    groups: BTreeMap<JobId, Box<Group>>,
    /// Arrays in memory: job id → how many ids from it its tasks span.
    arrays: BTreeMap<JobId, u64>,
    /// Groups whose dependency is not decided yet.
    dep_waiting: BTreeSet<JobId>,
    /// Pending jobs whose `--begin` time has not come (as of the last plan), by that time.
    begin_waiting: BTreeSet<(u64, JobId)>,
    /// What the last pass said about each job it left waiting, by id.
    waiting: Vec<sched::Pending>,
    running: BTreeSet<JobId>,
    /// Pending and running jobs per uid and QOS, plus submissions on their way to the
    /// database.
    queued: count::Queued,
    /// The scripts and environments of the jobs in memory, and the bytes each user's queued
    /// jobs hold.
    held: count::Held,
    /// Submissions prepared and not yet committed (or failed).
    in_flight: usize,
    outbox: Vec<Effect>,
    /// Something changed that a scheduling pass should see.
    dirty: bool,
    cpus: CpuMap,
    signaller: Box<dyn Signaller>,
    /// Fair-share usage per user and account (state/priority.rs).
    ledger: priority::Ledger,
    /// Each pending job's user, account and QOS, for priorities (state/prepare.rs).
    roster: prepare::Roster,
    /// Each pending job's priority as of the last plan, by id.
    priorities: Vec<(JobId, i64)>,
    /// Fair-share usage halves every this many seconds (flexd.toml, as of the last plan).
    half_life_s: u64,
    /// User, account and QOS names, one copy each for all the jobs that carry them.
    names: count::Names,
    /// flexd's own effective uid.
    pub daemon_uid: u32,
}

impl State {
    pub(crate) fn new(
        cluster: Cluster,
        cpus: CpuMap,
        signaller: Box<dyn Signaller>,
        daemon_uid: u32,
    ) -> State {
        State {
            cluster,
            jobs: BTreeMap::new(),
            pending: Queue::default(),
            groups: BTreeMap::new(),
            arrays: BTreeMap::new(),
            dep_waiting: BTreeSet::new(),
            begin_waiting: BTreeSet::new(),
            waiting: Vec::new(),
            running: BTreeSet::new(),
            queued: count::Queued::default(),
            held: count::Held::default(),
            in_flight: 0,
            outbox: Vec::new(),
            dirty: false,
            cpus,
            signaller,
            ledger: priority::Ledger::default(),
            roster: prepare::Roster::default(),
            priorities: Vec::new(),
            half_life_s: 0,
            names: count::Names::default(),
            daemon_uid,
        }
    }

    /// Fair-share usage as stored, at start-up.
    pub(crate) fn load_usage(&mut self, s: &Settings, rows: Vec<crate::store::usage::UsageRow>) {
        self.ledger = priority::Ledger::load(rows);
        self.half_life_s = s.priority.half_life_s;
    }

    pub(crate) fn signaller(&self) -> &dyn Signaller {
        &*self.signaller
    }

    /// Database changes and launches since the last call, in order.
    pub(crate) fn take_outbox(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.outbox)
    }

    /// Whether a scheduling pass is due (and clear the flag).
    pub(crate) fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// The running jobs, to be changed in place (mail.rs marks the mails it sent).
    pub(crate) fn running_jobs_mut(&mut self) -> impl Iterator<Item = &mut Job> + '_ {
        let running = &self.running;
        self.jobs
            .iter_mut()
            .filter(move |(id, _)| running.contains(id))
            .map(|(_, j)| &mut **j)
    }

    pub(crate) fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id).map(|j| &**j)
    }

    pub(crate) fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values().map(|j| &**j)
    }

    /// Jobs with a larger id than `after` (all with None), by id.
    pub(crate) fn jobs_after(&self, after: Option<JobId>) -> impl Iterator<Item = &Job> + Clone {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, Excluded);
        self.jobs.range((from, Unbounded)).map(|(_, j)| &**j)
    }

    pub(crate) fn running_jobs(&self) -> impl Iterator<Item = &Job> {
        self.running.iter().map(|id| &*self.jobs[id])
    }

    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Jobs the user has pending or running, or on their way in.
    pub(crate) fn queued_by(&self, uid: u32) -> u32 {
        self.queued.by_user(uid)
    }

    /// Jobs the user has pending or running in QOS `qos` (the default QOS when `default`), or
    /// on their way in.
    pub(crate) fn queued_in_qos(&self, uid: u32, qos: &str, default: bool) -> u32 {
        self.queued.in_qos(uid, qos, default)
    }

    /// Bytes of distinct scripts and environments the user's pending and running jobs hold,
    /// and what a job holding `texts` would add to them.
    pub(crate) fn queued_bytes(&self, uid: u32, texts: [count::Text; 2]) -> (u64, u64) {
        (self.held.bytes(uid), self.held.adds(uid, texts))
    }

    /// Count a submission of `tasks` jobs in QOS `qos`, holding `texts`, against its user's
    /// limits before it is committed; returns where its texts are counted.
    pub(crate) fn begin_submission(
        &mut self,
        uid: u32,
        qos: Option<&str>,
        tasks: u32,
        texts: [count::Text; 2],
    ) -> count::Slots {
        self.queued.add(uid, count::qos_key(qos), tasks);
        self.in_flight += 1;
        self.held.hold(uid, texts, tasks, true)
    }

    /// A submission that could not be committed: give back its counts and its resources.
    pub(crate) fn abandon_submission(
        &mut self,
        uid: u32,
        qos: Option<&str>,
        tasks: u32,
        texts: count::Slots,
        start: Option<&StoredAlloc>,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.queued.remove(uid, count::qos_key(qos), tasks);
        self.held.unqueue(texts, tasks);
        self.held.release(texts, tasks);
        if let Some(a) = start {
            self.cluster.release(&a.placement);
        }
        self.dirty = true;
    }

    /// A job left the queue for good (it ended): its user's counts go down.
    fn unreserve(&mut self, id: JobId) {
        let j = &self.jobs[&id];
        self.queued
            .remove(j.row.uid, count::qos_key(j.row.qos.as_deref()), 1);
        self.held.unqueue(j.texts, 1);
    }

    /// A job joined the queue (recovered, requeued): its user's counts go up.
    fn reserve(&mut self, j: &Job) {
        let r = &j.row;
        self.queued.add(r.uid, count::qos_key(r.qos.as_deref()), 1);
        self.held.queue(j.texts, 1);
    }

    /// With an empty queue a submission need not wait for a pass: ask the core about the
    /// queue of just this job, and when it starts now, take its resources at once so its start
    /// is committed with the submission (one commit between submit and run).
    pub(crate) fn start_now(
        &mut self,
        s: &Settings,
        request: &gres_plugin::Request,
        now: u64,
    ) -> Option<StoredAlloc> {
        if !self.pending.is_empty() || self.in_flight > 1 {
            return None;
        }
        let job = PendingJob {
            id: JobId(u64::MAX),
            request: request.clone(),
            priority: 0,
            kind: sched::JobKind::Batch,
        };
        let running = self.running_for_core(now);
        let d = sched::schedule(&self.cluster, &[job], &running, now, &s.policy);
        let start = d.starts.into_iter().next()?;
        self.cluster.occupy(&start.placement);
        Some(StoredAlloc::new(
            &start.placement,
            self.cluster.host(start.placement.host),
        ))
    }

    /// A committed submission joins the queue (an array: every task, ids from `id` on), or
    /// runs when it was started with its commit.
    pub(crate) fn add_submitted(&mut self, s: &Settings, id: JobId, j: NewJob) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let q = &j.spec.queue;
        let row = JobRow {
            id,
            name: j.spec.name.clone(),
            uid: j.uid,
            gid: j.gid,
            user: self.names.get(&j.user),
            account: self.names.get(&j.account),
            request: j.spec.request,
            priority: j.priority,
            state: JobState::Pending,
            submit_time: j.submit_time,
            start_time: None,
            end_time: None,
            exit_code: None,
            signal: None,
            reason: None,
            alloc: None,
            supervisor_pid: None,
            master_port: None,
            qos: j.spec.qos.as_deref().map(|q| self.names.get(q)),
            q: crate::store::Q::new(crate::store::Queueing {
                throttle: q.array.as_ref().and_then(|a| a.throttle),
                dependency: q.dependency.clone().map(std::sync::Arc::new),
                hold: crate::store::Hold::submitted(q.hold),
                requeue: q.requeue.unwrap_or(true),
                nice: i64::from(j.spec.nice),
                begin: q.begin.filter(|&b| b > j.submit_time),
                comment: j.spec.options.comment.as_deref().map(Box::from),
                mail: (j.spec.options.mail.as_ref())
                    .filter(|m| m.events.0 != 0)
                    .map(|m| Box::new(m.clone())),
                ..Default::default()
            }),
        };
        let mut job = Job {
            row,
            alloc: None,
            cancel_pending: None,
            requeue_pending: false,
            texts: j.held,
        };
        let Some(stored) = j.start else {
            let indices = q.array.as_ref().map(|a| a.indices());
            for (k, index) in indices.into_iter().flatten().enumerate() {
                let mut task = job.clone();
                task.row.id = JobId(id.0 + k as u64);
                task.row.q.array = Some(flex_proto::ArrayTask { job: id, index });
                self.jobs.insert(task.row.id, Box::new(task));
                self.enqueue(JobId(id.0 + k as u64));
            }
            if q.array.is_none() {
                self.jobs.insert(id, Box::new(job));
                self.enqueue(id);
            }
            self.dirty = true;
            return;
        };
        let limit = job.row.request.time_limit_s;
        let launch = self.launch(s, &job.row, &stored.placement, limit);
        job.row.state = JobState::Running;
        job.row.start_time = Some(j.submit_time);
        job.alloc = Some(Box::new(stored.placement.clone()));
        job.row.alloc = Some(Box::new(stored));
        self.running.insert(id);
        self.jobs.insert(id, Box::new(job));
        self.count_running(id);
        tracing::debug!("job {id}: started with its submission");
        self.outbox.push(Effect::Launch(Box::new(launch)));
    }

    /// End a pending job (cancelled, or unsatisfiable).
    fn end_pending(
        &mut self,
        id: JobId,
        to: JobState,
        now: u64,
        reason: Option<String>,
        by: Option<u32>,
    ) {
        if !self.jobs.contains_key(&id) {
            return;
        }
        self.leave_queue(id, false);
        let j = self.jobs.get_mut(&id).expect("checked above");
        j.row.state = to;
        j.row.end_time = Some(now);
        j.row.reason = reason.clone();
        self.unreserve(id);
        self.outbox.push(Effect::Write(Op::End(End {
            job: id,
            from: JobState::Pending,
            to,
            time: now,
            exit_code: None,
            signal: None,
            reason,
            cancelled_by: by,
            charge: Vec::new(),
            max_rss: None,
            cpu_usec: None,
        })));
        self.dirty = true;
    }

    /// A running job ended: free its resources and record the end. Ignored for a job that is
    /// not running (its end was already recorded).
    pub(crate) fn finish(&mut self, id: JobId, mut o: Outcome) -> bool {
        if !self.running.remove(&id) {
            return false;
        }
        self.left_running(id);
        let j = self.jobs.get_mut(&id).expect("a running job is known");
        if let Some(a) = j.alloc.take() {
            self.cluster.release(&a);
        }
        if o.state == JobState::Pending {
            if j.cancel_pending.is_none() {
                self.unstarted(id, o);
                return true;
            }
            // Cancelled meanwhile: it ends so, without having run.
            o.state = JobState::Cancelled;
            o.note = Some("cancelled before it started".into());
        }
        let requeue = j.row.q.requeue_requested.take();
        j.row.state = o.state;
        j.row.end_time = Some(o.time);
        j.row.exit_code = o.exit_code;
        j.row.signal = o.signal;
        j.row.reason = o.note.clone();
        let host = priority::HostTotals::of(&self.cluster);
        let charge = self.ledger.charge(j, o.time, self.half_life_s, &host);
        tracing::info!(
            "job {id}: {} (exit code {:?}, signal {:?})",
            o.state,
            o.exit_code,
            o.signal
        );
        self.unreserve(id);
        self.outbox.push(Effect::End(Op::End(End {
            job: id,
            from: JobState::Running,
            to: o.state,
            time: o.time,
            exit_code: o.exit_code,
            signal: o.signal,
            reason: o.note,
            cancelled_by: None,
            charge,
            max_rss: o.max_rss,
            cpu_usec: o.cpu_usec,
        })));
        self.dirty = true;
        if let Some(hold) = requeue {
            self.requeue_ended(id, o.time, hold, None);
        }
        true
    }

    /// A job whose supervisor could not record its start (its run file, on a full state disk)
    /// and ran nothing of it, and is gone: its resources are free again, and it waits in the
    /// queue to be tried again after [`START_RETRY_S`] (BeginTime), with one restart more.
    fn unstarted(&mut self, id: JobId, o: Outcome) {
        tracing::warn!(
            "job {id}: its start could not be recorded ({}); queued again, to be tried in \
             {START_RETRY_S} s",
            o.note.as_deref().unwrap_or("no reason given")
        );
        self.unreserve(id);
        self.requeue_ended(id, o.time, false, Some(o.time + START_RETRY_S));
        // Its status file, if it wrote one, goes with the requeue's commit.
        if let Some(Effect::Write(op @ Op::Requeue { .. })) = self.outbox.pop() {
            self.outbox.push(Effect::End(op));
        }
    }

    /// The launcher started the job's supervisor.
    pub(crate) fn launched(&mut self, id: JobId, pid: u32, port: u16) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.row.state != JobState::Running {
            return;
        }
        j.row.supervisor_pid = Some(pid);
        j.row.master_port = Some(port);
        let cancel = j.cancel_pending;
        let requeue = std::mem::take(&mut j.requeue_pending);
        self.outbox.push(Effect::Write(Op::Launched {
            job: id,
            supervisor_pid: pid,
            master_port: port,
        }));
        if cancel.is_some() || requeue {
            let _ = self.signaller.supervisor(pid, libc::SIGTERM);
        }
    }

    /// Cancel a job: a pending one ends now, a running one's supervisor is told (its end
    /// comes from its status file). Errors are for the user.
    pub(crate) fn cancel(&mut self, id: JobId, by: u32, now: u64) -> Result<(), String> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| format!("job {id} not found"))?;
        match j.row.state {
            JobState::Pending => {
                self.end_pending(id, JobState::Cancelled, now, None, Some(by));
                Ok(())
            }
            JobState::Running => {
                self.outbox.push(Effect::Write(Op::CancelRequested {
                    job: id,
                    by,
                    time: now,
                }));
                j.cancel_pending = Some(by);
                match j.row.supervisor_pid {
                    Some(pid) => self.signaller.supervisor(pid, libc::SIGTERM),
                    None => Ok(()),
                }
            }
            s => Err(format!("job {} has already finished ({s})", self.shown(id))),
        }
    }

    /// Forget finished jobs that ended before `since`, and a user's oldest finished jobs past
    /// `bound` (as many as they may queue, and scripts and environments of as many bytes as
    /// their queued jobs may hold): the database keeps their records, and deletes their
    /// scripts and environments. A job others depend on is kept.
    pub(crate) fn prune_finished(&mut self, since: u64, bound: &crate::config::Limits) {
        let keep = self.depended_on();
        let held = &mut self.held;
        let mut forgotten = Vec::new();
        // Per user, the finished jobs still kept that could be forgotten.
        let mut finished: BTreeMap<u32, u32> = BTreeMap::new();
        self.jobs.retain(|id, j| {
            let needed = keep.contains(&group_id(j)) || keep.contains(&j.row.id);
            if !j.row.state.is_finished() || needed {
                return true;
            }
            if j.row.end_time.is_none_or(|t| t >= since) {
                *finished.entry(j.row.uid).or_insert(0) += 1;
                return true;
            }
            held.release(j.texts, 1);
            forgotten.push(*id);
            false
        });
        let max_jobs = bound.max_queued_per_user;
        let max_bytes = bound.max_queued_bytes_per_user;
        for (uid, mut n) in finished {
            if n <= max_jobs && self.held.finished_only(uid) <= max_bytes {
                continue;
            }
            let mut theirs: Vec<(u64, JobId)> = self
                .jobs
                .values()
                .filter(|j| j.row.uid == uid && j.row.state.is_finished())
                .filter(|j| !keep.contains(&group_id(j)) && !keep.contains(&j.row.id))
                .map(|j| (j.row.end_time.unwrap_or(0), j.row.id))
                .collect();
            theirs.sort_unstable();
            for (_, id) in theirs {
                if n <= max_jobs && self.held.finished_only(uid) <= max_bytes {
                    break;
                }
                let j = self.jobs.remove(&id).expect("listed from the jobs");
                self.held.release(j.texts, 1);
                forgotten.push(id);
                n -= 1;
            }
        }
        if !forgotten.is_empty() {
            self.outbox.push(Effect::Write(Op::Purge(forgotten)));
        }
        let jobs = &self.jobs;
        self.arrays
            .retain(|a, n| jobs.range(*a..JobId(a.0 + *n)).next().is_some());
    }

    /// Supervisors to check for life: (job, pid) of running jobs whose supervisor is known.
    pub(crate) fn supervisors(&self) -> Vec<(JobId, u32)> {
        self.running
            .iter()
            .filter_map(|id| Some((*id, self.jobs[id].row.supervisor_pid?)))
            .collect()
    }

    /// A supervisor found under another pid than recorded (it started while flexd was down).
    pub(crate) fn set_supervisor(&mut self, id: JobId, pid: u32) {
        if let Some(j) = self.jobs.get_mut(&id) {
            j.row.supervisor_pid = Some(pid);
        }
    }
}

pub(crate) fn node_fail(now: u64, note: String) -> Outcome {
    Outcome {
        state: JobState::NodeFail,
        exit_code: None,
        signal: None,
        time: now,
        note: Some(note),
        max_rss: None,
        cpu_usec: None,
    }
}

fn pending_job(j: &Job) -> PendingJob {
    PendingJob {
        id: j.row.id,
        request: j.row.request.clone(),
        priority: j.row.priority - j.row.q.nice,
        kind: sched::JobKind::Batch,
    }
}
