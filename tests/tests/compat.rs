//! Compatibility with what earlier versions left behind: databases written by the flexd of
//! each schema version, frames of protocol v2, and a supervisor's run and status files, all
//! kept in `tests/fixtures/` (its README says where each came from). Today's code must read
//! every one of them; a migration or decoder that changes their meaning fails here.
//!
//! The fixtures are never regenerated with today's code: that would prove nothing.

mod compat {
    pub mod proto_v2;
}

use compat::proto_v2;
use flex_tests::Daemon;
use gres_plugin::JobId;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn user_version(db: &Path) -> u32 {
    let conn = flexd::store::open_reader(db).expect("open the database read-only");
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("user_version")
}

/// `flexacct -P` over all time: one `JobID|JobName|State|ExitCode|NLeaves|Profiles` line a job.
fn acct(d: &Daemon) -> Vec<String> {
    let out = d
        .cmd("flexacct")
        .args(["-P", "-n", "-S", "0", "-E", "now"])
        .args(["-o", "JobID,JobName,State,ExitCode,NLeaves,Profiles"])
        .output()
        .expect("run flexacct");
    assert!(
        out.status.success(),
        "flexacct failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every fixture database holds the same five jobs (tests/fixtures/README.md): 1 completed
/// with an environment of its own, 2 failed with exit code 3, 3 cancelled, 4 running on all
/// 14 leaves when flexd stopped (its supervisor was then ended), 5 pending behind it.
fn old_database_runs_in_todays_flexd(version: u32) {
    let fixture = fixtures().join(format!("db/v{version}.db"));
    // On a copy: opening a WAL database, even read-only, leaves -shm and -wal files beside it.
    let copy = tempfile::tempdir().expect("temporary directory");
    std::fs::copy(&fixture, copy.path().join("flex.db")).expect("copy the fixture");
    assert_eq!(
        user_version(&copy.path().join("flex.db")),
        version,
        "{} is not a schema v{version} database",
        fixture.display()
    );
    let mut d = Daemon::start_on_db("a100-40gb-x2.toml", &fixture);
    let log = d.log();
    assert!(
        log.contains(&format!(
            "migrated schema {version} -> {}",
            flexd::store::schema::VERSION
        )) || version == flexd::store::schema::VERSION,
        "no migration from v{version} in the log:\n{log}"
    );

    // The pending job is run by today's flexd from what the old one stored: its script,
    // environment, working directory and output paths.
    let five = d.wait_finished(JobId(5));
    assert_eq!(
        (five.name.as_str(), five.state.name(), five.exit_code),
        ("fixture-waiting", "COMPLETED", Some(0)),
        "job 5; log:\n{}",
        d.log()
    );

    // Stored before cores and host memory were resources (up to v11): its request reads with
    // none (no memory reserved, cores per leaf as it asked), on the leaf it asked for. From
    // v12 on its flexd gave it the default memory per core, which reads back as stored.
    let held = five.alloc.as_ref().expect("job 5 ran");
    if version <= 11 {
        assert_eq!((five.request.cpus, five.request.host_mem), (0, None));
        assert_eq!((held.leaves.len(), held.mem_bytes), (1, 0), "{held:?}");
    } else {
        assert_eq!(
            (five.request.cpus, five.request.host_mem),
            (0, Some(gres_plugin::HostMem::PerCpu(8522825728)))
        );
        assert!(held.leaves.len() == 1 && held.mem_bytes > 0, "{held:?}");
    }

    // New ids go on after the old ones.
    let script = d.scratch("new").join("new.sh");
    std::fs::write(&script, "#!/bin/sh\ntrue\n").expect("write a script");
    let out = d
        .cmd("flexsub")
        .args(["-J", "after-upgrade", "-o", "/dev/null", "--leaves", "1"])
        .arg(&script)
        .current_dir(d.scratch("new"))
        .output()
        .expect("run flexsub");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Submitted batch job 6",
        "flexsub: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.wait_finished(JobId(6));

    let rows = acct(&d);
    let cancelled = rows.get(2).cloned().unwrap_or_default();
    assert!(
        cancelled.starts_with("3|fixture-cancel|CANCELLED|"),
        "{cancelled}"
    );
    let others: Vec<&String> = rows
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, r)| r)
        .collect();
    assert_eq!(
        others,
        [
            "1|fixture-done|COMPLETED|0:0|1|1g.10gb",
            "2|fixture-fail|FAILED|3:0|1|1g.10gb",
            "4|fixture-blocker|NODE_FAIL|0:0|14|1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.10gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.10gb",
            "5|fixture-waiting|COMPLETED|0:0|1|1g.10gb",
            "6|after-upgrade|COMPLETED|0:0|1|1g.10gb",
        ],
        "flexacct over the v{version} database"
    );

    // Jobs before schema 12 have no CPU time, and none of the fixtures' jobs GPU use (their
    // topology names no telemetry); a job today's flexd ran has its CPU time from its
    // supervisor.
    let out = d
        .cmd("flexacct")
        .args(["--json", "-S", "0", "-E", "now", "-j", "1,6"])
        .output()
        .expect("run flexacct --json");
    let jobs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    // (The CPU time the old flexd measured, as it stored it.)
    let cpu = jobs[0].get("cpu_usec").and_then(|c| c.as_u64());
    assert_eq!(cpu.is_some(), version >= 12, "{}", jobs[0]);
    assert!(jobs[0].get("gpu_usage").is_none(), "{}", jobs[0]);
    assert!(jobs[1]["cpu_usec"].is_u64(), "job 6: {}", jobs[1]);

    // The database is at today's version. Jobs 1 to 3 ended long before keep_finished: their
    // scripts and environments went at start, and their records stay (flexacct above); job 4
    // ended only now (NODE_FAIL) and keeps its own.
    d.stop();
    assert_eq!(user_version(&d.db_path()), flexd::store::schema::VERSION);
    let conn = flexd::store::open_reader(&d.db_path()).expect("open");
    let purged: Vec<(String, String, Option<i64>, Option<i64>)> = conn
        .prepare("SELECT script, env, script_id, env_id FROM jobs WHERE id <= 3 ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let empty = (String::new(), String::new(), None, None);
    assert_eq!(purged, vec![empty; 3]);

    // Today's reader finds each job's submission in the old database, brought to today's
    // version without a flexd (which would purge them).
    let conn = flexd::store::open(&copy.path().join("flex.db")).expect("migrate a copy");
    let one = flexd::store::launch_row(&conn, JobId(1), None)
        .expect("read job 1")
        .expect("job 1 is there");
    assert_eq!(one.script, "#!/bin/sh\necho \"$FIXTURE_NOTE\"\n");
    assert_eq!(
        (one.workdir.as_path(), one.stdout.as_deref()),
        (Path::new("/tmp"), Some("/dev/null"))
    );
    let note = (
        "FIXTURE_NOTE".to_string(),
        format!("made by schema v{version}"),
    );
    assert!(
        one.env.contains(&note),
        "job 1's environment: {:?}",
        one.env
    );
    assert!(one
        .env
        .iter()
        .any(|(k, v)| k == "PATH" && v == "/usr/bin:/bin"));
    let two = flexd::store::launch_row(&conn, JobId(2), None)
        .expect("read job 2")
        .expect("job 2 is there");
    assert!(
        !two.env.iter().any(|(k, _)| k == "FIXTURE_NOTE"),
        "job 2 has job 1's environment"
    );
}

#[test]
fn schema_v2_database_from_flexd_179bb4c() {
    old_database_runs_in_todays_flexd(2);
}

#[test]
fn schema_v3_database_from_flexd_c06d3a0() {
    old_database_runs_in_todays_flexd(3);
}

#[test]
fn schema_v4_database_from_flexd_1ede5d8() {
    old_database_runs_in_todays_flexd(4);
}

#[test]
fn schema_v5_database_from_flexd_1d4cfb7() {
    old_database_runs_in_todays_flexd(5);
}

#[test]
fn schema_v6_database_from_flexd_02af634() {
    old_database_runs_in_todays_flexd(6);
}

#[test]
fn schema_v7_database_from_flexd_4d5876d() {
    old_database_runs_in_todays_flexd(7);
}

#[test]
fn schema_v8_database_from_flexd_bb40aef() {
    old_database_runs_in_todays_flexd(8);
}

#[test]
fn schema_v9_database_from_flexd_39bd8a5() {
    old_database_runs_in_todays_flexd(9);
}

#[test]
fn schema_v10_database_from_flexd_4056873() {
    old_database_runs_in_todays_flexd(10);
}

#[test]
fn schema_v11_database_from_flexd_27081d3() {
    old_database_runs_in_todays_flexd(11);
}

#[test]
fn schema_v12_database_from_flexd_bcf9c74() {
    old_database_runs_in_todays_flexd(12);
}

#[test]
fn schema_v13_database_from_flexd_24ad6ef() {
    old_database_runs_in_todays_flexd(13);
}

#[test]
fn schema_v14_database_from_flexd_e284ea1() {
    old_database_runs_in_todays_flexd(14);
}

/// `v14-arrays.db`: job 1 running on all 14 leaves when flexd stopped, and an array of three
/// tasks (2, 3, 4: indices 1, 5 and 9, at most 2 at once) waiting on `afterany:1`, each task's
/// row with its own copy of the spec and dependency, as versions up to 14 wrote them.
#[test]
fn schema_v14_arrays_read_their_spec_and_dependency_from_the_first_task() {
    let fixture = fixtures().join("db/v14-arrays.db");
    let d = Daemon::start_on_db("a100-40gb-x2.toml", &fixture);
    // Migrated: the copies are gone, the first task keeps both.
    let db = flexd::store::open_reader(&d.db_path()).expect("open the database");
    let kept: Vec<(i64, bool, bool)> = db
        .prepare("SELECT id, array_spec IS NOT NULL, dependency IS NOT NULL FROM jobs ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        kept,
        [
            (1, false, false),
            (2, true, true),
            (3, false, false),
            (4, false, false)
        ]
    );
    // Each task still waits on job 1 (ended NODE_FAIL by the restart), then runs with its
    // array's variables (its script checks them: COMPLETED only with the spec read whole).
    for task in [2, 3, 4] {
        let v = d.wait_finished(JobId(task));
        assert_eq!(
            (v.state.name(), v.exit_code),
            ("COMPLETED", Some(0)),
            "task {task}: {v:?}\n{}",
            d.log()
        );
        let dep = v.dependency.expect("the task's dependency");
        assert_eq!(dep.to_string(), "afterany:1", "task {task}");
    }
}

#[test]
fn protocol_v2_frames_decode() {
    let checked = proto_v2::check_frames();
    // Every file in the directory is one of the samples (none left unchecked).
    let mut files: Vec<String> = std::fs::read_dir(proto_v2::dir())
        .expect("the frame directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .into_string()
                .expect("a UTF-8 name")
        })
        .collect();
    files.sort();
    let mut checked_sorted = checked.clone();
    checked_sorted.sort();
    assert_eq!(files, checked_sorted);
    assert_eq!(checked.len(), 28, "hello, 13 requests and 14 responses");
}

