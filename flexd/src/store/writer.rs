//! The one writer: a thread that owns the writing connection and commits, in ONE transaction,
//! every change waiting in its channel when it gets to them (group commit), then tells each
//! sender. Under load a commit carries thousands of submissions for one fsync.
//!
//! A change is acknowledged only after its transaction commits. When a batch fails, its
//! changes are retried one transaction each, so one bad change does not fail the others.
//!
//! When the database cannot be written at all (a full disk, an I/O error), no change is lost:
//! submissions are refused at once (their senders get the error), and every other change —
//! starts, ends, cancellations, barriers — waits, in order, and is tried again once a second
//! until it commits. Meanwhile [`Writer::stalled`] says so, and flexd starts no job.

use super::purge;
use super::queueing::{self, Hold, Update};
use super::usage::UsageRow;
use super::{event, insert_job, start_job, state_name, Bodies, NewJob, StoreError, StoredAlloc};
use flex_proto::JobState;
use gres_plugin::JobId;
use rusqlite::{params, Connection, Transaction};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::sync::oneshot;

/// What a submission is told while changes wait for the database.
const UNWRITABLE: &str = "flexd cannot write its database now (its disk is full or failing); \
                          the job is not queued: submit it again once the disk has room";

/// How often changes that could not be written are tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Most changes in one transaction (bounds the latency of the first one in a long burst).
const MAX_BATCH: usize = 8192;

/// How a job ended, as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct End {
    pub job: JobId,
    pub from: JobState,
    pub to: JobState,
    pub time: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Why it failed or was not run (shown by flexq).
    pub reason: Option<String>,
    /// Who cancelled it, when someone did.
    pub cancelled_by: Option<u32>,
    /// The fair-share usage its run leaves its user and account with (none if it never ran),
    /// written in the same transaction as the end.
    pub charge: Vec<UsageRow>,
    /// The run's peak resident memory in bytes (sacct's MaxRSS), when measured.
    pub max_rss: Option<u64>,
    /// The run's CPU time in microseconds (sacct's TotalCPU), when measured.
    pub cpu_usec: Option<u64>,
}

/// One change to the database.
#[derive(Debug)]
pub(crate) enum Op {
    Insert(Box<NewJob>),
    Start {
        job: JobId,
        time: u64,
        alloc: StoredAlloc,
    },
    /// The supervisor runs.
    Launched {
        job: JobId,
        supervisor_pid: u32,
        master_port: u16,
    },
    CancelRequested {
        job: JobId,
        by: u32,
        time: u64,
    },
    End(End),
    Hold {
        job: JobId,
        hold: Hold,
    },
    /// A running job is being ended to be requeued (held afterwards when `hold`).
    RequeueRequested {
        job: JobId,
        hold: bool,
    },
    /// Back in the queue, from `from` (its last run kept).
    Requeue {
        job: JobId,
        time: u64,
        hold: Hold,
        from: JobState,
    },
    Update(Box<Update>),
    /// What flexd's samples of its leaves said of its GPU use (after its end).
    GpuUsage {
        job: JobId,
        usage: Box<flex_proto::GpuUsage>,
    },
    /// Delete the scripts and environments of these finished jobs (flexd has forgotten them
    /// `keep_finished` after their end).
    Purge(Vec<JobId>),
    /// Delete the scripts and environments of the jobs that finished before this time (at
    /// start: those that expired while flexd was down).
    PurgeFinishedBefore(u64),
    /// Running jobs' GPU telemetry totals after a sample.
    GpuTotals(Vec<(JobId, gres_plugin::telemetry::summary::GpuTotals)>),
    /// Nothing: its acknowledgement says every change sent before it is committed.
    Barrier,
}

/// A committed submission: its id and the job as it was sent.
pub(crate) type Submitted = Result<(JobId, Box<NewJob>), String>;

/// What to do once the change is committed (or failed).
pub(crate) enum Done {
    Nothing,
    /// A submission's id, for the waiting client.
    Submitted(oneshot::Sender<Submitted>),
    Then(Box<dyn FnOnce(Result<(), String>) + Send>),
}

impl std::fmt::Debug for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Done::Nothing => "Nothing",
            Done::Submitted(_) => "Submitted",
            Done::Then(_) => "Then",
        })
    }
}

#[derive(Debug)]
struct Msg {
    op: Op,
    done: Done,
}

/// The sending side; cheap to clone. The writer exits once every handle is dropped and the
/// channel is drained.
#[derive(Clone, Debug)]
pub(crate) struct Writer {
    tx: mpsc::Sender<Msg>,
    stalled: Arc<AtomicBool>,
}

impl Writer {
    /// Start the writer thread on an open, migrated connection.
    pub(crate) fn spawn(conn: Connection) -> (Writer, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel();
        let stalled = Arc::new(AtomicBool::new(false));
        let flag = stalled.clone();
        let handle = std::thread::Builder::new()
            .name("flexd-writer".into())
            .spawn(move || run(conn, rx, &flag))
            .expect("spawn the writer thread");
        (Writer { tx, stalled }, handle)
    }

