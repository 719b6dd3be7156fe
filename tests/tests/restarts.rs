//! flexd's restarts end to end: SIGKILL and SIGTERM of the real daemon, supervisors killed
//! behind its back, the `flexd supervise` process killed, a second flexd on the same socket,
//! SIGHUP reloads.

use flex_proto::{ErrorKind, JobState, Request, Response};
use flex_tests::{script_job, signal, wait_for, Daemon};
use gres_plugin::Request as ResourceRequest;

const A100: &str = "a100-40gb-x2.toml";

fn daemon_error(r: Result<Response, flex_tests::ClientError>) -> (ErrorKind, String) {
    match r {
        Err(flex_tests::ClientError::Daemon { kind, message }) => (kind, message),
        other => panic!("expected an error from flexd, got {other:?}"),
    }
}

fn pid_alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z")
}

#[test]
fn a_job_finishes_while_flexd_is_killed_and_the_restarted_flexd_records_it() {
    let mut d = Daemon::start(A100);
    let w = d.scratch("restart");
    let script = "#!/bin/sh\ntouch started\nwhile [ ! -e go ]; do sleep 0.05; done\nexit 0\n";
    let job = d.client().submit(script_job(script, &w)).unwrap();
    wait_for("the job to start", || {
        w.join("started").exists().then_some(())
    });
    d.kill9();
    std::fs::write(w.join("go"), "").unwrap();
    let status = d.state_dir().join("run").join(format!("{job}.status"));
    wait_for("the supervisor's status file", || {
        status.exists().then_some(())
    });
    d.restart();
    let v = d.wait_finished(job);
    assert_eq!((v.state, v.exit_code), (JobState::Completed, Some(0)));
    wait_for("flexd to remove the status file", || {
        (!status.exists()).then_some(())
    });
    // And the database holds the end.
    let db = rusqlite::Connection::open(d.state_dir().join("flex.db")).unwrap();
    let (state, code): (String, Option<i32>) = db
        .query_row(
            "SELECT state, exit_code FROM jobs WHERE id = ?1",
            [job.0 as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((state.as_str(), code), ("COMPLETED", Some(0)));
}

/// A supervisor keeps an end it cannot report for as long as its state may come back (flexd
/// down, a full disk), but not once the state directory it reports to was removed: nothing
/// could ever ask for the end, and the supervisor would wait forever.
#[test]
fn a_supervisor_whose_state_was_removed_does_not_wait_forever() {
    let mut d = Daemon::start(A100);
    let w = d.scratch("removed");
    let script = "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\nexit 0\n";
    let job = d.client().submit(script_job(script, &w)).unwrap();
    let supervisor = flex_tests::run_file(&d, job)["supervisor_pid"]
        .as_i64()
        .unwrap() as i32;
    d.kill9();
    std::fs::remove_dir_all(d.state_dir().join("run")).unwrap();
    std::fs::write(w.join("go"), "").unwrap();
    wait_for("the supervisor to exit", || {
        (!pid_alive(supervisor)).then_some(())
    });
}

#[test]
fn a_running_job_is_readopted_after_a_restart() {
    let mut d = Daemon::start(A100);
    let w = d.scratch("readopt");
    let script = "#!/bin/sh\ntouch started\nwhile [ ! -e go ]; do sleep 0.05; done\nexit 5\n";
    let mut spec = script_job(script, &w);
    spec.request = ResourceRequest::leaves(14, 3600);
    let job = d.client().submit(spec).unwrap();
    wait_for("the job to start", || {
        w.join("started").exists().then_some(())
    });
    d.kill9();
    d.restart();
    let v = d.wait_state(job, &[JobState::Running]);
    assert_eq!(v.alloc.unwrap().leaves.len(), 14);
    // Its leaves are still taken: a one-leaf job waits.
    let waiting = d.client().submit(script_job("true\n", &w)).unwrap();
    assert_eq!(
        d.wait_state(waiting, &[JobState::Pending]).state,
        JobState::Pending
    );
    std::fs::write(w.join("go"), "").unwrap();
    let v = d.wait_finished(job);
    assert_eq!((v.state, v.exit_code), (JobState::Failed, Some(5)));
    assert_eq!(d.wait_finished(waiting).state, JobState::Completed);
}

#[test]
fn a_job_whose_supervisor_died_while_flexd_was_down_is_node_fail() {
    let mut d = Daemon::start(A100);
    let w = d.scratch("nodefail");
    let mut spec = script_job("#!/bin/sh\necho $$ > pid\nexec sleep 300\n", &w);
    spec.request = ResourceRequest::leaves(14, 3600);
    let job = d.client().submit(spec).unwrap();
    let job_pid: i32 = wait_for("the job's pid", || {
        std::fs::read_to_string(w.join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    let run = d.state_dir().join("run").join(format!("{job}.run"));
    let sup: i32 = wait_for("the run file", || {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&run).ok()?).ok()?;
        v["job_pgid"].as_i64()?;
        Some(v["supervisor_pid"].as_i64()? as i32)
    });
    d.kill9();
    signal(sup as u32, libc::SIGKILL);
    wait_for("the supervisor to die", || (!pid_alive(sup)).then_some(()));
    d.restart();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::NodeFail);
    assert!(v.reason.unwrap().contains("supervisor"));
    wait_for("the orphaned job to be killed", || {
        (!pid_alive(job_pid)).then_some(())
    });
    // Every leaf is free again, and a job can have them all.
    match d.client().request(&Request::LeafMap).unwrap() {
        Response::LeafMap(hosts) => {
            assert!(hosts[0]
                .leaves
                .iter()
                .all(|l| l.free == 1000 && l.jobs.is_empty()));
        }
        r => panic!("{r:?}"),
    }
    let mut all = script_job("true\n", &w);
    all.request = ResourceRequest::leaves(14, 60);
    let next = d.client().submit(all).unwrap();
    assert_eq!(d.wait_finished(next).state, JobState::Completed);
}

#[test]
fn a_supervisor_killed_while_flexd_runs_is_node_fail() {
    let d = Daemon::start(A100);
    let w = d.scratch("nodefail-live");
    let job = d
        .client()
        .submit(script_job("#!/bin/sh\nexec sleep 300\n", &w))
        .unwrap();
    let run = d.state_dir().join("run").join(format!("{job}.run"));
    let sup: i32 = wait_for("the run file", || {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&run).ok()?).ok()?;
        v["job_pgid"].as_i64()?;
        Some(v["supervisor_pid"].as_i64()? as i32)
    });
    signal(sup as u32, libc::SIGKILL);
    assert_eq!(d.wait_finished(job).state, JobState::NodeFail);
}

