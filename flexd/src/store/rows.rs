//! Jobs as read back from the database: [`JobRow`], what flexd keeps of each in memory, and
//! [`LaunchRow`], what a supervisor needs to run one.

use super::{json, queueing, StoreError, StoredAlloc, Q};
use flex_proto::JobState;
use gres_plugin::{JobId, Request as ResourceRequest};
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A job as flexd keeps it in memory (everything but its script and environment).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JobRow {
    pub id: JobId,
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub user: Arc<str>,
    pub account: Arc<str>,
    pub request: ResourceRequest,
    pub priority: i64,
    pub state: JobState,
    pub submit_time: u64,
    pub start_time: Option<u64>,
    pub end_time: Option<u64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub reason: Option<String>,
    /// Boxed: most jobs in memory are pending and have none (it is 128 bytes).
    pub alloc: Option<Box<StoredAlloc>>,
    pub supervisor_pid: Option<u32>,
    pub master_port: Option<u16>,
    /// Its QOS; None for flexd's default_qos.
    pub qos: Option<Arc<str>>,
    /// Arrays, dependencies, holds and requeues (allocated only when not the defaults).
    pub q: Q,
}

/// What a supervisor needs from the submission to run the job.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRow {
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub script: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: PathBuf,
    pub submit_dir: PathBuf,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// The array it is a task of, its index, and the `--array` it came from.
    /// The task, and its array's spec: None when it is the array the caller said it knows.
    pub array: Option<(flex_proto::ArrayTask, Option<flex_proto::ArraySpec>)>,
    pub umask: Option<u32>,
    /// `--signal`, if asked.
    pub signal: Option<flex_proto::WarnSignal>,
    /// `--open-mode`, `--mail-type` and the other options of how it runs.
    pub options: flex_proto::JobOptions,
    /// How many times it was requeued (Slurm's `SLURM_RESTART_COUNT`).
    pub restarts: u32,
}

/// An array's spec and dependency are stored on its first task's row only: its tasks take
/// its throttle and dependency from there through [`queueing::Arrays`], once for all.
const ROW_COLUMNS: &str = "id, name, uid, gid, user, account, request, priority, state,
    submit_time, start_time, end_time, exit_code, signal, reason, allocation, supervisor_pid,
    master_port, array_job, array_task,
    json_extract(array_spec, '$.throttle'), dependency, hold,
    requeue, restarts, requeue_requested, nice, qos,
    CASE WHEN eligible_time > submit_time THEN eligible_time END,
    json_extract(options, '$.comment'), json_extract(options, '$.mail')";

fn job_row(r: &rusqlite::Row, arrays: &mut queueing::Arrays) -> Result<JobRow, StoreError> {
    let id: i64 = r.get(0)?;
    let id = id as u64;
    let state: String = r.get(8)?;
    let request: String = r.get(6)?;
    let alloc: Option<String> = r.get(15)?;
    Ok(JobRow {
        id: JobId(id),
        name: r.get(1)?,
        uid: r.get(2)?,
        gid: r.get(3)?,
        user: r.get(4)?,
        account: r.get(5)?,
        request: json(id, "request", &request)?,
        priority: r.get(7)?,
        state: JobState::parse(&state).ok_or_else(|| StoreError::Json {
            job: id,
            column: "state",
            message: format!("unknown state {state:?}"),
        })?,
        submit_time: r.get::<_, i64>(9)? as u64,
        start_time: r.get::<_, Option<i64>>(10)?.map(|t| t as u64),
        end_time: r.get::<_, Option<i64>>(11)?.map(|t| t as u64),
        exit_code: r.get(12)?,
        signal: r.get(13)?,
        reason: r.get(14)?,
        alloc: alloc
            .map(|a| json(id, "allocation", &a).map(Box::new))
            .transpose()?,
        supervisor_pid: r.get(16)?,
        master_port: r.get(17)?,
        qos: r.get(27)?,
        q: Q::new(queueing::from_row(id, r, 18, arrays)?),
    })
}

/// Every pending or running job, and the jobs that ended at or after `finished_since`, by id.
pub(crate) fn load_jobs(conn: &Connection, finished_since: u64) -> Result<Vec<JobRow>, StoreError> {
    let mut st = conn.prepare(&format!(
        "SELECT {ROW_COLUMNS} FROM jobs WHERE state IN ('PENDING', 'RUNNING')
         UNION ALL
         SELECT {ROW_COLUMNS} FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING')
            AND end_time >= ?1
         ORDER BY id"
    ))?;
    let mut rows = st.query([finished_since as i64])?;
    let mut out = Vec::new();
    let mut arrays = queueing::Arrays::new(conn);
    while let Some(r) = rows.next()? {
        out.push(job_row(r, &mut arrays)?);
    }
    Ok(out)
}