    /// Whether changes are waiting because the database cannot be written now.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled.load(Ordering::SeqCst)
    }

    pub(crate) fn send(&self, op: Op, done: Done) {
        if let Err(mpsc::SendError(m)) = self.tx.send(Msg { op, done }) {
            // Only after shutdown began; the change is lost, say so to whoever waits.
            tracing::error!("database writer has stopped; dropping {}", op_name(&m.op));
            deliver(m, Err("the database writer has stopped".into()));
        }
    }

    /// Queue a submission; the receiver gets its id (and the job back) once it is committed.
    pub(crate) fn submit(&self, job: NewJob) -> oneshot::Receiver<Submitted> {
        let (tx, rx) = oneshot::channel();
        self.send(Op::Insert(Box::new(job)), Done::Submitted(tx));
        rx
    }
}

fn run(mut conn: Connection, rx: mpsc::Receiver<Msg>, stalled: &AtomicBool) {
    let mut batch = Vec::new();
    let mut bodies = Bodies::default();
    // Changes that could not be written, in order.
    let mut waiting: VecDeque<Msg> = VecDeque::new();
    loop {
        let first = if waiting.is_empty() {
            rx.recv().ok()
        } else {
            match rx.recv_timeout(RETRY) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        };
        match first {
            Some(m) => batch.push(m),
            None if waiting.is_empty() => break,
            None => {}
        }
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        if !waiting.is_empty() {
            retry(&mut conn, &mut bodies, &mut waiting);
        }
        if waiting.is_empty() {
            commit(&mut conn, &mut bodies, &mut batch, &mut waiting);
        } else {
            // Behind changes that wait: submissions are tried (and refused) on their own, the
            // rest wait their turn.
            for m in batch.drain(..) {
                one_by_one(&mut conn, &mut bodies, m, &mut waiting);
            }
        }
        stalled.store(!waiting.is_empty(), Ordering::SeqCst);
    }
    if !waiting.is_empty() {
        tracing::error!(
            "database writer stopping with {} changes it could not write",
            waiting.len()
        );
    }
    tracing::debug!("database writer: channel closed");
}

/// Commit `batch` in one transaction (or one each after a failure) and tell the senders;
/// changes the database cannot take now go to `waiting`.
fn commit(
    conn: &mut Connection,
    bodies: &mut Bodies,
    batch: &mut Vec<Msg>,
    waiting: &mut VecDeque<Msg>,
) {
    let n = batch.len();
    if n == 0 {
        return;
    }
    match transaction(conn, bodies, batch.iter()) {
        Ok(ids) => {
            tracing::trace!("committed {n} changes in one transaction");
            for (m, id) in batch.drain(..).zip(ids) {
                deliver(m, Ok(id));
            }
        }
        Err(e) => {
            tracing::warn!("a batch of {n} changes failed ({e}); retrying them one by one");
            bodies.forget();
            for m in batch.drain(..) {
                one_by_one(conn, bodies, m, waiting);
            }
        }
    }
}

/// Apply `msgs` in one transaction: the ids of the inserted jobs, or the error.
fn transaction<'a>(
    conn: &mut Connection,
    bodies: &mut Bodies,
    msgs: impl Iterator<Item = &'a Msg>,
) -> Result<Vec<Option<JobId>>, StoreError> {
    (|| {
        let tx = conn.transaction()?;
        let ids = msgs
            .map(|m| apply(&tx, bodies, &m.op))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit()?;
        Ok(ids)
    })()
    .map_err(|e: StoreError| e.in_db(conn))
}

/// Commit one change on its own. A submission that cannot be written is refused; any other
/// change that cannot be written, or that comes after one that waits, waits in order.
fn one_by_one(conn: &mut Connection, bodies: &mut Bodies, m: Msg, waiting: &mut VecDeque<Msg>) {
    let submission = matches!(m.op, Op::Insert(_));
    if !waiting.is_empty() {
        if submission {
            // Nothing is written out of order: a submission waits for no one, it is refused.
            deliver(m, Err(UNWRITABLE.into()));
        } else {
            waiting.push_back(m);
        }
        return;
    }
    match transaction(conn, bodies, std::iter::once(&m)) {
        Ok(ids) => deliver(m, Ok(ids[0])),
        Err(e) => {
            bodies.forget();
            if e.is_storage() && submission {
                tracing::error!("cannot write the database ({e}); a submission is refused");
                deliver(m, Err(format!("{UNWRITABLE} ({e})")));
            } else if e.is_storage() {
                tracing::error!(
                    "cannot write the database ({e}); {} waits and is tried again every second",
                    op_name(&m.op)
                );
                waiting.push_back(m);
            } else {
                tracing::error!("database change {:?} failed: {e}", op_name(&m.op));
                deliver(m, Err(e.to_string()));
            }
        }
    }
}

