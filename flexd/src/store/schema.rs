//! The database schema and its migrations: `PRAGMA user_version` is the schema version, and
//! each version has one function that brings the previous one up to it. Old databases stay
//! readable: a migration only adds.

use rusqlite::{Connection, Transaction};

/// The version this build writes.
pub const VERSION: u32 = 15;

/// Migration `i` brings a database at version `i` to `i + 1`.
const MIGRATIONS: [fn(&Transaction) -> rusqlite::Result<()>; VERSION as usize] = [
    v1,
    v2,
    v3,
    v4,
    v5,
    v6,
    v7,
    fairshare,
    slurm_scripts,
    max_rss,
    scripts,
    run_usage,
    purge_index,
    gpu_totals,
    array_once,
];

/// Why a database cannot be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("the database is at schema version {found}, newer than this flexd's {VERSION}")]
    TooNew { found: u32 },
    #[error("migrating to schema version {version}: {source}")]
    Step {
        version: u32,
        source: rusqlite::Error,
    },
}

/// Bring the database to [`VERSION`], one committed step per version; returns the version it
/// was at.
pub(crate) fn migrate(conn: &mut Connection) -> Result<u32, MigrateError> {
    migrate_to(conn, VERSION)
}

/// Bring the database to `target` (tests build old databases with this).
pub(crate) fn migrate_to(conn: &mut Connection, target: u32) -> Result<u32, MigrateError> {
    let step = |version: u32| move |source| MigrateError::Step { version, source };
    let found: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(step(0))?;
    if found > VERSION {
        return Err(MigrateError::TooNew { found });
    }
    for v in found..target {
        let tx = conn.transaction().map_err(step(v + 1))?;
        MIGRATIONS[v as usize](&tx).map_err(step(v + 1))?;
        tx.pragma_update(None, "user_version", v + 1)
            .map_err(step(v + 1))?;
        tx.commit().map_err(step(v + 1))?;
    }
    Ok(found)
}

/// Jobs and their state changes. Finished jobs stay: accounting reads them.
fn v1(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            uid INTEGER NOT NULL,
            gid INTEGER NOT NULL,
            user TEXT NOT NULL,
            account TEXT NOT NULL,
            -- what is needed to run the job; never logged
            script TEXT NOT NULL,
            args TEXT NOT NULL,            -- JSON array of strings
            env TEXT NOT NULL,             -- JSON array of [name, value]
            workdir TEXT NOT NULL,
            submit_dir TEXT NOT NULL,
            stdout TEXT,                   -- path patterns (%j %x %u) as submitted
            stderr TEXT,
            -- the resource request as JSON, and its main fields for accounting
            request TEXT NOT NULL,
            leaves INTEGER,
            leaf_type TEXT,
            gpus REAL,
            mem_bytes INTEGER,
            cores_per_leaf INTEGER NOT NULL,
            time_limit INTEGER NOT NULL,   -- seconds
            priority INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL,           -- PENDING RUNNING COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL
            -- seconds since the Unix epoch
            submit_time INTEGER NOT NULL,
            eligible_time INTEGER NOT NULL,
            start_time INTEGER,
            end_time INTEGER,
            exit_code INTEGER,
            signal INTEGER,
            reason TEXT,                   -- why it failed or was not run
            host TEXT,
            allocation TEXT,               -- JSON: host, units (leaf, uuid, profile, gpu, share), cores
            supervisor_pid INTEGER,
            master_port INTEGER
        );
        CREATE INDEX jobs_state ON jobs(state);
        CREATE TABLE job_events (
            id INTEGER PRIMARY KEY,
            job INTEGER NOT NULL REFERENCES jobs(id),
            time INTEGER NOT NULL,
            from_state TEXT,
            to_state TEXT NOT NULL,
            note TEXT
        );
        CREATE INDEX job_events_job ON job_events(job);",
    )
}

/// Who cancelled a job, and indexes for accounting's per-user and per-period reports.
fn v2(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE jobs ADD COLUMN cancelled_by INTEGER;
        CREATE INDEX jobs_user_submit ON jobs(user, submit_time);
        CREATE INDEX jobs_end ON jobs(end_time);",
    )
}