/// Writes the frame of each v2 message that has none. Run it only when a message is added
/// to protocol v2 (`cargo test -p flex-tests --test compat -- --ignored write_protocol_v2`);
/// it never rewrites an existing frame, and a new protocol version gets its own directory.
#[test]
#[ignore = "writes fixtures; run by hand when protocol v2 gains a message"]
fn write_protocol_v2_frames() {
    let written = proto_v2::write_missing_frames();
    eprintln!("wrote {written:?}");
}

/// A run file and a status file written by today's supervisor (tests/fixtures/README.md),
/// read with flexd's own readers.
#[test]
fn supervisor_files_read_back() {
    use flexd::exec::files::{read_run, read_status};
    let dir = fixtures().join("supervisor");
    let run = read_run(&dir, JobId(1))
        .expect("read 1.run")
        .expect("1.run is there");
    assert_eq!(
        (run.job, run.supervisor_pid, run.job_pgid, run.uid),
        (1, 4882, Some(4883), 0)
    );
    assert_eq!(
        run.cgroup.as_deref(),
        Some(Path::new("/sys/fs/cgroup/unified/flex/job-1.4882"))
    );
    let status = read_status(&dir, JobId(1))
        .expect("read 1.status")
        .expect("1.status is there");
    assert_eq!(
        (
            status.job,
            status.state.name(),
            status.exit_code,
            status.signal
        ),
        (1, "FAILED", Some(7), None)
    );
    assert_eq!((status.end_time, status.note), (1_795_512_705, None));
}
