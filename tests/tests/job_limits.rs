//! A job is held to what it was given (issue 24): its host memory (`--mem`), killed by the
//! kernel's OOM killer in its own cgroup and recorded OUT_OF_MEMORY while the host and its
//! other jobs go on; its processes and threads (`job_pids_max`), so a fork bomb stops in the
//! job; and its cores, as a cpuset the job cannot leave with `taskset`.
//!
//! These need root and the controllers (on cgroup2, or on the v1 hierarchies of a hybrid
//! host); without them each test says why and passes, except with CI=true, where they must
//! run.

use flex_proto::JobState;
use flex_tests::cli::{cmd, submit, text, wait_running};
use flex_tests::{script_job, wait_for, Daemon};
use std::time::Instant;

const A100: &str = "a100-40gb-x2.toml";

/// Whether flexd said at its start that it limits jobs' `controller`; when it does not, the
/// test is skipped with the reason (and fails under CI=true).
fn limits(d: &Daemon, controller: &str) -> bool {
    let log = d.log();
    if log.contains(&format!("jobs' {controller} is limited")) {
        return true;
    }
    let why = log
        .lines()
        .find(|l| {
            l.contains(&format!("jobs' {controller} is not limited"))
                || l.contains("jobs are held by their process group only")
        })
        .unwrap_or("flexd says nothing about job limits")
        .to_string();
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true: jobs' {controller} must be limited here, but: {why}"
    );
    eprintln!("notice: skipped, jobs' {controller} is not limited here: {why}");
    false
}

#[test]
fn a_job_past_its_memory_is_killed_out_of_memory_and_the_host_goes_on() {
    let addr = flex_tests::metrics::free_address();
    let d = Daemon::start_with(A100, &format!("metrics_listen = \"{addr}\""));
    if !limits(&d, "memory") {
        return;
    }
    let w = d.scratch("oom");
    let other = submit(&d, &w, "other.sh", "#!/bin/sh\nsleep 300\n", &[]);
    wait_running(&d, other);
    // tail keeps the last ten lines of what it reads, and /dev/zero has no newline: 256 MiB
    // held, four times the job's memory (and bounded should the limit not hold).
    let hog = submit(
        &d,
        &w,
        "hog.sh",
        "#!/bin/sh\n#SBATCH --mem=64M\nhead -c 256M /dev/zero | tail > /dev/null\necho survived\n",
        &[],
    );
    let v = d.wait_finished(hog);
    assert_eq!(v.state, JobState::OutOfMemory, "{v:?}\n{}", d.log());

    let out = cmd(&d, "flexq")
        .args(["-t", "all", "-h", "-o", "%i %t"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let q = text(&out.stdout);
    assert!(q.contains(&format!("{hog} OOM")), "flexq:\n{q}");
    assert!(q.contains(&format!("{other} R")), "flexq:\n{q}");
    // Accounting reads the database, which the end reaches a moment after flexq's view.
    let acct = wait_for("flexacct to show the end", || {
        let out = cmd(&d, "flexacct")
            .args([
                "-j",
                &hog.to_string(),
                "-n",
                "-P",
                "--format",
                "JobID,State,ExitCode",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let t = text(&out.stdout).trim().to_string();
        (!t.contains("RUNNING")).then_some(t)
    });
    assert_eq!(acct, format!("{hog}|OUT_OF_MEMORY|0:125"));
    // The metrics count it under its own state.
    let (code, body) = flex_tests::metrics::http_get(&addr, "/metrics");
    assert_eq!(code, 200, "{body}");
    let m = flex_tests::metrics::parse_exposition(&body);
    assert_eq!(m["flex_jobs_completed_total{state=\"OUT_OF_MEMORY\"}"], 1.0);
    assert_eq!(m["flex_jobs{state=\"OUT_OF_MEMORY\"}"], 1.0);

    // The other job is untouched, and flexd kept its own protection from the OOM killer
    // (which needs CAP_SYS_RESOURCE: a container's root may lack it, and flexd says so).
    assert_eq!(d.job(other).unwrap().state, JobState::Running);
    let adj = std::fs::read_to_string(format!("/proc/{}/oom_score_adj", d.pid())).unwrap();
    if d.log().contains("cannot keep the OOM killer off flexd") {
        eprintln!(
            "notice: flexd may not lower its oom_score_adj here ({})",
            adj.trim()
        );
    } else {
        assert_eq!(adj.trim(), "-1000");
    }
    d.client().cancel(vec![other], None).unwrap();
}

#[test]
fn a_job_runs_with_the_oom_killers_ordinary_score() {
    let d = Daemon::start(A100);
    if !nix_root() {
        eprintln!("notice: skipped, flexd does not run as root here");
        return;
    }
    let w = d.scratch("adj");
    let job = d
        .client()
        .submit(script_job(
            "#!/bin/sh\ncat /proc/self/oom_score_adj > adj\n",
            &w,
        ))
        .unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    assert_eq!(std::fs::read_to_string(w.join("adj")).unwrap().trim(), "0");
}

fn nix_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A fork bomb, bounded at 1000 children: each `sleep 30 &` until fork fails, counting in
/// `forked`; then it waits (with shell builtins only) for `stop`.
const FORK_BOMB: &str = "#!/bin/sh
( n=0; while [ $n -lt 1000 ]; do sleep 30 & n=$((n+1)); echo $n > forked; done )
touch capped
while [ ! -e stop ]; do :; done
";

#[test]
fn a_fork_bomb_stops_at_the_jobs_pids_max_and_flexd_answers() {
    let d = Daemon::start_with(A100, "job_pids_max = 64\n");
    if !limits(&d, "pids") {
        return;
    }
    let w = d.scratch("bomb");
    let job = d.client().submit(script_job(FORK_BOMB, &w)).unwrap();
    wait_for("the fork bomb to reach its cap", || {
        w.join("capped").exists().then_some(())
    });
    let forked: u32 = std::fs::read_to_string(w.join("forked"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(forked < 64, "{forked} children forked under pids.max 64");
    // flexd and its commands still fork and answer while the job sits at its limit.
    let t = Instant::now();
    let out = cmd(&d, "flexq").arg("-h").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains(&job.to_string()));
    eprintln!(
        "flexq answered in {:?} beside a job at its pids.max ({forked} children)",
        t.elapsed()
    );
    std::fs::write(w.join("stop"), "").unwrap();
    d.wait_finished(job);
}

#[test]
fn taskset_cannot_take_a_job_off_its_cores() {
    let d = Daemon::start(A100);
    if !limits(&d, "cpuset") {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if online < 2 {
        eprintln!("notice: skipped, one CPU: a job's cores are all of them");
        return;
    }
    let w = d.scratch("taskset");
    let script = format!(
        "#!/bin/sh\n\
         grep Cpus_allowed_list /proc/self/status > before\n\
         taskset -a -cp 0-{} $$ > /dev/null\n\
         grep Cpus_allowed_list /proc/self/status > after\n",
        online - 1
    );
    let job = d.client().submit(script_job(&script, &w)).unwrap();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}");
    let read = |f: &str| std::fs::read_to_string(w.join(f)).unwrap();
    let all = format!("Cpus_allowed_list:\t0-{}\n", online - 1);
    assert_ne!(read("before"), all, "the job was not bound to its cores");
    assert_eq!(read("after"), read("before"), "taskset moved the job");
}