#[test]
fn a_second_flexd_refuses_to_start_on_a_live_socket() {
    let d = Daemon::start(A100);
    let other = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(flex_tests::bin("flexd"))
        .arg("--socket")
        .arg(d.socket())
        .arg("--state-dir")
        .arg(other.path())
        .arg("--topology")
        .arg(A100)
        .arg("--force-topology")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another flexd answers"), "{err}");
}

#[test]
fn sigterm_stops_flexd_and_leaves_its_jobs_running() {
    let mut d = Daemon::start(A100);
    let w = d.scratch("sigterm");
    let script = "#!/bin/sh\ntouch started\nwhile [ ! -e go ]; do sleep 0.05; done\n";
    let job = d.client().submit(script_job(script, &w)).unwrap();
    wait_for("the job to start", || {
        w.join("started").exists().then_some(())
    });
    assert_eq!(d.stop().code(), Some(0));
    assert!(
        !d.socket().exists(),
        "flexd removes its socket when it stops"
    );
    d.restart();
    assert_eq!(
        d.wait_state(job, &[JobState::Running]).state,
        JobState::Running
    );
    std::fs::write(w.join("go"), "").unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
}

#[test]
fn sighup_reloads_the_config() {
    let d = Daemon::start(A100);
    let w = d.scratch("reload");
    let mut c = d.client();
    let first = c
        .submit(script_job("#!/bin/sh\nexec sleep 300\n", &w))
        .unwrap();
    let second = c.submit(script_job("true\n", &w)).unwrap();
    let mut text = std::fs::read_to_string(d.config_path()).unwrap();
    text.push_str("policy = \"fifo\"\nno_such_key = 1\n[limits]\nmax_queued_per_user = 1\n");
    std::fs::write(d.config_path(), text).unwrap();
    d.signal(libc::SIGHUP);
    wait_for("the reload in the log", || {
        let log = d.log();
        (log.contains("reload: policy: Backfill -> Fifo")
            && log.contains("reload: limits")
            && log.contains("`no_such_key`"))
        .then_some(())
    });
    // The new limit holds for the next submission.
    d.wait_finished(second);
    let (kind, msg) = daemon_error(c.submit(script_job("true\n", &w)).map(|_| Response::Pong));
    assert_eq!(kind, ErrorKind::LimitExceeded);
    assert!(msg.contains("max_queued_per_user = 1"), "{msg}");
    c.cancel(vec![first], None).unwrap();
    d.wait_finished(first);
    let next = c.submit(script_job("true\n", &w)).unwrap();
    assert_eq!(d.wait_finished(next).state, JobState::Completed);
}

#[test]
fn the_supervisors_process_killed_is_started_again() {
    let d = Daemon::start(A100);
    let dir = d.scratch("forker");
    let first = d
        .client()
        .submit(script_job("#!/bin/sh\ntrue\n", &dir))
        .unwrap();
    assert_eq!(d.wait_finished(first).state, JobState::Completed);
    // The one `flexd supervise` process of this flexd (its command line names its run dir).
    let run_dir = d.state_dir().join("run");
    let me = format!("supervise\0--run-dir\0{}\0", run_dir.display());
    let forker: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).ends_with(&me) && comm.trim() == "flexd"
        })
        .collect();
    assert_eq!(forker.len(), 1, "{forker:?}");
    signal(forker[0] as u32, libc::SIGKILL);
    wait_for("the supervisors' process gone", || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", forker[0]));
        (stat.is_err() || stat.is_ok_and(|s| s.contains(") Z "))).then_some(())
    });
    let second = d
        .client()
        .submit(script_job("#!/bin/sh\ntrue\n", &dir))
        .unwrap();
    assert_eq!(
        d.wait_finished(second).state,
        JobState::Completed,
        "{}",
        d.log()
    );
}