/// What each job held, one row per unit in rank order, with the SM slices and memory that
/// accounting's GPU-equivalent and memory hours need. Jobs started before this version get
/// rows from their allocation JSON: SM slices from the profile name (`3g.20gb` → 3, a whole
/// GPU → 7) and memory from its nominal size (`5gb` → 5·10⁹ bytes; unknown for whole GPUs).
fn v3(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE job_leaves (
            job INTEGER NOT NULL REFERENCES jobs(id),
            rank INTEGER NOT NULL,
            uuid TEXT NOT NULL,
            profile TEXT NOT NULL,
            gpu INTEGER NOT NULL,
            share INTEGER NOT NULL,        -- thousandths of the unit
            sm_slices INTEGER NOT NULL,    -- of the GPU's 7
            memory_bytes INTEGER,          -- the unit's memory; NULL when unknown
            PRIMARY KEY (job, rank)
        ) WITHOUT ROWID;
        CREATE INDEX jobs_eligible ON jobs(eligible_time);
        INSERT INTO job_leaves (job, rank, uuid, profile, gpu, share, sm_slices, memory_bytes)
        SELECT jobs.id, u.key,
            json_extract(u.value, '$.uuid'),
            json_extract(u.value, '$.profile'),
            json_extract(u.value, '$.gpu'),
            json_extract(u.value, '$.share'),
            CASE WHEN json_extract(u.value, '$.profile') = 'gpu' THEN 7
                ELSE CAST(substr(json_extract(u.value, '$.profile'), 1,
                    instr(json_extract(u.value, '$.profile'), 'g') - 1) AS INTEGER) END,
            CASE WHEN json_extract(u.value, '$.profile') = 'gpu' THEN NULL
                ELSE CAST(CAST(rtrim(substr(json_extract(u.value, '$.profile'),
                    instr(json_extract(u.value, '$.profile'), '.') + 1), 'gbme+')
                    AS REAL) * 1e9 AS INTEGER) END
        FROM jobs, json_each(jobs.allocation, '$.units') AS u
        WHERE jobs.allocation IS NOT NULL;",
    )
}

/// Environments stored once: the jobs submitted from one shell share a row (an environment is
/// a few KB, most of a job's row). `hash` is the FNV-1a hash of `body` (see `store::Bodies`).
/// Jobs with an `env_id` have `env = ''`; jobs stored before keep theirs inline.
fn v4(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE envs (
            id INTEGER PRIMARY KEY,
            hash INTEGER NOT NULL,
            body TEXT NOT NULL             -- JSON array of [name, value]; never logged
        );
        CREATE INDEX envs_hash ON envs(hash);
        ALTER TABLE jobs ADD COLUMN env_id INTEGER REFERENCES envs(id);",
    )
}

/// Job arrays, dependencies, holds and requeues. A task of an array is a job of its own whose
/// `array_job` is the array's job id (the id of its first task) and `array_task` its index;
/// `array_spec` (JSON, on every task) is the `--array` it came from. `hold` is 0, 1 (the user's:
/// JobHeldUser) or 2 (root's: JobHeldAdmin). `requeue_requested` (1, or 2 to requeue held) is
/// set while a running job is being ended to be requeued. Every run that a requeue ended is
/// kept in `job_runs` (the job's row describes its latest run).
fn v5(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE jobs ADD COLUMN array_job INTEGER;
        ALTER TABLE jobs ADD COLUMN array_task INTEGER;
        ALTER TABLE jobs ADD COLUMN array_spec TEXT;
        ALTER TABLE jobs ADD COLUMN dependency TEXT;   -- JSON, as submitted
        ALTER TABLE jobs ADD COLUMN hold INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN requeue INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN requeue_requested INTEGER;
        ALTER TABLE jobs ADD COLUMN nice INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX jobs_array ON jobs(array_job) WHERE array_job IS NOT NULL;
        CREATE TABLE job_runs (
            job INTEGER NOT NULL REFERENCES jobs(id),
            run INTEGER NOT NULL,          -- 0 for the first run
            state TEXT NOT NULL,
            start_time INTEGER,
            end_time INTEGER,
            exit_code INTEGER,
            signal INTEGER,
            reason TEXT,
            host TEXT,
            allocation TEXT,
            PRIMARY KEY (job, run)
        ) WITHOUT ROWID;",
    )
}

/// The submitter's umask, which the job runs with (NULL for jobs submitted before, or by
/// clients that do not send one: they run with 022).
fn v6(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE jobs ADD COLUMN umask INTEGER;")
}

