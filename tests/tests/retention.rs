//! Finished jobs' scripts and environments are deleted `keep_finished` after their end (issue
//! 27), and sooner when a user's finished jobs go past their queue's limits, so that the
//! per-user quotas bound the state directory and flexd's memory; the job's accounting record
//! stays. flexd reports the state directory's size in its metrics.

use flex_tests::metrics::{free_address, http_get, parse_exposition};
use flex_tests::{script_job, Daemon};
use gres_plugin::JobId;
use std::path::Path;
use std::time::{Duration, Instant};

const A100: &str = "a100-40gb-x2.toml";
/// Each round queues three distinct scripts of this size (the quota is 4 MiB), then cancels
/// them.
const SCRIPT: usize = 1 << 20;
const ROUNDS: usize = 20;

/// The bytes of the files below `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A job's script as stored: its text, inline or shared; None when it was purged.
fn stored_script(d: &Daemon, job: JobId) -> Option<String> {
    let db = rusqlite::Connection::open_with_flags(
        d.db_path(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.query_row(
        "SELECT COALESCE(s.body, NULLIF(j.script, '')) FROM jobs j
            LEFT JOIN scripts s ON s.id = j.script_id WHERE j.id = ?1",
        [job.0 as i64],
        |r| r.get(0),
    )
    .unwrap()
}

/// flexacct's State of a job (its accounting record).
fn accounted(d: &Daemon, job: JobId) -> String {
    let out = d
        .cmd("flexacct")
        .args(["-j", &job.to_string(), "-n", "-P", "-o", "State"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn config(keep: &str, metrics: &str) -> String {
    format!(
        "keep_finished = \"{keep}\"\nmetrics_listen = \"{metrics}\"\n\
         [limits]\nmax_queued_bytes_per_user = \"4 MiB\"\n"
    )
}

#[test]
fn finished_jobs_scripts_are_purged_after_keep_finished_and_their_records_stay() {
    let addr = free_address();
    let mut d = Daemon::start_with(A100, &config("1s", &addr));
    let dir = d.scratch("rounds");
    let mut first = None;
    let mut last: Vec<JobId> = Vec::new();
    let mut submitted = 0u64;
    for round in 0..ROUNDS {
        // Paced by the retention: the round before has had its time (up to a few seconds).
        let deadline = Instant::now() + Duration::from_secs(5);
        while last.iter().any(|j| stored_script(&d, *j).is_some()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let jobs: Vec<JobId> = (0..3)
            .map(|k| {
                let line = format!("# round {round:02} job {k}\n");
                let script = format!("#!/bin/sh\n{}true\n", line.repeat(SCRIPT / line.len()));
                submitted += script.len() as u64;
                let mut spec = script_job(&script, &dir);
                spec.queue.hold = true;
                d.client()
                    .submit(spec)
                    .unwrap_or_else(|e| panic!("round {round}: {e}"))
            })
            .collect();
        for j in &jobs {
            d.client().cancel(vec![*j], None).unwrap();
        }
        first.get_or_insert(jobs[0]);
        last = jobs;
    }
    let first = first.unwrap();
    // Bounded: at most the last two rounds' scripts are left, not all of them.
    let size = dir_bytes(&d.state_dir());
    eprintln!(
        "state directory: {} KiB after {} KiB of scripts",
        size >> 10,
        submitted >> 10
    );
    assert!(
        size < submitted / 3,
        "the state directory holds {size} bytes after {submitted} bytes of scripts"
    );
    flex_tests::wait_for("the last round's scripts to be purged", || {
        let db = rusqlite::Connection::open_with_flags(
            d.db_path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()?;
        let n: i64 = db
            .query_row("SELECT count(*) FROM scripts", [], |r| r.get(0))
            .ok()?;
        (n == 0).then_some(())
    });
    // The purged job keeps its accounting record.
    assert_eq!(stored_script(&d, first), None);
    assert_eq!(accounted(&d, first), "CANCELLED");

    // The metrics say how large the state directory is.
    let (code, body) = http_get(&addr, "/metrics");
    assert_eq!(code, 200, "{body}");
    let reported = parse_exposition(&body)["flex_state_dir_bytes"] as u64;
    assert!(
        reported > 0 && reported < submitted / 3,
        "flex_state_dir_bytes {reported}"
    );

    // A job that ends while flexd keeps finished jobs an hour; flexd stops, and starts again
    // with keep_finished = 1s: the job expired while flexd was down, and is purged at start.
    std::fs::write(d.config_path(), config("1h", &addr)).unwrap();
    d.restart();
    let mut spec = script_job("#!/bin/sh\n# kept for a while\ntrue\n", &dir);
    spec.queue.hold = true;
    let job = d.client().submit(spec).unwrap();
    d.client().cancel(vec![job], None).unwrap();
    d.stop();
    assert!(stored_script(&d, job).is_some());
    std::fs::write(d.config_path(), config("1s", &addr)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    d.restart();
    flex_tests::wait_for("the expired script to be purged at start", || {
        stored_script(&d, job).is_none().then_some(())
    });
    assert_eq!(accounted(&d, job), "CANCELLED");
}

/// The ids of the jobs flexq shows, finished ones included.
fn shown(d: &Daemon) -> Vec<JobId> {
    let out = d
        .cmd("flexq")
        .args(["-r", "-t", "all", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let jobs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    jobs.iter()
        .map(|j| JobId(j["id"].as_u64().expect("a job's id")))
        .collect()
}

#[test]
fn within_keep_finished_a_users_finished_jobs_are_held_to_their_queue_limits() {
    // An hour's retention; a user may queue 100 jobs, and 1 MiB of scripts.
    let config = "keep_finished = \"1h\"\n[limits]\nmax_queued_per_user = 100\n\
                  max_queued_bytes_per_user = \"1 MiB\"\n";
    let d = Daemon::start_with(A100, config);
    let dir = d.scratch("flood");
    // Submit-and-cancel rounds, each within the limits: 10 arrays of 50 tasks, then 5
    // distinct scripts of 400 KiB.
    let held = |script: &str, array: Option<&str>| {
        let mut spec = script_job(script, &dir);
        spec.queue.hold = true;
        spec.queue.array = array.map(|a| flex_proto::ArraySpec::parse(a).unwrap());
        let job = d.client().submit(spec).unwrap();
        d.client().cancel(vec![job], None).unwrap();
        job
    };
    let arrays: Vec<JobId> = (0..10)
        .map(|_| held("#!/bin/sh\ntrue\n", Some("0-49")))
        .collect();
    // A flexd tick (once a second) forgets the oldest: the last 100 stay, the last two arrays.
    flex_tests::wait_for("the user's finished jobs to be held to 100", || {
        (shown(&d).len() <= 100).then_some(())
    });
    let ids = shown(&d);
    assert_eq!(ids.len(), 100, "{ids:?}");
    assert!(ids.iter().all(|j| j.0 >= arrays[8].0), "{ids:?}");
    // Bytes: at most 1 MiB of scripts only finished jobs hold, the newest two of five.
    let big: Vec<JobId> = (0..5)
        .map(|k| {
            let line = format!("# script {k}\n");
            held(
                &format!("#!/bin/sh\n{}true\n", line.repeat((400 << 10) / line.len())),
                None,
            )
        })
        .collect();
    flex_tests::wait_for("the oldest scripts to be purged", || {
        stored_script(&d, big[2]).is_none().then_some(())
    });
    let stored: Vec<bool> = big
        .iter()
        .map(|j| stored_script(&d, *j).is_some())
        .collect();
    assert_eq!(stored, [false, false, false, true, true]);
    // Each forgotten job keeps its accounting record.
    assert_eq!(accounted(&d, big[0]), "CANCELLED");
}