/// Try the waiting changes again, all in one transaction, then one by one up to the first that
/// still cannot be written.
fn retry(conn: &mut Connection, bodies: &mut Bodies, waiting: &mut VecDeque<Msg>) {
    match transaction(conn, bodies, waiting.iter()) {
        Ok(ids) => {
            tracing::info!("the database takes changes again: {} written", ids.len());
            for (m, id) in waiting.drain(..).zip(ids) {
                deliver(m, Ok(id));
            }
        }
        Err(e) if e.is_storage() => bodies.forget(),
        Err(_) => {
            // A change among them is bad in itself: take them one at a time.
            bodies.forget();
            let pending: Vec<Msg> = waiting.drain(..).collect();
            for m in pending {
                one_by_one(conn, bodies, m, waiting);
            }
        }
    }
}

fn deliver(m: Msg, r: Result<Option<JobId>, String>) {
    match m.done {
        Done::Nothing => {}
        Done::Submitted(tx) => {
            let sent = match (r, m.op) {
                (Ok(Some(id)), Op::Insert(job)) => Ok((id, job)),
                (Err(e), _) => Err(e),
                _ => Err("a submission got no job id".to_string()),
            };
            let _ = tx.send(sent);
        }
        Done::Then(f) => f(r.map(|_| ())),
    }
}

fn op_name(op: &Op) -> String {
    match op {
        Op::Insert(_) => "insert a submission".into(),
        Op::Start { job, .. } => format!("start job {job}"),
        Op::Launched { job, .. } => format!("record the supervisor of job {job}"),
        Op::CancelRequested { job, .. } => format!("record the cancellation of job {job}"),
        Op::End(e) => format!("end job {} as {}", e.job, e.to),
        Op::Hold { job, .. } => format!("hold or release job {job}"),
        Op::RequeueRequested { job, .. } => format!("record the requeue request of job {job}"),
        Op::Requeue { job, .. } => format!("requeue job {job}"),
        Op::Update(u) => format!("update job {}", u.job),
        Op::GpuUsage { job, .. } => format!("record the GPU use of job {job}"),
        Op::Purge(jobs) => format!("purge the scripts of {} finished jobs", jobs.len()),
        Op::PurgeFinishedBefore(t) => format!("purge the scripts of jobs finished before {t}"),
        Op::GpuTotals(t) => format!("record the GPU telemetry totals of {} jobs", t.len()),
        Op::Barrier => "barrier".into(),
    }
}

fn apply(tx: &Transaction, bodies: &mut Bodies, op: &Op) -> Result<Option<JobId>, StoreError> {
    match op {
        Op::Insert(j) => return insert_job(tx, j, bodies).map(Some),
        Op::Start { job, time, alloc } => start_job(tx, *job, *time, alloc)?,
        Op::Launched {
            job,
            supervisor_pid,
            master_port,
        } => {
            tx.prepare_cached(
                "UPDATE jobs SET supervisor_pid = ?2, master_port = ?3 WHERE id = ?1",
            )?
            .execute(params![job.0 as i64, supervisor_pid, master_port])?;
        }
        Op::CancelRequested { job, by, time } => {
            tx.prepare_cached("UPDATE jobs SET cancelled_by = ?2 WHERE id = ?1")?
                .execute(params![job.0 as i64, by])?;
            event(
                tx,
                *job,
                *time,
                Some(JobState::Running),
                JobState::Running,
                Some(&format!("cancel requested by uid {by}")),
            )?;
        }
        Op::End(e) => {
            tx.prepare_cached(
                "UPDATE jobs SET state = ?2, end_time = ?3, exit_code = ?4, signal = ?5,
                    reason = ?6, cancelled_by = COALESCE(?7, cancelled_by),
                    max_rss = COALESCE(?8, max_rss), cpu_usec = COALESCE(?9, cpu_usec)
                 WHERE id = ?1",
            )?
            .execute(params![
                e.job.0 as i64,
                state_name(e.to),
                e.time as i64,
                e.exit_code,
                e.signal,
                e.reason,
                e.cancelled_by,
                e.max_rss.map(|b| b as i64),
                e.cpu_usec.map(|u| u as i64),
            ])?;
            event(tx, e.job, e.time, Some(e.from), e.to, e.reason.as_deref())?;
            super::usage::save(tx, &e.charge)?;
        }
        Op::Hold { job, hold } => queueing::set_hold(tx, *job, *hold)?,
        Op::RequeueRequested { job, hold } => queueing::set_requeue_requested(tx, *job, *hold)?,
        Op::Requeue {
            job,
            time,
            hold,
            from,
        } => queueing::requeue(tx, *job, *time, *hold, *from)?,
        Op::Update(u) => queueing::update(tx, u)?,
        Op::GpuUsage { job, usage } => super::gpu::save_usage(tx, *job, usage)?,
        Op::GpuTotals(totals) => super::gpu::save_totals(tx, totals)?,
        Op::Purge(jobs) => {
            let n = purge::jobs(tx, bodies, jobs)?;
            tracing::debug!("purged the scripts and environments of {n} finished jobs");
        }
        Op::PurgeFinishedBefore(t) => {
            let n = purge::finished_before(tx, bodies, *t)?;
            if n > 0 {
                tracing::info!("purged the scripts and environments of {n} finished jobs");
            }
        }
        Op::Barrier => {}
    }
    Ok(None)
}
