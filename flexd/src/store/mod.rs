//! flexd's durable state in SQLite: every job from submission to its end (kept afterwards for
//! accounting) and every state change. One writer thread owns the writing connection
//! ([`writer`]); readers open their own.
//!
//! `synchronous = FULL` in WAL mode: a commit returns once the WAL is on disk, so an
//! acknowledged submission survives a power cut. Group commit ([`writer`]) keeps that from
//! costing one fsync per job.

pub mod acct;
pub(crate) mod gpu;
mod purge;
pub(crate) mod queueing;
pub mod schema;
pub(crate) mod usage;
pub(crate) mod writer;

mod rows;
#[cfg(test)]
pub(crate) use rows::load_job;
pub use rows::{job_details, launch_row, LaunchRow};
pub(crate) use rows::{job_texts, load_jobs, JobRow};

use flex_proto::{AllocView, JobSpec, JobState, LeafView};
use flex_sched::Allocation;
use gres_plugin::{HostId, HostModel, JobId};
pub(crate) use queueing::{Hold, Queueing, Update, Q};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A database that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database {path}: {source}")]
    Migrate {
        path: PathBuf,
        source: schema::MigrateError,
    },
    #[error(
        "database {path} {why}; refusing to start on it (move it away to start with a new \
         database, or restore it from a backup)"
    )]
    NotFlex { path: PathBuf, why: String },
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("database: array {array}: task {task} got id {got}, not the next one")]
    ArrayIds { array: u64, task: u32, got: u64 },
    #[error("database {path}: {source}")]
    InFile {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database: job {job}: column {column} holds bad JSON: {message}")]
    Json {
        job: u64,
        column: &'static str,
        message: String,
    },
}

impl StoreError {
    /// Name the database file in an SQL error ("database disk image is malformed" must say
    /// which file).
    pub(crate) fn in_file(self, path: impl Into<PathBuf>) -> StoreError {
        match self {
            StoreError::Sql(source) => StoreError::InFile {
                path: path.into(),
                source,
            },
            e => e,
        }
    }

    /// Whether the database could not be written at all (a full disk, an I/O error, a file
    /// it cannot open): the change itself is fine and may succeed later.
    pub(crate) fn is_storage(&self) -> bool {
        use rusqlite::ErrorCode::{CannotOpen, DiskFull, ReadOnly, SystemIoFailure};
        let source = match self {
            StoreError::Sql(e) | StoreError::InFile { source: e, .. } => e,
            _ => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(DiskFull | SystemIoFailure | CannotOpen | ReadOnly)
        )
    }

    /// [`StoreError::in_file`] with the file `conn` has open.
    pub(crate) fn in_db(self, conn: &Connection) -> StoreError {
        let path = conn.path().unwrap_or("(in memory)").to_string();
        self.in_file(path)
    }
}

/// Open (creating and migrating) the database for writing.
pub fn open(path: &Path) -> Result<Connection, StoreError> {
    let open_err = |source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    };
    let existed = match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => {
            return Err(StoreError::NotFlex {
                path: path.to_path_buf(),
                why: "is empty (0 bytes)".into(),
            })
        }
        Ok(_) => true,
        Err(_) => false,
    };
    let mut conn = Connection::open(path).map_err(open_err)?;
    if existed {
        let version: u32 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(open_err)?;
        let has_jobs: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'",
                [],
                |r| r.get(0),
            )
            .map_err(open_err)?;
        // A newer flexd's database is reported as such by the migration below.
        if version == 0 || (!has_jobs && version <= schema::VERSION) {
            return Err(StoreError::NotFlex {
                path: path.to_path_buf(),
                why: "is not a Flex database (no schema version or no jobs table)".into(),
            });
        }
    }
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))
        .map_err(open_err)?;
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;",
    )
    .map_err(open_err)?;
    let found = schema::migrate(&mut conn).map_err(|source| StoreError::Migrate {
        path: path.to_path_buf(),
        source,
    })?;
    if found != schema::VERSION {
        tracing::info!(
            "database {}: migrated schema {found} -> {}",
            path.display(),
            schema::VERSION
        );
    }
    Ok(conn)
}

