//! A job is killed whole, at its time limit and on cancel: its process group, and where flexd can
//! give it a cgroup (root and a writable cgroup2 mount), also the processes that left the group
//! (`setsid`, double forks). Afterwards no recorded pid lives and every leaf is free again.

use flex_proto::JobState;
use flex_tests::{script_job, wait_for, Daemon};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::path::{Path, PathBuf};

const A100: &str = "a100-40gb-x2.toml";

/// A job that leaves processes everywhere, each writing its pid to a file in the working
/// directory: a daemon in its own session, a double-forked grandchild in the job's group, and
/// a double-forked grandchild of the daemon. All of them ignore SIGTERM, so only the SIGKILL
/// after the grace ends them.
const SPREADER: &str = "#!/bin/sh
trap '' TERM
setsid sh -c 'sleep 1000 & echo $! > session-grandchild.pid; echo $$ > daemon.pid; exec sleep 1000' \
  </dev/null >/dev/null 2>&1 &
sh -c 'sleep 1000 & echo $! > grandchild.pid' </dev/null >/dev/null 2>&1
echo $$ > first.pid
touch ready
while :; do sleep 1; done
";

/// The pid files the spreader writes; the first two left the job's process group.
const OUTSIDE_GROUP: [&str; 2] = ["daemon.pid", "session-grandchild.pid"];
const IN_GROUP: [&str; 2] = ["grandchild.pid", "first.pid"];

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn pid_in(dir: &Path, file: &str) -> i32 {
    wait_for(&format!("{file} in {}", dir.display()), || {
        std::fs::read_to_string(dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// The cgroup the job's run file names, when flexd gave it one.
fn job_cgroup(d: &Daemon, job: JobId) -> Option<PathBuf> {
    let path = d.state_dir().join("run").join(format!("{job}.run"));
    let v: serde_json::Value = wait_for("the job's run file with its process group", || {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
        v["job_pgid"].as_i64().map(|_| v)
    });
    v["cgroup"].as_str().map(PathBuf::from)
}

/// Whether flexd said at its start that jobs get a cgroup.
fn uses_cgroups(d: &Daemon) -> bool {
    let log = d.log();
    if log.contains("each job gets its own cgroup") {
        true
    } else {
        assert!(
            log.contains("jobs are held by their process group only"),
            "flexd says nothing about job containment:\n{log}"
        );
        false
    }
}

/// Start the spreader, end it with `end`, and check that nothing of it is left.
fn spreader_is_killed_whole(
    name: &str,
    time_limit_s: u64,
    end: impl FnOnce(&Daemon, JobId),
    want: JobState,
) {
    let d = Daemon::start(A100);
    let w = d.scratch(name);
    let mut spec = script_job(SPREADER, &w);
    spec.request = ResourceRequest::leaves(14, time_limit_s);
    let job = d.client().submit(spec).unwrap();
    wait_for("the job to be ready", || {
        w.join("ready").exists().then_some(())
    });
    let cg = job_cgroup(&d, job);
    let cgroups = uses_cgroups(&d);
    assert_eq!(cg.is_some(), cgroups, "run file cgroup {cg:?}");
    let inside: Vec<i32> = IN_GROUP.iter().map(|f| pid_in(&w, f)).collect();
    let outside: Vec<i32> = OUTSIDE_GROUP.iter().map(|f| pid_in(&w, f)).collect();
    for pid in inside.iter().chain(&outside) {
        assert!(alive(*pid), "pid {pid} runs before the end");
    }

    end(&d, job);
    let v = d.wait_finished(job);
    assert_eq!(v.state, want, "{v:?}");
    for pid in &inside {
        wait_for(&format!("pid {pid} of the job's group to die"), || {
            (!alive(*pid)).then_some(())
        });
    }
    if cgroups {
        for pid in &outside {
            wait_for(
                &format!("pid {pid} that left the job's group to die"),
                || (!alive(*pid)).then_some(()),
            );
        }
        let cg = cg.unwrap();
        wait_for("the job's cgroup to be removed", || {
            (!cg.exists()).then_some(())
        });
    } else {
        eprintln!(
            "notice: flexd holds jobs by process group only here; the processes that left the \
             group ({outside:?}) are not checked and are killed by the test"
        );
        for pid in outside {
            flex_tests::signal(pid as u32, libc::SIGKILL);
        }
    }

    // Every leaf and core is free again: a job needing all leaves starts.
    let mut all = script_job("true\n", &w);
    all.request = ResourceRequest::leaves(14, 60);
    let all = d.client().submit(all).unwrap();
    assert_eq!(d.wait_finished(all).state, JobState::Completed);
}

#[test]
fn a_job_at_its_time_limit_is_killed_with_everything_it_forked() {
    spreader_is_killed_whole("limit", 3, |_, _| {}, JobState::Timeout);
}

#[test]
fn a_cancelled_job_is_killed_with_everything_it_forked() {
    spreader_is_killed_whole(
        "cancel",
        3600,
        |d, job| {
            d.client().cancel(vec![job], None).unwrap();
        },
        JobState::Cancelled,
    );
}

#[test]
fn a_job_that_ends_by_itself_takes_its_daemons_with_it() {
    let d = Daemon::start(A100);
    let w = d.scratch("ends");
    let script = "#!/bin/sh\nsetsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' \
                  </dev/null >/dev/null 2>&1 &\n\
                  while [ ! -s daemon.pid ]; do sleep 0.05; done\nexit 0\n";
    let job = d.client().submit(script_job(script, &w)).unwrap();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed);
    let daemon = pid_in(&w, "daemon.pid");
    if uses_cgroups(&d) {
        wait_for("the job's daemon to die", || (!alive(daemon)).then_some(()));
    } else {
        eprintln!("notice: no job cgroups here; the job's daemon {daemon} is killed by the test");
        flex_tests::signal(daemon as u32, libc::SIGKILL);
    }
}

#[test]
fn a_job_whose_supervisor_is_killed_is_killed_whole() {
    let d = Daemon::start(A100);
    let w = d.scratch("orphan");
    let mut spec = script_job(SPREADER, &w);
    spec.request = ResourceRequest::leaves(14, 3600);
    let job = d.client().submit(spec).unwrap();
    wait_for("the job to be ready", || {
        w.join("ready").exists().then_some(())
    });
    let cg = job_cgroup(&d, job);
    let run = d.state_dir().join("run").join(format!("{job}.run"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run).unwrap()).unwrap();
    let supervisor = v["supervisor_pid"].as_i64().unwrap() as i32;
    let pids: Vec<i32> = IN_GROUP
        .iter()
        .chain(&OUTSIDE_GROUP)
        .map(|f| pid_in(&w, f))
        .collect();
    flex_tests::signal(supervisor as u32, libc::SIGKILL);
    assert_eq!(d.wait_finished(job).state, JobState::NodeFail);
    let checked = if uses_cgroups(&d) {
        pids.len()
    } else {
        IN_GROUP.len()
    };
    for pid in &pids[..checked] {
        wait_for(&format!("pid {pid} of the orphaned job to die"), || {
            (!alive(*pid)).then_some(())
        });
    }
    if let Some(cg) = cg {
        wait_for("the orphaned job's cgroup to be removed", || {
            (!cg.exists()).then_some(())
        });
    }
    for pid in &pids[checked..] {
        eprintln!("notice: no job cgroups here; pid {pid} that left the job's group is killed by the test");
        flex_tests::signal(*pid as u32, libc::SIGKILL);
    }
    let mut all = script_job("true\n", &w);
    all.request = ResourceRequest::leaves(14, 60);
    let all = d.client().submit(all).unwrap();
    assert_eq!(d.wait_finished(all).state, JobState::Completed);
}

#[test]
fn flexd_removes_empty_cgroups_left_by_dead_supervisors() {
    let mut d = Daemon::start(A100);
    let log = d.log();
    let Some(base) = log
        .lines()
        .find_map(|l| l.split("each job gets its own cgroup under ").nth(1))
        .map(|b| PathBuf::from(b.trim()))
    else {
        eprintln!("notice: no job cgroups here; nothing to sweep");
        return;
    };
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = base.join(format!("job-424242.{dead}"));
    let live = base.join(format!("job-424243.{}", std::process::id()));
    for p in [&stale, &live] {
        std::fs::create_dir(p).unwrap();
    }
    d.restart();
    assert!(!stale.exists(), "{} is left", stale.display());
    assert!(live.exists(), "the cgroup of a live supervisor was removed");
    std::fs::remove_dir(&live).unwrap();
}