/// sbatch's `--signal` (JSON `{signal, before_s, batch_only}`; NULL: none asked).
fn v7(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE jobs ADD COLUMN warn_signal TEXT;")
}

/// Fair share (one step, named for what it adds so that it can take any number when branches
/// meet): each job's QOS (NULL for jobs stored before: the default QOS), and the decayed usage
/// of each user and account in compute slice-seconds as of `at`, written with the job ends that
/// charge it (see `store::usage`).
fn fairshare(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE jobs ADD COLUMN qos TEXT;
        CREATE TABLE usage (
            kind TEXT NOT NULL,            -- 'user' or 'account'
            name TEXT NOT NULL,
            slice_seconds REAL NOT NULL,   -- decayed to `at`
            at INTEGER NOT NULL,           -- seconds since the epoch
            PRIMARY KEY (kind, name)
        ) WITHOUT ROWID;",
    )
}

/// What Slurm scripts use (one step, named for what it adds, as `fairshare`): `options`, a
/// JSON `flex_proto::JobOptions` (`--comment`, `--exclusive`, `--open-mode`, `--constraint`,
/// `--mail-type`/`--mail-user`; NULL when none was given, and for jobs stored before).
/// `--begin` needs no column: it is the job's `eligible_time`, as Slurm's EligibleTime.
fn slurm_scripts(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE jobs ADD COLUMN options TEXT;")
}

/// `max_rss`: the latest run's peak resident memory in bytes (sacct's MaxRSS; NULL when its
/// supervisor did not say, and for jobs stored before).
fn max_rss(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE jobs ADD COLUMN max_rss INTEGER;")
}

/// Scripts stored once, as environments (v4): the tasks of an array, and jobs submitted again
/// with the same script, share a row. Jobs with a `script_id` have `script = ''`; jobs stored
/// before keep theirs inline.
fn scripts(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE scripts (
            id INTEGER PRIMARY KEY,
            hash INTEGER NOT NULL,
            body TEXT NOT NULL             -- never logged
        );
        CREATE INDEX scripts_hash ON scripts(hash);
        ALTER TABLE jobs ADD COLUMN script_id INTEGER REFERENCES scripts(id);",
    )
}

/// What a job's latest run used beside its peak memory: `cpu_usec`, its CPU time in
/// microseconds (sacct's TotalCPU), and `gpu_usage`, a JSON `flex_proto::GpuUsage` of its
/// leaves' sampled GPU telemetry. NULL when not measured, and for jobs stored before.
fn run_usage(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE jobs ADD COLUMN cpu_usec INTEGER;
        ALTER TABLE jobs ADD COLUMN gpu_usage TEXT;",
    )
}

/// Finished jobs' scripts and environments are deleted `keep_finished` after their end (the
/// job's row stays for accounting, with `script_id` and `env_id` NULL, `script` and `env`
/// empty); a shared text goes with the last job that holds it, which these find.
fn purge_index(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE INDEX jobs_script ON jobs(script_id) WHERE script_id IS NOT NULL;
        CREATE INDEX jobs_env ON jobs(env_id) WHERE env_id IS NOT NULL;",
    )
}

/// `gpu_totals`: a running job's GPU telemetry totals so far (a JSON
/// `gres_plugin::telemetry::summary::GpuTotals`), written after every sample and cleared when
/// its summary is written, so that a restarted flexd goes on from them. NULL for jobs stored
/// before.
fn gpu_totals(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE jobs ADD COLUMN gpu_totals TEXT;")
}

/// An array's spec and dependency are kept on its first task's row only; its other tasks read
/// them from there (NULL in their own rows). Copies that earlier versions wrote into every
/// task are dropped where they equal the first task's.
fn array_once(tx: &Transaction) -> rusqlite::Result<()> {
    tx.execute_batch(
        "UPDATE jobs SET array_spec = NULL
            WHERE array_job IS NOT NULL AND array_job != id AND array_spec IS NOT NULL
              AND array_spec IS (SELECT f.array_spec FROM jobs f WHERE f.id = jobs.array_job);
        UPDATE jobs SET dependency = NULL
            WHERE array_job IS NOT NULL AND array_job != id AND dependency IS NOT NULL
              AND dependency IS (SELECT f.dependency FROM jobs f WHERE f.id = jobs.array_job);",
    )
}
