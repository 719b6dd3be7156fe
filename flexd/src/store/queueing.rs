//! What the queue keeps about a job besides its request (schema v5): its place in an array,
//! its dependency, its hold, its requeues. Arrays are written in the submission's
//! transaction, a task per row with consecutive ids; a requeue keeps the run it ended in
//! `job_runs`.

use super::{event, json, StoreError};
use flex_proto::{ArrayTask, Dependency, JobState};
use gres_plugin::JobId;
use rusqlite::{params, OptionalExtension, Transaction};
use std::sync::Arc;

/// Who holds a pending job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Hold {
    #[default]
    None,
    /// JobHeldUser: the owner (or root) may release it.
    User,
    /// JobHeldAdmin: only root may release it.
    Admin,
}

impl Hold {
    pub(crate) fn submitted(held: bool) -> Hold {
        if held {
            Hold::User
        } else {
            Hold::None
        }
    }

    pub(crate) fn code(self) -> i64 {
        match self {
            Hold::None => 0,
            Hold::User => 1,
            Hold::Admin => 2,
        }
    }

    fn from_code(c: i64) -> Hold {
        match c {
            0 => Hold::None,
            1 => Hold::User,
            _ => Hold::Admin,
        }
    }

    /// The pending reason it gives, Slurm's names.
    pub(crate) fn reason(self) -> Option<&'static str> {
        match self {
            Hold::None => None,
            Hold::User => Some("JobHeldUser"),
            Hold::Admin => Some("JobHeldAdmin"),
        }
    }
}

/// A job's queueing state as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Queueing {
    pub array: Option<ArrayTask>,
    /// The array's `%N`.
    pub throttle: Option<u32>,
    /// Shared by the tasks of an array (and read once for them from the database).
    pub dependency: Option<Arc<Dependency>>,
    pub hold: Hold,
    /// May be requeued (`--requeue`, the default).
    pub requeue: bool,
    /// Times it was requeued.
    pub restarts: u32,
    /// Being ended to be requeued (held afterwards when true).
    pub requeue_requested: Option<bool>,
    pub nice: i64,
    /// `--begin`: not before this time (its `eligible_time`, when later than its submission).
    pub begin: Option<u64>,
    /// `--comment`, kept here because most jobs have none.
    pub comment: Option<Box<str>>,
    /// `--mail-type`/`--mail-user`, when it asked for mail.
    pub mail: Option<Box<flex_proto::Mail>>,
    /// The TIME_LIMIT_50/80/90 mails sent for its current run (`MailEvents` bits; not
    /// stored: a restarted flexd may send one again).
    pub mails_sent: u8,
}

/// What a job has unless it was submitted or changed otherwise.
static DEFAULTS: Queueing = Queueing {
    array: None,
    throttle: None,
    dependency: None,
    hold: Hold::None,
    requeue: true,
    restarts: 0,
    requeue_requested: None,
    nice: 0,
    begin: None,
    comment: None,
    mail: None,
    mails_sent: 0,
};

impl Default for Queueing {
    fn default() -> Self {
        DEFAULTS.clone()
    }
}

/// A job's [`Queueing`], allocated only once it differs from the defaults: most jobs are no
/// array, have no dependency and are never held or requeued, and a long queue then costs no
/// allocation per job for it. Reads see the defaults; the first write makes the job its own.
#[derive(Clone, Debug, Default)]
pub(crate) struct Q(Option<Box<Queueing>>);

impl Q {
    pub(crate) fn new(q: Queueing) -> Q {
        Q((q != DEFAULTS).then(|| Box::new(q)))
    }
}

impl std::ops::Deref for Q {
    type Target = Queueing;
    fn deref(&self) -> &Queueing {
        self.0.as_deref().unwrap_or(&DEFAULTS)
    }
}

impl std::ops::DerefMut for Q {
    fn deref_mut(&mut self) -> &mut Queueing {
        self.0.get_or_insert_with(|| Box::new(DEFAULTS.clone()))
    }
}

impl PartialEq for Q {
    fn eq(&self, other: &Q) -> bool {
        **self == **other
    }
}