/// A read-only connection (the launcher reads scripts with it).
pub fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    conn.execute_batch("PRAGMA busy_timeout = 10000;")?;
    Ok(conn)
}

/// A submission as it is written. Its Debug form leaves out the script and environment.
#[derive(Clone)]
pub struct NewJob {
    pub spec: JobSpec,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub account: String,
    pub priority: i64,
    pub submit_time: u64,
    /// Where it starts at `submit_time`, when it starts with its submission.
    pub start: Option<StoredAlloc>,
    /// Where the state counts its script and environment (`state::count::Slots`).
    pub held: [u32; 2],
}

impl std::fmt::Debug for NewJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewJob")
            .field("name", &self.spec.name)
            .field("user", &self.user)
            .field("uid", &self.uid)
            .field("request", &self.spec.request)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl NewJob {
    /// A pending one-leaf job running `true`, for tests and benchmarks.
    pub(crate) fn for_test(name: &str, uid: u32, user: &str, account: &str, at: u64) -> NewJob {
        NewJob {
            spec: JobSpec {
                name: name.into(),
                script: "true".into(),
                args: vec![],
                workdir: "/".into(),
                submit_dir: "/".into(),
                env: vec![].into(),
                stdout: None,
                stderr: None,
                request: gres_plugin::Request::leaves(1, 60),
                account: None,
                qos: None,
                nice: 0,
                options: Default::default(),
                queue: Default::default(),
                umask: None,
                signal: None,
            },
            uid,
            gid: uid,
            user: user.into(),
            account: account.into(),
            priority: 0,
            submit_time: at,
            start: None,
            held: [u32::MAX; 2],
        }
    }
}

/// One allocated unit as stored: its index and what identifies it on the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredUnit {
    pub leaf: u32,
    pub uuid: String,
    pub profile: String,
    pub gpu: u32,
    pub share: u32,
    /// SM slices and memory of the unit, for accounting (0 in allocations stored before
    /// flexd recorded them).
    #[serde(default)]
    pub sm_slices: u8,
    #[serde(default)]
    pub memory_bytes: u64,
}

/// An allocation as stored: the scheduler's placement (indexes), and the UUIDs and names
/// of what it holds, to check it against the host model after a restart and for accounting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAlloc {
    pub host: String,
    pub units: Vec<StoredUnit>,
    pub cores: Vec<u32>,
    pub placement: Allocation,
}

impl StoredAlloc {
    pub(crate) fn new(a: &Allocation, host: &HostModel) -> Self {
        StoredAlloc {
            host: host.hostname.clone(),
            units: a
                .units
                .iter()
                .map(|u| {
                    let l = host.leaf(u.leaf);
                    StoredUnit {
                        leaf: u.leaf.0,
                        uuid: l.uuid.clone(),
                        profile: l.profile.clone(),
                        gpu: l.gpu.0,
                        share: u.share,
                        sm_slices: l.sm_slices,
                        memory_bytes: l.memory_bytes,
                    }
                })
                .collect(),
            cores: a.cores.iter().map(|c| c.0).collect(),
            placement: a.clone(),
        }
    }

    pub(crate) fn host_id(&self) -> HostId {
        self.placement.host
    }

    /// The scheduler's allocation, after checking that every unit is still the same leaf on
    /// `host` (a changed topology must not hand out a leaf twice).
    pub(crate) fn to_alloc(&self, host: &HostModel) -> Result<Allocation, String> {
        if self.placement.units.len() != self.units.len() {
            return Err("the stored allocation is inconsistent".into());
        }
        for (p, u) in self.placement.units.iter().zip(&self.units) {
            match host.leaves.get(p.leaf.0 as usize) {
                Some(l) if l.uuid == u.uuid => {}
                Some(l) => {
                    return Err(format!(
                        "leaf {} is {} on this host model, not {}",
                        p.leaf, l.uuid, u.uuid
                    ))
                }
                None => return Err(format!("leaf {} ({}) does not exist", p.leaf, u.uuid)),
            }
        }
        Ok(self.placement.clone())
    }

