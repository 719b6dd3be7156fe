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
use super::queue::Queue;
use super::trace::{IdHasher, Trace, TraceJob};
use flex_sched::{
    schedule_ordered, JobKind, Pending, PendingJob, Policy, Reason, RunningJob, Start, Time,
};
use gres_plugin::{HostMem, JobId, Request};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::BuildHasherDefault;

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
pub fn simulate<M: SimModel>(model: M, trace: &Trace, cfg: &SimConfig) -> RunResult {
    let mut run = Run::new(model, trace, cfg);
    while let Some(t) = run.next_time() {
        run.step(t);
    }
    run.finish()
}

/// The state of one replay: the model, every job, the queue, the running set and the events
/// to come.
struct Run<'a, M: SimModel> {
    model: M,
    trace: &'a Trace,
    cfg: &'a SimConfig,
    out: RunResult,
    /// Admitted jobs, numbered 1.. in submission order, which is the core's queue order.
    jobs: Vec<Job>,
    /// Each job's index in the trace.
    trace_of: Vec<usize>,
    /// Each job's user, for fair share.
    user_of: Vec<u32>,
    /// Each user's decayed usage, for fair share.
    usage: crate::fairness::Usage,
    /// The execution-time factor of interference under this model.
    interference: f64,
    /// Jobs eligible to start, in the policy's order.
    queue: Queue,
    running: Vec<RunningJob<M::Placement>>,
    /// The job of each entry of `running`.
    running_job: Vec<usize>,
    events: BinaryHeap<Reverse<(Time, Event)>>,
    /// The next job to arrive.
    next_arrival: usize,
    /// Jobs that waited on resources with enough free slices since `last_t`.
    frag: Vec<usize>,
    /// When waiting was last accounted.
    last_t: Time,
    /// Trace ids of jobs that ended, for the trace's `after` dependencies (None when no job
    /// has any).
    ended: Option<HashSet<u64>>,
    /// Arrived jobs that wait for their dependencies.
    blocked: Vec<usize>,
    /// The last pass started nothing and nothing was freed since: with the queue unchanged
    /// where that pass read it ([`Queue::unchanged`]), a pass now would decide the same.
    settled: bool,
}

impl<'a, M: SimModel> Run<'a, M> {
    /// Admit the trace's jobs to the model; those it can never hold are noted as not run.
    fn new(model: M, trace: &'a Trace, cfg: &'a SimConfig) -> Self {
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
        let (mut jobs, trace_of) = admit(&model, trace, &mut out.not_run);
        let (user_ix, names) = crate::fairness::user_of(trace);
        let user_of = trace_of.iter().map(|&i| user_ix[i]).collect();
        let interference = cfg.exec.interference(M::KIND);
        for j in &mut jobs {
            let least = model.min_factor(&j.pending, &cfg.exec) * interference;
            j.min_run_s = run_time(j.duration_s, least).min(j.pending.request.time_limit_s);
        }
        let queue = Queue::new(&cfg.policy, cfg.fairshare.is_some(), model.units());
        Self {
            model,
            trace,
            cfg,
            out,
            jobs,
            trace_of,
            user_of,
            usage: crate::fairness::Usage::new(names.len()),
            interference,
            queue,
            running: Vec::new(),
            running_job: Vec::new(),
            events: BinaryHeap::new(),
            next_arrival: 0,
            frag: Vec::new(),
            last_t: 0,
            ended: trace
                .jobs
                .iter()
                .any(|j| !j.after.is_empty())
                .then(HashSet::new),
            blocked: Vec::new(),
            settled: false,
        }
    }

    /// The time of the next event or arrival; None when there is neither.
    fn next_time(&self) -> Option<Time> {
        let next_event = self.events.peek().map(|Reverse((t, _))| *t);
        let next_submit = self.jobs.get(self.next_arrival).map(|j| j.submit);
        next_event.into_iter().chain(next_submit).min()
    }

    /// Everything that happens at `t`: events, arrivals, and a pass if anything changed.
    fn step(&mut self, t: Time) {
        let freed = self.apply_events(t);
        self.settled &= !freed;
        let changed = self.arrive(t) | freed;
        // Eligibility is decided before the pass, as flexd does.
        self.release_ready();
        if !changed {
            return;
        }
        let repeat = self.settled && self.queue.unchanged();
        self.account_fragmentation(t, repeat);
        if self.queue.is_empty() {
            return;
        }
        if repeat {
            // The same decisions as the last pass: it is not run again, but counted.
            self.out.passes += 1;
            return;
        }
        self.pass(t);
    }

    /// Apply the events due at `t`; whether any of them changed something.
    fn apply_events(&mut self, t: Time) -> bool {
        let mut changed = false;
        while let Some(&Reverse((et, ev))) = self.events.peek() {
            if et != t {
                break;
            }
            self.events.pop();
            changed |= match ev {
                Event::End(k) => self.end(k, t),
                Event::Reconfigured(g) => {
                    self.model.reconfigured(g);
                    true
                }
            };
        }
        changed
    }