/// What an array's tasks share, as rows are read in id order: its throttle and dependency are
/// stored on its first task's row only (schema 15 dropped the copies earlier versions wrote
/// into each task), read once for all its tasks, which come one after another; they share
/// one dependency in memory.
pub(super) struct Arrays<'c> {
    conn: &'c rusqlite::Connection,
    /// The array last read: its first task's id, throttle and dependency.
    last: Option<(u64, Option<u32>, Option<Arc<Dependency>>)>,
}

impl<'c> Arrays<'c> {
    pub(super) fn new(conn: &'c rusqlite::Connection) -> Self {
        Arrays { conn, last: None }
    }

    /// The throttle and dependency of job `id` (a task of the array whose first task is
    /// `array`, when it is one), whose own row holds `own`.
    fn of(
        &mut self,
        id: u64,
        array: Option<u64>,
        own: (Option<u32>, Option<String>),
    ) -> Result<(Option<u32>, Option<Arc<Dependency>>), StoreError> {
        let parse = |text: Option<String>| {
            text.map(|t| json::<Dependency>(id, "dependency", &t).map(Arc::new))
                .transpose()
        };
        let first = match array {
            None => return Ok((own.0, parse(own.1)?)),
            Some(first) => first,
        };
        if let Some((k, throttle, d)) = &self.last {
            if *k == first {
                return Ok((*throttle, d.clone()));
            }
        }
        let (throttle, text) = if first == id {
            own
        } else {
            // A task after the first, whose first task may be a finished job not loaded.
            self.conn
                .prepare_cached(
                    "SELECT json_extract(array_spec, '$.throttle'), dependency FROM jobs
                     WHERE id = ?1",
                )?
                .query_row([first as i64], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?
                .unwrap_or((None, None))
        };
        let d = parse(text)?;
        self.last = Some((first, throttle, d.clone()));
        Ok((throttle, d))
    }
}

/// The columns `array_job` … `nice`, then (after `qos`) the begin time, the comment and the
/// mail, of `store::rows::ROW_COLUMNS`, from `at`.
pub(super) fn from_row(
    id: u64,
    r: &rusqlite::Row,
    at: usize,
    arrays: &mut Arrays,
) -> Result<Queueing, StoreError> {
    let array_job: Option<i64> = r.get(at)?;
    let array_task: Option<u32> = r.get(at + 1)?;
    let own = (r.get(at + 2)?, r.get(at + 3)?);
    let (throttle, dependency) = arrays.of(id, array_job.map(|a| a as u64), own)?;
    let requeue_requested: Option<i64> = r.get(at + 7)?;
    Ok(Queueing {
        array: array_job.zip(array_task).map(|(j, index)| ArrayTask {
            job: JobId(j as u64),
            index,
        }),
        throttle,
        dependency,
        hold: Hold::from_code(r.get(at + 4)?),
        requeue: r.get(at + 5)?,
        restarts: r.get(at + 6)?,
        requeue_requested: requeue_requested.map(|c| c == 2),
        nice: r.get(at + 8)?,
        begin: r.get::<_, Option<i64>>(at + 10)?.map(|t| t as u64),
        comment: r
            .get::<_, Option<String>>(at + 11)?
            .map(String::into_boxed_str),
        mail: r
            .get::<_, Option<String>>(at + 12)?
            .map(|m| json::<flex_proto::Mail>(id, "options", &m))
            .transpose()?
            .filter(|m| m.events.0 != 0)
            .map(Box::new),
        mails_sent: 0,
    })
}

/// The tasks of array `first` after its first one (already inserted as `first`), copied from
/// it with their own index: ids `first + 1 …`, in the submission's transaction. The array's
/// spec and dependency stay on the first row alone (readers take them from it, see
/// `store::rows`): copied into each task, a long list of indices or of dependencies made one
/// submission gigabytes on disk.
pub(super) fn insert_tasks(
    tx: &Transaction,
    first: JobId,
    rest: &[u32],
    time: u64,
) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE jobs SET array_job = ?1 WHERE id = ?1")?
        .execute([first.0 as i64])?;
    let mut copy = tx.prepare_cached(
        "INSERT INTO jobs (name, uid, gid, user, account, script, script_id, args, env, env_id,
            workdir, submit_dir, stdout, stderr, request, leaves, leaf_type, gpus, mem_bytes,
            cores_per_leaf, time_limit, priority, state, submit_time, eligible_time,
            array_job, array_task, array_spec, dependency, hold, requeue, umask, warn_signal,
            qos, nice, options)
         SELECT name, uid, gid, user, account, script, script_id, args, env, env_id,
            workdir, submit_dir, stdout, stderr, request, leaves, leaf_type, gpus, mem_bytes,
            cores_per_leaf, time_limit, priority, state, submit_time, eligible_time,
            id, ?2, NULL, NULL, hold, requeue, umask, warn_signal, qos, nice,
            options
         FROM jobs WHERE id = ?1",
    )?;
    for (k, &index) in rest.iter().enumerate() {
        copy.execute(params![first.0 as i64, index])?;
        let id = tx.last_insert_rowid() as u64;
        if id != first.0 + 1 + k as u64 {
            // Ids are consecutive with one writer; the state relies on it.
            return Err(StoreError::ArrayIds {
                array: first.0,
                task: index,
                got: id,
            });
        }
        event(tx, JobId(id), time, None, JobState::Pending, None)?;
    }
    Ok(())
}