    pub(crate) fn view(&self) -> AllocView {
        AllocView {
            host: self.host.clone(),
            leaves: self
                .units
                .iter()
                .map(|u| LeafView {
                    uuid: u.uuid.clone(),
                    profile: u.profile.clone(),
                    gpu: u.gpu,
                    share: u.share,
                })
                .collect(),
            cores: self.cores.clone(),
            mem_bytes: self.placement.mem_bytes,
        }
    }
}

fn json<T: serde::de::DeserializeOwned>(
    job: u64,
    column: &'static str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Json {
        job,
        column,
        message: e.to_string(),
    })
}

pub(crate) fn state_name(s: JobState) -> &'static str {
    s.name()
}

/// Texts many jobs share, stored once each: environments (`envs`) and scripts (`scripts`; every
/// task of an array, and every job submitted again with the same script). Remembers the rows it
/// stored lately by the hash of their text, so that most submissions find theirs without a
/// query. Entries may name rows of the current transaction: [`Bodies::forget`] them when it
/// does not commit.
#[derive(Debug, Default)]
pub struct Bodies {
    envs: Known,
    scripts: Known,
}

/// Rows of one table by the FNV-1a hash of their body.
#[derive(Debug, Default)]
struct Known(HashMap<u64, (i64, Box<str>)>);

/// Distinct texts remembered at most per table (then it starts again empty).
const BODIES_KNOWN: usize = 1024;

impl Bodies {
    /// After a transaction that did not commit: its new rows are gone.
    pub(crate) fn forget(&mut self) {
        self.envs.0.clear();
        self.scripts.0.clear();
    }

    /// The id of the `envs` row holding `text`, added when there is none.
    fn env(&mut self, tx: &Transaction, text: &str) -> Result<i64, StoreError> {
        self.envs.id(tx, text, ENVS_SQL)
    }

    /// The id of the `scripts` row holding `text`, added when there is none.
    fn script(&mut self, tx: &Transaction, text: &str) -> Result<i64, StoreError> {
        self.scripts.id(tx, text, SCRIPTS_SQL)
    }
}

/// The lookup and the insertion of one table of bodies.
const ENVS_SQL: [&str; 2] = [
    "SELECT id FROM envs WHERE hash = ?1 AND body = ?2",
    "INSERT INTO envs (hash, body) VALUES (?1, ?2)",
];
const SCRIPTS_SQL: [&str; 2] = [
    "SELECT id FROM scripts WHERE hash = ?1 AND body = ?2",
    "INSERT INTO scripts (hash, body) VALUES (?1, ?2)",
];

impl Known {
    fn id(&mut self, tx: &Transaction, text: &str, sql: [&str; 2]) -> Result<i64, StoreError> {
        let hash = fnv1a(text.as_bytes());
        if let Some((id, body)) = self.0.get(&hash) {
            if **body == *text {
                return Ok(*id);
            }
        }
        let found = tx
            .prepare_cached(sql[0])?
            .query_row(params![hash as i64, text], |r| r.get(0))
            .optional()?;
        let id = match found {
            Some(id) => id,
            None => {
                tx.prepare_cached(sql[1])?
                    .execute(params![hash as i64, text])?;
                tx.last_insert_rowid()
            }
        };
        if self.0.len() >= BODIES_KNOWN {
            self.0.clear();
        }
        self.0.insert(hash, (id, text.into()));
        Ok(id)
    }
}

