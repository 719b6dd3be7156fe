//! A job's GPU telemetry totals survive flexd's restarts: flexd stores them after every
//! sample, and a flexd started again while the job runs goes on from them (and from the same
//! sample of the simulated series). The summary of a job sampled across a SIGKILL and a
//! SIGTERM of flexd is the summary of the same job on a flexd that ran throughout.

use flex_tests::cli::{cmd, submit, wait_running};
use flex_tests::Daemon;
use gres_plugin::JobId;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Six samples of every leaf, each different, then nothing.
fn samples(dir: &Path) -> PathBuf {
    let mut text = String::from("# sample,leaf,mem_mib,util_pct,power_w\n");
    for leaf in 0..14 {
        for n in 0..6u32 {
            let mem = 100 * (n + 1) + leaf * 7;
            let util = 10 * (n + 1) + leaf;
            let power = 100 + 17 * n;
            text += &format!("{n},{leaf},{mem},{util},{power}\n");
        }
    }
    let path = dir.join("samples.csv");
    std::fs::write(&path, text).expect("write the samples");
    path
}

fn daemon(dir: &Path) -> Daemon {
    let shipped = gres_plugin::topology::builtin("a100-40gb-x2.toml").expect("shipped");
    let topo = dir.join("a100-sim.toml");
    let line = format!("telemetry = {:?}", samples(dir).display().to_string());
    std::fs::write(&topo, format!("{line}\n{shipped}")).expect("write the topology");
    Daemon::start_with(topo.to_str().unwrap(), "telemetry_period = \"1s\"")
}

/// The samples flexd has stored of `job`'s running totals (0 before the first).
fn ticks(d: &Daemon, job: JobId) -> u64 {
    let Ok(conn) = flexd::store::open_reader(&d.db_path()) else {
        return 0;
    };
    let text: Option<String> = conn
        .query_row(
            "SELECT gpu_totals FROM jobs WHERE id = ?1",
            [job.0 as i64],
            |r| r.get(0),
        )
        .unwrap_or(None);
    text.map_or(0, |t| {
        let v: serde_json::Value = serde_json::from_str(&t).expect("totals are JSON");
        v["ticks"].as_u64().expect("ticks")
    })
}

fn wait_ticks(d: &Daemon, job: JobId, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while ticks(d, job) < n {
        assert!(
            Instant::now() < deadline,
            "job {job}: {} samples stored, waiting for {n}; log:\n{}",
            ticks(d, job),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A 3-leaf job that runs until `release` exists in its directory.
fn start_job(d: &Daemon, dir: &Path) -> JobId {
    let script = "#!/bin/sh\nwhile [ ! -e release ]; do sleep 0.1; done\n";
    let job = submit(d, dir, "held.sh", script, &["--leaves", "3"]);
    wait_running(d, job);
    job
}

/// The job's summary in flexacct once it has ended and its summary is in.
fn usage(d: &Daemon, dir: &Path, job: JobId) -> serde_json::Value {
    std::fs::write(dir.join("release"), "").expect("release the job");
    d.wait_finished(job);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cmd(d, "flexacct")
            .args(["--json", "-j", &job.to_string()])
            .output()
            .expect("run flexacct");
        let recs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
        if let Some(r) = recs.into_iter().find(|r| r["gpu_usage"].is_object()) {
            return r["gpu_usage"].clone();
        }
        assert!(Instant::now() < deadline, "no summary of job {job}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_jobs_totals_go_on_across_flexd_restarts() {
    // Throughout: eight samples (the six of the file and two that report nothing).
    let whole = tempfile::tempdir().expect("temporary directory");
    let d = daemon(whole.path());
    let job = start_job(&d, whole.path());
    wait_ticks(&d, job, 8);
    let want = usage(&d, whole.path(), job);
    assert_eq!(want["samples"], 6, "{want}");

    // Killed after two samples, stopped after four, the job running all along.
    let broken = tempfile::tempdir().expect("temporary directory");
    let mut d = daemon(broken.path());
    let job = start_job(&d, broken.path());
    wait_ticks(&d, job, 2);
    d.kill9();
    d.restart();
    assert!(
        d.log()
            .contains("GPU telemetry totals of 1 job resumed from the database"),
        "{}",
        d.log()
    );
    wait_ticks(&d, job, 4);
    d.restart();
    wait_ticks(&d, job, 8);
    let got = usage(&d, broken.path(), job);
    // The samples files differ only in their directory, which the source names.
    let label = |v: &serde_json::Value| {
        let mut v = v.clone();
        v["source"] = "simulated".into();
        v
    };
    assert_eq!(label(&got), label(&want));
    // Once the summary is in, no totals are kept.
    assert_eq!(ticks(&d, job), 0);
}