pub(super) fn set_hold(tx: &Transaction, job: JobId, hold: Hold) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE jobs SET hold = ?2 WHERE id = ?1")?
        .execute(params![job.0 as i64, hold.code()])?;
    Ok(())
}

pub(super) fn set_requeue_requested(
    tx: &Transaction,
    job: JobId,
    hold: bool,
) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE jobs SET requeue_requested = ?2 WHERE id = ?1")?
        .execute(params![job.0 as i64, if hold { 2 } else { 1 }])?;
    Ok(())
}

/// `flexcontrol update`: the fields it may change.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Update {
    pub job: JobId,
    pub name: Option<String>,
    /// The request as changed (TimeLimit), stored whole.
    pub request: Option<gres_plugin::Request>,
    pub priority: Option<i64>,
    pub nice: Option<i64>,
}

pub(super) fn update(tx: &Transaction, u: &Update) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE jobs SET name = COALESCE(?2, name), request = COALESCE(?3, request),
            time_limit = COALESCE(?4, time_limit), priority = COALESCE(?5, priority),
            nice = COALESCE(?6, nice)
         WHERE id = ?1",
    )?
    .execute(params![
        u.job.0 as i64,
        u.name,
        u.request
            .as_ref()
            .map(|r| serde_json::to_string(r).expect("requests serialize")),
        u.request.as_ref().map(|r| r.time_limit_s as i64),
        u.priority,
        u.nice,
    ])?;
    Ok(())
}

/// Put a job back in the queue: its last run (if it ran) goes to `job_runs`, its row becomes
/// pending again with one more restart.
pub(super) fn requeue(
    tx: &Transaction,
    job: JobId,
    time: u64,
    hold: Hold,
    from: JobState,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO job_runs (job, run, state, start_time, end_time, exit_code,
            signal, reason, host, allocation)
         SELECT id, restarts, state, start_time, end_time, exit_code, signal, reason, host,
            allocation
         FROM jobs WHERE id = ?1 AND start_time IS NOT NULL",
    )?
    .execute([job.0 as i64])?;
    tx.prepare_cached("DELETE FROM job_leaves WHERE job = ?1")?
        .execute([job.0 as i64])?;
    tx.prepare_cached(
        "UPDATE jobs SET state = 'PENDING', start_time = NULL, end_time = NULL,
            exit_code = NULL, signal = NULL, reason = NULL, host = NULL, allocation = NULL,
            supervisor_pid = NULL, master_port = NULL, cancelled_by = NULL,
            requeue_requested = NULL, restarts = restarts + 1, hold = ?3, eligible_time = ?2
         WHERE id = ?1",
    )?
    .execute(params![job.0 as i64, time as i64, hold.code()])?;
    event(
        tx,
        job,
        time,
        Some(from),
        JobState::Pending,
        Some("requeued"),
    )
}