    /// Job `k` ends at `t`: its resources are freed and its usage charged. False when the
    /// event is stale (a drain moved the job's end).
    fn end(&mut self, k: usize, t: Time) -> bool {
        if self.jobs[k].end != t || self.jobs[k].slot == usize::MAX {
            return false;
        }
        let slot = self.jobs[k].slot;
        let r = self.running.swap_remove(slot);
        self.running_job.swap_remove(slot);
        if let Some(&moved) = self.running_job.get(slot) {
            self.jobs[moved].slot = slot;
        }
        self.jobs[k].slot = usize::MAX;
        self.model.release(&r.placement);
        if let Some(f) = &self.cfg.fairshare {
            let start = self.jobs[k].start.unwrap_or(t);
            self.usage
                .charge(self.user_of[k], self.jobs[k].slices, start, t, f);
        }
        if let Some(ended) = &mut self.ended {
            ended.insert(self.trace.jobs[self.trace_of[k]].id);
        }
        true
    }

    /// Jobs submitted at `t` arrive (blocked until their dependencies are met); whether any did.
    fn arrive(&mut self, t: Time) -> bool {
        let mut changed = false;
        while self.next_arrival < self.jobs.len() && self.jobs[self.next_arrival].submit == t {
            self.blocked.push(self.next_arrival);
            self.next_arrival += 1;
            changed = true;
        }
        changed
    }

    /// Queue the arrived jobs whose dependencies have all ended.
    fn release_ready(&mut self) {
        let (trace, trace_of, ended) = (self.trace, &self.trace_of, &self.ended);
        let (jobs, queue) = (&self.jobs, &mut self.queue);
        self.blocked.retain(|&k| {
            // No job of the trace has dependencies when nothing tracks the ended ones.
            let ready = ended
                .as_ref()
                .is_none_or(|e| trace.jobs[trace_of[k]].after.iter().all(|d| e.contains(d)));
            if ready {
                queue.push(k, &jobs[k].pending, jobs[k].submit);
            }
            !ready
        });
    }

    /// Charge the time since the last accounting to the jobs that waited with enough free
    /// slices, and to the run when any did; `keep` them when they wait on as they did.
    fn account_fragmentation(&mut self, t: Time, keep: bool) {
        for &k in &self.frag {
            self.jobs[k].ext_frag_s += t - self.last_t;
        }
        if !self.frag.is_empty() {
            self.out.ext_frag_time_s += t - self.last_t;
        }
        if !keep {
            self.frag.clear();
        }
        self.last_t = t;
    }

    /// One scheduling pass at `t`: its starts are applied in order.
    fn pass(&mut self, t: Time) {
        if let Some(f) = &self.cfg.fairshare {
            let (jobs, user_of) = (&self.jobs, &self.user_of);
            let held = self.running_job.iter().map(|&rk| {
                let j = &jobs[rk];
                (user_of[rk], j.slices, j.start.unwrap_or(t))
            });
            let priority = self.usage.priority(held, t, f);
            for k in self.queue.jobs() {
                let j = &mut self.jobs[k];
                j.pending.priority = priority.of(self.user_of[k], j.submit);
            }
        }
        let jobs = &self.jobs;
        let submitted = |q: &PendingJob| jobs[(q.id.0 - 1) as usize].submit;
        let mut read = 0;
        let mut order = self
            .queue
            .ordered(|k| &jobs[k].pending, submitted, t)
            .inspect(|_| read += 1);
        let d = schedule_ordered(&self.model, &mut order, &self.running, t, &self.cfg.policy);
        drop(order);
        self.out.passes += 1;
        self.settled = d.starts.is_empty();
        if self.settled {
            self.queue.examined(read);
        }
        for s in &d.starts {
            let k = (s.job.0 - 1) as usize;
            self.queue
                .remove(k, &self.jobs[k].pending, self.jobs[k].submit);
            self.start(s, t);
        }
        self.note_fragmentation(&d.pending);
    }

    /// Start a job at `t` where the pass placed it, after its GPU's drain if the placement
    /// reconfigures one.
    fn start(&mut self, s: &Start<M::Placement>, t: Time) {
        let k = (s.job.0 - 1) as usize;
        self.model.occupy(&s.placement);
        let mut own_drain = 0;
        if let Some(g) = self.model.reconfigures(&s.placement) {
            own_drain = self.cfg.drain_s;
            self.drain(g, t);
        }
        let factor = self.model.factor(&s.placement, &self.cfg.exec) * self.interference;
        let j = &mut self.jobs[k];
        let limit = j.pending.request.time_limit_s;
        let run = run_time(j.duration_s, factor);
        j.timeout = run > limit;
        j.run_s = run.min(limit);
        j.start = Some(t);
        j.drain_s = own_drain;
        j.end = t + own_drain + j.run_s;
        j.slices = self.model.slices(&s.placement);
        if self.cfg.record_rows {
            j.rows = self.model.rows(&s.placement);
        }
        j.slot = self.running.len();
        self.events.push(Reverse((j.end, Event::End(k))));
        self.running.push(RunningJob {
            id: s.job,
            placement: s.placement.clone(),
            expected_end: t + own_drain + j.pending.request.time_limit_s,
        });
        self.running_job.push(k);
    }

