//! The discrete-event loop. Events are job arrivals, job ends and the ends of Dynamic-MIG
//! reconfigurations; at each event time the model and the running set are brought up to date
//! and the scheduler core's [`schedule`] is called once, and its starts are applied in order.
//!
//! Virtual time is whole seconds (the core's [`Time`]); run times are rounded up
//! ([`run_time`]). A start whose placement reconfigures a GPU drains it: the new job runs after
//! the drain, and every job running on that GPU is suspended for as long, so its end moves.
//!
//! A job whose run reaches its time limit ends there, TIMEOUT, as flexd's supervisor ends it
//! (SIGTERM at the limit; the job is taken to exit on it). The limit counts execution time: a
//! drain that suspends a job moves its limit with its end.

use super::exec_model::{run_time, ExecModel};
use super::models::{ModelKind, SimModel};
use super::trace::Trace;
use flex_sched::{schedule_with, JobKind, PendingJob, Policy, Reason, RunningJob, Time};
use gres_plugin::{JobId, Request};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

/// How a run is set up besides the model and the trace.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub policy: Policy,
    /// Seconds a Dynamic-MIG reconfiguration drains its GPU (§2.3.3: 100–120 s).
    pub drain_s: u64,
    pub exec: ExecModel,
    /// Keep each job's chart rows (for the Gantt chart).
    pub record_rows: bool,
    /// Multifactor priority with fair share between the trace's users, as flexd computes it
    /// (None: every priority 0, the paper's FIFO order).
    pub fairshare: Option<crate::fairness::FairShare>,
}

impl SimConfig {
    /// The paper's setup: the given policy, a 110 s drain, the default execution-time model.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            drain_s: DEFAULT_DRAIN_S,
            exec: ExecModel::default(),
            record_rows: false,
            fairshare: None,
        }
    }
}

/// Middle of the 100–120 s the paper measured for a mig-manager reconfiguration.
pub const DEFAULT_DRAIN_S: u64 = 110;

/// What happened to one job that ran.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// The trace's job id.
    pub id: u64,
    pub kind: JobKind,
    pub leaves: u32,
    pub submit_s: Time,
    pub duration_s: u64,
    /// When the core started it (its resources are held from then on).
    pub start_s: Time,
    pub end_s: Time,
    /// Execution time: the duration times the model's factor, cut at the time limit.
    pub run_s: u64,
    /// The job reached its time limit and was ended there.
    pub timeout: bool,
    /// The least execution time any placement of this model could give it (for the bound).
    pub min_run_s: u64,
    /// Its time limit.
    pub limit_s: u64,
    /// Time it spent drained: waiting for its own GPU's reconfiguration, and suspended by
    /// later ones. `end = start + run + drain`.
    pub drain_s: u64,
    /// Time it waited with enough compute slices free on some host, but unusable for it.
    pub ext_frag_s: u64,
    /// Compute slices its placement held.
    pub slices: u32,
    /// Compute slices it needs at least under the model.
    pub need: u32,
    /// Chart rows it held (only with [`SimConfig::record_rows`]).
    pub rows: Vec<u32>,
}

impl JobRecord {
    pub fn wait_s(&self) -> u64 {
        self.start_s - self.submit_s
    }

    pub fn jct_s(&self) -> u64 {
        self.end_s - self.submit_s
    }
}

/// A job that never ran, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct NotRun {
    pub id: u64,
    pub reason: String,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub model: ModelKind,
    pub policy: Policy,
    /// Jobs that ran, in submission order.
    pub jobs: Vec<JobRecord>,
    pub not_run: Vec<NotRun>,
    pub reconfigurations: u64,
    /// Seconds of one reconfiguration.
    pub drain_s: u64,
    /// Job-seconds of running jobs suspended by drains.
    pub suspended_job_s: u64,
    /// Seconds during which at least one job waited for resources while a host had enough free
    /// compute slices for it (external fragmentation, the paper's definition).
    pub ext_frag_time_s: u64,
    /// Compute slices of the cluster.
    pub capacity: u64,
    /// Scheduling passes run.
    pub passes: u64,
    /// Chart row labels (only with [`SimConfig::record_rows`]).
    pub row_labels: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A job ends (stale when the job's end has moved since).
    End(usize),
    /// A GPU's reconfiguration is over.
    Reconfigured(u32),
}

/// Per-job state during a run.
struct Job {
    pending: PendingJob,
    submit: Time,
    duration_s: u64,
    need: u32,
    start: Option<Time>,
    end: Time,
    run_s: u64,
    timeout: bool,
    min_run_s: u64,
    drain_s: u64,
    ext_frag_s: u64,
    slices: u32,
    rows: Vec<u32>,
    /// Position in the running list while it runs.
    slot: usize,
}