/// 64-bit FNV-1a: stored in the database, so it must not change between builds.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Insert a submission; the id comes from the database inside the caller's transaction. An
/// array is one job per task, with consecutive ids from the returned one (the array's id).
pub fn insert_job(tx: &Transaction, j: &NewJob, bodies: &mut Bodies) -> Result<JobId, StoreError> {
    let r = &j.spec.request;
    let q = &j.spec.queue;
    let env_id = bodies.env(tx, j.spec.env.json())?;
    let script_id = bodies.script(tx, &j.spec.script)?;
    let tasks = q.array.as_ref().map(|a| a.indices());
    let spec_text = q
        .array
        .as_ref()
        .map(|a| serde_json::to_string(a).expect("arrays serialize"));
    let dependency = q
        .dependency
        .as_ref()
        .map(|d| serde_json::to_string(d).expect("dependencies serialize"));
    // An array's first row takes its spec and dependency once its tasks are copied from it: a
    // copy reads the row whole, a long spec's overflow pages included, for every task.
    let (spec_now, dependency_now) = match tasks {
        Some(_) => (None, None),
        None => (spec_text.clone(), dependency.clone()),
    };
    let mut st = tx.prepare_cached(
        "INSERT INTO jobs (name, uid, gid, user, account, script, script_id, args, env, env_id,
            workdir, submit_dir, stdout, stderr, request, leaves, leaf_type, gpus, mem_bytes,
            cores_per_leaf, time_limit, priority, state, submit_time, eligible_time,
            array_task, array_spec, dependency, hold, requeue, umask, warn_signal, qos, nice,
            options)
         VALUES (?1, ?2, ?3, ?4, ?5, '', ?6, ?7, '', ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
            ?18, ?19, ?20, 'PENDING', ?21, MAX(?21, COALESCE(?32, 0)), ?22, ?23, ?24, ?25, ?26,
            ?27, ?28, ?29, ?30, ?31)",
    )?;
    st.execute(params![
        j.spec.name,
        j.uid,
        j.gid,
        j.user,
        j.account,
        script_id,
        serde_json::to_string(&j.spec.args).expect("strings serialize"),
        env_id,
        j.spec.workdir.to_string_lossy(),
        j.spec.submit_dir.to_string_lossy(),
        j.spec.stdout,
        j.spec.stderr,
        serde_json::to_string(r).expect("requests serialize"),
        r.leaves,
        r.leaf_type,
        r.gpus,
        r.mem_bytes.map(|m| m as i64),
        r.cores_per_leaf,
        r.time_limit_s as i64,
        j.priority,
        j.submit_time as i64,
        tasks.as_ref().map(|t| t[0]),
        spec_now,
        dependency_now,
        Hold::submitted(q.hold).code(),
        q.requeue.unwrap_or(true),
        j.spec.umask.map(|m| m & 0o777),
        j.spec
            .signal
            .as_ref()
            .map(|w| serde_json::to_string(w).expect("signals serialize")),
        j.spec.qos,
        j.spec.nice,
        (!j.spec.options.is_plain())
            .then(|| serde_json::to_string(&j.spec.options).expect("options serialize")),
        q.begin.map(|t| t as i64),
    ])?;
    let id = JobId(tx.last_insert_rowid() as u64);
    event(tx, id, j.submit_time, None, JobState::Pending, None)?;
    if let Some(tasks) = &tasks {
        queueing::insert_tasks(tx, id, &tasks[1..], j.submit_time)?;
        tx.prepare_cached("UPDATE jobs SET array_spec = ?2, dependency = ?3 WHERE id = ?1")?
            .execute(params![id.0 as i64, spec_text, dependency])?;
    }
    if let Some(a) = &j.start {
        start_job(tx, id, j.submit_time, a)?;
    }
    Ok(id)
}

/// Record a job's start on its allocation.
pub fn start_job(
    tx: &Transaction,
    job: JobId,
    time: u64,
    alloc: &StoredAlloc,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE jobs SET state = 'RUNNING', start_time = ?2, host = ?3, allocation = ?4
         WHERE id = ?1",
    )?
    .execute(params![
        job.0 as i64,
        time as i64,
        alloc.host,
        serde_json::to_string(alloc).expect("allocations serialize"),
    ])?;
    let mut leaf = tx.prepare_cached(
        "INSERT OR REPLACE INTO job_leaves
            (job, rank, uuid, profile, gpu, share, sm_slices, memory_bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (rank, u) in alloc.units.iter().enumerate() {
        leaf.execute(params![
            job.0 as i64,
            rank as i64,
            u.uuid,
            u.profile,
            u.gpu,
            u.share,
            u.sm_slices,
            u.memory_bytes as i64,
        ])?;
    }
    event(
        tx,
        job,
        time,
        Some(JobState::Pending),
        JobState::Running,
        None,
    )
}

/// Record a state change.
pub(crate) fn event(
    tx: &Transaction,
    job: JobId,
    time: u64,
    from: Option<JobState>,
    to: JobState,
    note: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO job_events (job, time, from_state, to_state, note) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        job.0 as i64,
        time as i64,
        from.map(state_name),
        state_name(to),
        note
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests;