    /// Reconfigure GPU `g` from `t`: it drains, and every job running on it is suspended for
    /// as long, so its end moves.
    fn drain(&mut self, g: u32, t: Time) {
        let drain_s = self.cfg.drain_s;
        self.out.reconfigurations += 1;
        self.events
            .push(Reverse((t + drain_s, Event::Reconfigured(g))));
        for (r, &rk) in self.running.iter_mut().zip(&self.running_job) {
            if self.model.on_gpu(&r.placement, g) {
                r.expected_end += drain_s;
                let j = &mut self.jobs[rk];
                j.end += drain_s;
                j.drain_s += drain_s;
                self.out.suspended_job_s += drain_s;
                self.events.push(Reverse((j.end, Event::End(rk))));
            }
        }
    }

    /// Note the jobs left waiting on resources while the free slices would hold them: external
    /// fragmentation (or, under Dynamic-MIG, a reconfiguration they may not or cannot have yet).
    fn note_fragmentation(&mut self, pending: &[Pending]) {
        let mut free = None;
        for p in pending {
            if p.reason == Reason::Resources {
                let k = (p.job.0 - 1) as usize;
                // A CPU-only job (need 0) waits for cores or host memory, never for slices.
                let need = self.jobs[k].need;
                if need > 0 && need <= *free.get_or_insert_with(|| self.model.free_slices()) {
                    self.frag.push(k);
                }
            }
        }
    }

    /// The run's result: a record of every job that ran, in submission order.
    fn finish(self) -> RunResult {
        let mut out = self.out;
        for (k, j) in self.jobs.into_iter().enumerate() {
            let id = self.trace.jobs[self.trace_of[k]].id;
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
                leaves: j.pending.request.leaves.unwrap_or(0),
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
}

/// What tells a trace's jobs apart besides their ids: leaves, GPU memory, limit, kind, cores
/// and host memory.
type Shape = (u32, Option<u64>, u64, JobKind, u32, Option<HostMem>);

/// The core's request for a job of the trace: its leaves (none for a CPU-only job), GPU
/// memory, cores, host memory and limit.
pub fn request_of(t: &TraceJob) -> Request {
    let base = if t.leaves == 0 {
        Request::cpus(t.cpus, t.limit_s())
    } else {
        Request {
            cpus: t.cpus,
            ..Request::leaves(t.leaves, t.limit_s())
        }
    };
    Request {
        mem_bytes: t.mem_gb.map(|g| (g * 1e9).ceil() as u64),
        host_mem: t.host_mem,
        ..base
    }
}

/// The trace's jobs in submission order (ties in file order) as the core's pending jobs, those
/// the model admits; with each one's index in the trace. The others go to `not_run`.
fn admit<M: SimModel>(
    model: &M,
    trace: &Trace,
    not_run: &mut Vec<NotRun>,
) -> (Vec<Job>, Vec<usize>) {
    let mut order: Vec<usize> = (0..trace.jobs.len()).collect();
    order.sort_by_key(|&i| (trace.jobs[i].submit_s, i));
    let mut jobs: Vec<Job> = Vec::with_capacity(order.len());
    let mut trace_of: Vec<usize> = Vec::with_capacity(order.len());
    // Jobs are told apart only by id beyond these fields, so each distinct one is admitted
    // once (admission places the job on idle hardware): its answer and its need.
    let mut seen: HashMap<Shape, Result<u32, String>, BuildHasherDefault<IdHasher>> =
        HashMap::default();
    for &i in &order {
        let t = &trace.jobs[i];
        let pending = PendingJob {
            id: JobId(jobs.len() as u64 + 1),
            request: request_of(t),
            priority: 0,
            kind: t.kind,
        };
        let r = &pending.request;
        let shape = (
            t.leaves,
            r.mem_bytes,
            r.time_limit_s,
            t.kind,
            t.cpus,
            t.host_mem,
        );
        let need = match seen
            .entry(shape)
            .or_insert_with(|| model.admit(&pending).map(|()| model.need(&pending)))
        {
            Ok(need) => *need,
            Err(reason) => {
                not_run.push(NotRun {
                    id: t.id,
                    reason: reason.clone(),
                });
                continue;
            }
        };
        jobs.push(Job {
            need,
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
    (jobs, trace_of)
}