/// Replay a trace on a model.
pub fn simulate<M: SimModel>(mut model: M, trace: &Trace, cfg: &SimConfig) -> RunResult {
    let mut order: Vec<usize> = (0..trace.jobs.len()).collect();
    order.sort_by_key(|&i| (trace.jobs[i].submit_s, i));
    let mut out = RunResult {
        model: M::KIND,
        policy: cfg.policy,
        jobs: Vec::new(),
        not_run: Vec::new(),
        reconfigurations: 0,
        drain_s: cfg.drain_s,
        suspended_job_s: 0,
        ext_frag_time_s: 0,
        capacity: model.capacity(),
        passes: 0,
        row_labels: if cfg.record_rows {
            model.row_labels()
        } else {
            Vec::new()
        },
    };

    // Jobs numbered 1.. in submission order, which is the core's queue order.
    let mut jobs: Vec<Job> = Vec::with_capacity(order.len());
    let mut trace_of: Vec<usize> = Vec::with_capacity(order.len());
    for &i in &order {
        let t = &trace.jobs[i];
        let pending = PendingJob {
            id: JobId(jobs.len() as u64 + 1),
            request: Request {
                mem_bytes: t.mem_gb.map(|g| (g * 1e9).ceil() as u64),
                ..Request::leaves(t.leaves, t.limit_s())
            },
            priority: 0,
            kind: t.kind,
        };
        if let Err(reason) = model.admit(&pending) {
            out.not_run.push(NotRun { id: t.id, reason });
            continue;
        }
        jobs.push(Job {
            need: model.need(&pending),
            pending,
            submit: t.submit_s,
            duration_s: t.duration_s,
            start: None,
            end: 0,
            run_s: 0,
            timeout: false,
            min_run_s: 0,
            drain_s: 0,
            ext_frag_s: 0,
            slices: 0,
            rows: Vec::new(),
            slot: usize::MAX,
        });
        trace_of.push(i);
    }

    let (user_ix, names) = crate::fairness::users(trace);
    let user_of: Vec<u32> = trace_of
        .iter()
        .map(|&i| user_ix[&trace.jobs[i].id])
        .collect();
    let mut usage = crate::fairness::Usage::new(names.len());
    let interference = cfg.exec.interference(M::KIND);
    for j in &mut jobs {
        let least = model.min_factor(&j.pending, &cfg.exec) * interference;
        j.min_run_s = run_time(j.duration_s, least).min(j.pending.request.time_limit_s);
    }
    let mut queue: Vec<PendingJob> = Vec::new();
    let mut running: Vec<RunningJob<M::Placement>> = Vec::new();
    let mut running_job: Vec<usize> = Vec::new();
    let mut events: BinaryHeap<Reverse<(Time, Event)>> = BinaryHeap::new();
    let mut next_arrival = 0;
    let mut frag: Vec<usize> = Vec::new();
    let mut last_t: Time = 0;
    // Dependencies (the trace's `after`): ended jobs by trace id, and arrived jobs that wait.
    let mut ended: HashSet<u64> = HashSet::new();
    let mut blocked: Vec<usize> = Vec::new();
    let deps_done = |k: usize, ended: &HashSet<u64>| {
        trace.jobs[trace_of[k]]
            .after
            .iter()
            .all(|d| ended.contains(d))
    };

    loop {
        let next_event = events.peek().map(|Reverse((t, _))| *t);
        let next_submit = jobs.get(next_arrival).map(|j| j.submit);
        let t = match (next_event, next_submit) {
            (None, None) => break,
            (a, b) => a.into_iter().chain(b).min().expect("one is set"),
        };
        let mut changed = false;
        while let Some(&Reverse((et, ev))) = events.peek() {
            if et != t {
                break;
            }
            events.pop();
            match ev {
                Event::End(k) => {
                    if jobs[k].end != t || jobs[k].slot == usize::MAX {
                        continue; // moved by a drain
                    }
                    let slot = jobs[k].slot;
                    let r = running.swap_remove(slot);
                    running_job.swap_remove(slot);
                    if let Some(&moved) = running_job.get(slot) {
                        jobs[moved].slot = slot;
                    }
                    jobs[k].slot = usize::MAX;
                    model.release(&r.placement);
                    if let Some(f) = &cfg.fairshare {
                        let start = jobs[k].start.unwrap_or(t);
                        usage.charge(user_of[k], jobs[k].slices, start, t, f);
                    }
                    ended.insert(trace.jobs[trace_of[k]].id);
                }
                Event::Reconfigured(g) => model.reconfigured(g),
            }
            changed = true;
        }
        while next_arrival < jobs.len() && jobs[next_arrival].submit == t {
            blocked.push(next_arrival);
            next_arrival += 1;
            changed = true;
        }
        // Eligibility is decided before the pass, as flexd does.
        blocked.retain(|&k| {
            let ready = deps_done(k, &ended);
            if ready {
                queue.push(jobs[k].pending.clone());
            }
            !ready
        });
        if !changed {
            continue;
        }
        for &k in &frag {
            jobs[k].ext_frag_s += t - last_t;
        }
        if !frag.is_empty() {
            out.ext_frag_time_s += t - last_t;
        }
        frag.clear();
        last_t = t;
        if queue.is_empty() {
            continue;
        }

        if let Some(f) = &cfg.fairshare {
            let held = running_job.iter().map(|&rk| {
                let j = &jobs[rk];
                (user_of[rk], j.slices, j.start.unwrap_or(t))
            });
            let job = |p: &PendingJob| (p.id.0 - 1) as usize;
            let (user, submit) = (
                |p: &PendingJob| user_of[job(p)],
                |p: &PendingJob| jobs[job(p)].submit,
            );
            usage.prioritize(&mut queue, user, submit, held, t, f);
        }
        let d = schedule_with(&model, &queue, &running, t, &cfg.policy, |q| {
            jobs[(q.id.0 - 1) as usize].submit
        });
        out.passes += 1;
        for s in &d.starts {
            let k = (s.job.0 - 1) as usize;
            model.occupy(&s.placement);
            let mut own_drain = 0;
            if let Some(g) = model.reconfigures(&s.placement) {
                own_drain = cfg.drain_s;
                out.reconfigurations += 1;
                events.push(Reverse((t + cfg.drain_s, Event::Reconfigured(g))));
                for (r, &rk) in running.iter_mut().zip(&running_job) {
                    if model.on_gpu(&r.placement, g) {
                        r.expected_end += cfg.drain_s;
                        let j = &mut jobs[rk];
                        j.end += cfg.drain_s;
                        j.drain_s += cfg.drain_s;
                        out.suspended_job_s += cfg.drain_s;
                        events.push(Reverse((j.end, Event::End(rk))));
                    }
                }
            }
            let factor = model.factor(&s.placement, &cfg.exec) * interference;
            let j = &mut jobs[k];
            let limit = j.pending.request.time_limit_s;
            let run = run_time(j.duration_s, factor);
            j.timeout = run > limit;
            j.run_s = run.min(limit);
            j.start = Some(t);
            j.drain_s = own_drain;
            j.end = t + own_drain + j.run_s;
            j.slices = model.slices(&s.placement);
            if cfg.record_rows {
                j.rows = model.rows(&s.placement);
            }
            j.slot = running.len();
            events.push(Reverse((j.end, Event::End(k))));
            running.push(RunningJob {
                id: s.job,
                placement: s.placement.clone(),
                expected_end: t + own_drain + j.pending.request.time_limit_s,
            });
            running_job.push(k);
        }
        if !d.starts.is_empty() {
            queue.retain(|q| jobs[(q.id.0 - 1) as usize].start.is_none());
        }
        // Waiting on resources while the free slices would hold the job: external fragmentation
        // (or, under Dynamic-MIG, a reconfiguration it may not or cannot have yet).
        let mut free = None;
        for p in &d.pending {
            if p.reason == Reason::Resources {
                let k = (p.job.0 - 1) as usize;
                if jobs[k].need <= *free.get_or_insert_with(|| model.free_slices()) {
                    frag.push(k);
                }
            }
        }
    }

    for (k, j) in jobs.into_iter().enumerate() {
        let id = trace.jobs[trace_of[k]].id;
        let Some(start_s) = j.start else {
            out.not_run.push(NotRun {
                id,
                reason: "never started".into(),
            });
            continue;
        };
        out.jobs.push(JobRecord {
            id,
            kind: j.pending.kind,
            leaves: j.pending.request.leaves.unwrap_or(1),
            submit_s: j.submit,
            duration_s: j.duration_s,
            start_s,
            end_s: j.end,
            run_s: j.run_s,
            timeout: j.timeout,
            min_run_s: j.min_run_s,
            limit_s: j.pending.request.time_limit_s,
            drain_s: j.drain_s,
            ext_frag_s: j.ext_frag_s,
            slices: j.slices,
            need: j.need,
            rows: j.rows,
        });
    }
    out
}
