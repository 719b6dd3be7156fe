//! A stall of the whole flexd process in the middle of a scheduling pass (issue 27): SIGSTOP,
//! or a host under memory pressure. The scheduling loop paces itself by what its passes cost;
//! a pass that a stall stretched must not stretch the pauses after it, so that after the stall
//! a job that ended meanwhile is recorded, the job waiting for its leaf starts, and SIGTERM
//! stops flexd, each at once rather than after twice the stall.
//!
//! The stall must fall inside a pass: the test sends SIGSTOP when flexd is seen busy, and keeps
//! it only when a thread was computing at that moment, which with a long queue and a
//! whole-queue backfill window is a pass (idle, flexd's threads wait in system calls).

use flex_proto::JobState;
use flex_tests::{script_job, Daemon};
use gres_plugin::Request as ResourceRequest;
use std::path::Path;
use std::time::{Duration, Instant};

const A100: &str = "a100-40gb-x2.toml";
/// Jobs in the queue: enough that a pass over them takes a good part of a second.
const QUEUED: usize = 6000;
/// How long flexd is stopped. Before the fix the loop then slept twice as long.
const STALL: Duration = Duration::from_secs(15);

/// The CPU time all of a process's threads used so far (`/proc/PID/task/*/schedstat`).
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Whether every thread of `pid` is stopped, and whether one of them was computing (not
/// waiting in a system call) when it stopped: None while some still run.
fn stopped_computing(pid: u32) -> Option<bool> {
    let mut computing = false;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
        let state = stat.rsplit_once(") ")?.1.chars().next()?;
        if state != 'T' && state != 't' {
            return None;
        }
        // "-1 SP PC": stopped on its way back to user space, not inside a system call.
        let syscall = std::fs::read_to_string(t.path().join("syscall")).ok()?;
        computing |= syscall.split_whitespace().next() == Some("-1");
    }
    Some(computing)
}

/// Stop flexd with SIGSTOP inside a scheduling pass: when its threads used CPU over the last
/// 20 ms (idle, flexd uses none), and one of them was found computing rather than waiting in a
/// system call once stopped; else it goes on and the test tries again.
fn stop_inside_a_pass(d: &Daemon) {
    let pid = d.pid();
    let deadline = Instant::now() + flex_tests::WAIT;
    let mut last = cpu_ns(pid);
    loop {
        assert!(
            Instant::now() < deadline,
            "flexd was never stopped inside a pass"
        );
        std::thread::sleep(Duration::from_millis(20));
        let now = cpu_ns(pid);
        let busy = now - last >= 5_000_000;
        last = now;
        if !busy {
            continue;
        }
        flex_tests::signal(pid, libc::SIGSTOP);
        let computing = loop {
            if let Some(c) = stopped_computing(pid) {
                break c;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        if computing {
            return;
        }
        flex_tests::signal(pid, libc::SIGCONT);
        last = cpu_ns(pid);
    }
}

fn job(script: &str, dir: &Path, leaves: u32, limit_s: u64) -> flex_proto::JobSpec {
    let mut spec = script_job(script, dir);
    spec.request = ResourceRequest::leaves(leaves, limit_s);
    spec
}

#[test]
fn a_stall_inside_a_pass_delays_no_end_no_start_and_no_stop() {
    let mut d = Daemon::start_with(A100, "backfill_window = 0");
    let dir = d.scratch("stall");
    let gate = dir.join("go");
    // 13 of the 14 leaves held for a day, the last one by a job that ends during the stall.
    let holder = d
        .client()
        .submit(job("#!/bin/sh\nsleep 3600\n", &dir, 13, 86400))
        .unwrap();
    let gated = format!(
        "#!/bin/sh\nwhile [ ! -e {} ]; do sleep 0.1; done\nexit 7\n",
        gate.display()
    );
    let ending = d.client().submit(job(&gated, &dir, 1, 3600)).unwrap();
    for j in [holder, ending] {
        d.wait_state(j, &[JobState::Running]);
    }
    // A long queue that cannot start before the holder ends (each job needs every leaf)...
    let socket = d.socket();
    let submitters: Vec<_> = (0..4)
        .map(|t| {
            let (socket, dir) = (socket.clone(), dir.clone());
            std::thread::spawn(move || {
                let mut c = flex_tests::Client::connect(&socket).unwrap();
                for i in 0..QUEUED / 4 {
                    // Limits all different, so that no two jobs are alike to the pass.
                    let limit = 3600 + (t * QUEUED + i) as u64;
                    c.submit(job("#!/bin/sh\ntrue\n", &dir, 14, limit)).unwrap();
                }
            })
        })
        .collect();
    for s in submitters {
        s.join().unwrap();
    }
    // ...and behind it a short one-leaf job, which backfills into the leaf of the job that
    // ends (it ends long before the holder would let the queue's head start).
    let waiting = d
        .client()
        .submit(job("#!/bin/sh\nsleep 3600\n", &dir, 1, 60))
        .unwrap();
    assert_eq!(d.job(waiting).unwrap().state, JobState::Pending);

    // Stopped inside a pass; the job ends meanwhile, and its supervisor, which flexd cannot
    // answer, writes its status file instead.
    stop_inside_a_pass(&d);
    std::fs::write(&gate, "").unwrap();
    std::thread::sleep(STALL);
    flex_tests::signal(d.pid(), libc::SIGCONT);
    let resumed = Instant::now();
    let started = d.wait_state(waiting, &[JobState::Running]);
    let after = resumed.elapsed();
    eprintln!("the waiting job started {after:?} after SIGCONT");
    let ended = d.job(ending).unwrap();
    assert_eq!(
        (ended.state, ended.exit_code),
        (JobState::Failed, Some(7)),
        "{ended:?}"
    );
    assert!(
        started.start_time >= ended.end_time,
        "{started:?} started before {ended:?} ended"
    );
    // Before, the loop slept twice the stall (30 s) before its next pass.
    assert!(
        after < STALL,
        "the waiting job started {after:?} after SIGCONT; log:\n{}",
        d.log()
    );

    // Stopped inside a pass again, then SIGTERM right after SIGCONT: flexd stops at once
    // (before, it finished sleeping twice the stall first).
    stop_inside_a_pass(&d);
    std::thread::sleep(STALL);
    flex_tests::signal(d.pid(), libc::SIGCONT);
    let t = Instant::now();
    let status = d.stop();
    assert!(status.success(), "{status:?}");
    let stopping = t.elapsed();
    eprintln!("flexd stopped {stopping:?} after SIGTERM");
    assert!(
        stopping < STALL,
        "flexd took {stopping:?} to stop after SIGTERM; log:\n{}",
        d.log()
    );
}