/// The script and the environment of every job [`load_jobs`] returns, each made into what `key`
/// makes of its text (the byte quota's `Text`). A text stored once (`scripts`, `envs`) is read
/// once however many jobs share it; jobs of older versions have theirs inline.
pub(crate) fn job_texts<T: Copy>(
    conn: &Connection,
    finished_since: u64,
    key: impl Fn(&str) -> T,
) -> Result<HashMap<JobId, [T; 2]>, StoreError> {
    const COLUMNS: &str = "id, script_id, CASE WHEN script_id IS NULL THEN script END,
        env_id, CASE WHEN env_id IS NULL THEN env END";
    let mut st = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM jobs WHERE state IN ('PENDING', 'RUNNING')
         UNION ALL
         SELECT {COLUMNS} FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING') AND end_time >= ?1"
    ))?;
    let mut shared = [
        (HashMap::new(), "SELECT body FROM scripts WHERE id = ?1"),
        (HashMap::new(), "SELECT body FROM envs WHERE id = ?1"),
    ];
    let mut rows = st.query([finished_since as i64])?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next()? {
        let id = JobId(r.get::<_, i64>(0)? as u64);
        let mut texts = [None; 2];
        for (k, (known, sql)) in shared.iter_mut().enumerate() {
            let t = match r.get::<_, Option<i64>>(1 + 2 * k)? {
                Some(body) => match known.get(&body) {
                    Some(&t) => t,
                    None => {
                        let text: String =
                            conn.prepare_cached(sql)?.query_row([body], |r| r.get(0))?;
                        let t = key(&text);
                        known.insert(body, t);
                        t
                    }
                },
                None => key(&r.get::<_, Option<String>>(2 + 2 * k)?.unwrap_or_default()),
            };
            texts[k] = Some(t);
        }
        out.insert(id, texts.map(|t| t.expect("both set above")));
    }
    Ok(out)
}

#[cfg(test)]
/// One job by id, whatever its state.
pub(crate) fn load_job(conn: &Connection, job: JobId) -> Result<Option<JobRow>, StoreError> {
    let mut st = conn.prepare_cached(&format!("SELECT {ROW_COLUMNS} FROM jobs WHERE id = ?1"))?;
    let mut rows = st.query([job.0 as i64])?;
    let mut arrays = queueing::Arrays::new(conn);
    rows.next()?.map(|r| job_row(r, &mut arrays)).transpose()
}

/// What the supervisor of `job` needs; the spec of array `known` is not read again (a long
/// list of indices is read and parsed once, not for each of its tasks).
pub fn launch_row(
    conn: &Connection,
    job: JobId,
    known: Option<JobId>,
) -> Result<Option<LaunchRow>, StoreError> {
    let mut st = conn.prepare_cached(
        "SELECT j.name, j.user, j.uid, j.gid, COALESCE(s.body, j.script), j.args,
            COALESCE(e.body, j.env), j.workdir, j.submit_dir, j.stdout, j.stderr, j.array_job,
            j.array_task,
            CASE WHEN j.array_job IS ?2 THEN NULL ELSE
                COALESCE(j.array_spec, (SELECT f.array_spec FROM jobs f WHERE f.id = j.array_job))
            END,
            j.umask, j.warn_signal, j.options, j.restarts
         FROM jobs j LEFT JOIN envs e ON e.id = j.env_id LEFT JOIN scripts s ON s.id = j.script_id
         WHERE j.id = ?1",
    )?;
    let mut rows = st.query(rusqlite::params![job.0 as i64, known.map(|k| k.0 as i64)])?;
    rows.next()?.map(|r| launch_from_row(job.0, r)).transpose()
}

/// What squeue's `%g %Z %o %f` fields show of a job's submission (None: no such job).
pub fn job_details(
    conn: &Connection,
    job: JobId,
) -> Result<Option<flex_proto::JobDetails>, StoreError> {
    let mut st = conn
        .prepare_cached("SELECT gid, workdir, options, stdout, stderr FROM jobs WHERE id = ?1")?;
    let mut rows = st.query([job.0 as i64])?;
    let Some(r) = rows.next()? else {
        return Ok(None);
    };
    let workdir: String = r.get(1)?;
    let options: flex_proto::JobOptions = r
        .get::<_, Option<String>>(2)?
        .map(|o| json(job.0, "options", &o))
        .transpose()?
        .unwrap_or_default();
    Ok(Some(flex_proto::JobDetails {
        gid: r.get(0)?,
        workdir: workdir.into(),
        command: options.command,
        constraint: options.constraint,
        stdout: r.get(3)?,
        stderr: r.get(4)?,
        ntasks: options.ntasks,
        cpus_per_task: options.cpus_per_task,
    }))
}

/// A [`LaunchRow`] from the columns [`launch_row`] selects.
fn launch_from_row(id: u64, r: &rusqlite::Row) -> Result<LaunchRow, StoreError> {
    let name: String = r.get(0)?;
    let user: String = r.get(1)?;
    let uid: u32 = r.get(2)?;
    let gid: u32 = r.get(3)?;
    let script: String = r.get(4)?;
    let args: String = r.get(5)?;
    let env: String = r.get(6)?;
    let workdir: String = r.get(7)?;
    let submit_dir: String = r.get(8)?;
    let stdout: Option<String> = r.get(9)?;
    let stderr: Option<String> = r.get(10)?;
    let array_job: Option<i64> = r.get(11)?;
    let array_task: Option<u32> = r.get(12)?;
    let array_spec: Option<String> = r.get(13)?;
    let umask: Option<u32> = r.get(14)?;
    let warn_signal: Option<String> = r.get(15)?;
    let options: Option<String> = r.get(16)?;
    let restarts: u32 = r.get(17)?;
    let array = match (array_job, array_task) {
        (Some(job), Some(index)) => Some((
            flex_proto::ArrayTask {
                job: JobId(job as u64),
                index,
            },
            array_spec
                .map(|spec| json(id, "array_spec", &spec))
                .transpose()?,
        )),
        _ => None,
    };
    Ok(LaunchRow {
        name,
        user,
        uid,
        gid,
        script,
        args: json(id, "args", &args)?,
        env: json(id, "env", &env)?,
        workdir: workdir.into(),
        submit_dir: submit_dir.into(),
        stdout,
        stderr,
        array,
        umask,
        signal: warn_signal
            .map(|w| json(id, "warn_signal", &w))
            .transpose()?,
        options: options
            .map(|o| json(id, "options", &o))
            .transpose()?
            .unwrap_or_default(),
        restarts,
    })
}
