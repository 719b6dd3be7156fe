//! flexd end to end: the real daemon on a temporary socket, jobs as real processes, limits,
//! signals, other users (restarts are in restarts.rs).

use flex_proto::{ErrorKind, JobState, QueueFilter, Request, Response};
use flex_tests::{script_job, wait_for, Client, Daemon};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const A100: &str = "a100-40gb-x2.toml";
const NOBODY: u32 = 65534;

fn env_file(path: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn daemon_error(r: Result<Response, flex_tests::ClientError>) -> (ErrorKind, String) {
    match r {
        Err(flex_tests::ClientError::Daemon { kind, message }) => (kind, message),
        other => panic!("expected an error from flexd, got {other:?}"),
    }
}

#[test]
fn a_job_runs_with_its_environment_and_its_exit_is_recorded() {
    let d = Daemon::start(A100);
    let w = d.scratch("env");
    let mut c = d.client();
    let job = c
        .submit(script_job(
            "#!/bin/sh\necho hello from $FLEX_JOB_ID\nenv > env.txt\n",
            &w,
        ))
        .unwrap();
    let v = d.wait_finished(job);
    assert_eq!(
        (v.state, v.exit_code, v.signal),
        (JobState::Completed, Some(0), None)
    );
    assert!(v.start_time.is_some() && v.end_time.is_some());
    let env = env_file(&w.join("env.txt"));
    assert_eq!(env["FLEX_JOB_ID"], job.to_string());
    assert_eq!(env["FLEX_E2E"], "1", "the submitter's environment");
    assert_eq!(env["FLEX_LEAVES"], "1");
    assert!(env["CUDA_VISIBLE_DEVICES"].starts_with("MIG-"));
    assert_eq!(env["MASTER_PORT"], env["FLEX_MASTER_PORT"]);
    assert!(env["MASTER_PORT"].parse::<u16>().unwrap() > 0);
    assert!(!env["FLEX_CPUS"].is_empty());
    assert!(
        !env.contains_key("FLEX_LOG"),
        "flexd's own environment leaked into the job"
    );
    let out = std::fs::read_to_string(w.join(format!("flex-{job}.out"))).unwrap();
    assert_eq!(out, format!("hello from {job}\n"));

    let failing = c
        .submit(script_job("#!/bin/sh\necho oops >&2\nexit 3\n", &w))
        .unwrap();
    let v = d.wait_finished(failing);
    assert_eq!((v.state, v.exit_code), (JobState::Failed, Some(3)));
    let out = std::fs::read_to_string(w.join(format!("flex-{failing}.out"))).unwrap();
    assert_eq!(out, "oops\n", "stderr goes to the output file without -e");
}

#[test]
fn output_patterns_and_script_arguments() {
    let d = Daemon::start(A100);
    let w = d.scratch("patterns");
    let mut spec = script_job("printf '%s|' \"$@\"; echo err >&2\n", &w);
    spec.name = "named".into();
    spec.args = vec!["a b".into(), "c".into()];
    spec.stdout = Some("%x-%j.log".into());
    spec.stderr = Some("err-%u.log".into());
    let job = d.client().submit(spec).unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    let out = std::fs::read_to_string(w.join(format!("named-{job}.log"))).unwrap();
    assert_eq!(out, "a b|c|");
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name;
    assert_eq!(
        std::fs::read_to_string(w.join(format!("err-{user}.log"))).unwrap(),
        "err\n"
    );
}

#[test]
fn a_job_over_its_time_limit_is_timeout() {
    let d = Daemon::start(A100);
    let w = d.scratch("timeout");
    let mut spec = script_job("#!/bin/sh\nexec sleep 300\n", &w);
    spec.request.time_limit_s = 1;
    let job = d.client().submit(spec).unwrap();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Timeout);
    assert_eq!(v.signal, Some(libc::SIGTERM));
}

#[test]
fn cancel_ends_running_and_pending_jobs() {
    let d = Daemon::start(A100);
    let w = d.scratch("cancel");
    let mut c = d.client();
    // All 14 leaves, so the next job waits.
    let mut big = script_job("#!/bin/sh\ntouch started\nexec sleep 300\n", &w);
    big.request = ResourceRequest::leaves(14, 3600);
    let running = c.submit(big).unwrap();
    let pending = c.submit(script_job("true\n", &w)).unwrap();
    d.wait_state(running, &[JobState::Running]);
    wait_for("the job's first command", || {
        w.join("started").exists().then_some(())
    });
    let v = d.wait_state(pending, &[JobState::Pending]);
    assert_eq!(v.reason.as_deref(), Some("Resources"));
    assert!(v.estimated_start.is_some());

    match c.cancel(vec![pending], None).unwrap() {
        Response::Cancelled(o) => assert_eq!(o[0].error, None),
        r => panic!("{r:?}"),
    }
    assert_eq!(d.wait_finished(pending).state, JobState::Cancelled);
    c.cancel(vec![running], None).unwrap();
    let v = d.wait_finished(running);
    assert_eq!(v.state, JobState::Cancelled);
    assert_eq!(v.signal, Some(libc::SIGTERM));

    let (kind, msg) = daemon_error(c.cancel(vec![JobId(4242)], None));
    assert_eq!(kind, ErrorKind::NotFound);
    assert!(msg.contains("job 4242 not found"), "{msg}");
    let (kind, _) = daemon_error(c.cancel(vec![running], None));
    assert_eq!(kind, ErrorKind::InvalidRequest, "already finished");
}

#[test]
fn signal_is_forwarded_to_the_job() {
    let d = Daemon::start(A100);
    let w = d.scratch("signal");
    let script = "#!/bin/sh\ntrap 'echo got usr1 > usr1; exit 0' USR1\ntouch ready\n\
                  while :; do sleep 0.1; done\n";
    let mut c = d.client();
    let job = c.submit(script_job(script, &w)).unwrap();
    wait_for("the trap", || w.join("ready").exists().then_some(()));
    // The job may run before flexd has heard its supervisor's pid: flexd then says to try again.
    wait_for("the signal to be sent", || {
        match c.cancel(vec![job], Some(libc::SIGUSR1)) {
            Ok(_) => Some(()),
            Err(e) if e.to_string().contains("still starting") => None,
            Err(e) => panic!("{e}"),
        }
    });
    let v = d.wait_finished(job);
    assert_eq!((v.state, v.exit_code), (JobState::Completed, Some(0)));
    assert!(w.join("usr1").exists());
}

#[test]
fn a_version_mismatch_names_both_versions() {
    let d = Daemon::start(A100);
    let mut c = Client::connect_raw(d.socket()).unwrap();
    match c.hello(999).unwrap() {
        Response::Error(e) => {
            assert_eq!(e.kind, ErrorKind::VersionMismatch);
            assert!(e.message.contains("version mismatch"), "{}", e.message);
            assert!(e.message.contains("999"), "{}", e.message);
            assert!(
                e.message
                    .contains(&format!("version {}", flex_proto::PROTOCOL_VERSION)),
                "{}",
                e.message
            );
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_six_leaf_job_spreads_three_and_three() {
    let d = Daemon::start(A100);
    let w = d.scratch("spread");
    let mut spec = script_job("#!/bin/sh\nexec sleep 300\n", &w);
    spec.request = ResourceRequest::leaves(6, 3600);
    let mut c = d.client();
    let job = c.submit(spec).unwrap();
    let v = d.wait_state(job, &[JobState::Running]);
    let alloc = v.alloc.unwrap();
    let mut per_gpu: HashMap<u32, usize> = HashMap::new();
    for l in &alloc.leaves {
        *per_gpu.entry(l.gpu).or_default() += 1;
        assert_eq!(l.profile, "1g.5gb");
        assert_eq!(l.share, 1000);
    }
    assert_eq!(per_gpu, HashMap::from([(0, 3), (1, 3)]));
    assert_eq!(alloc.cores.len(), 6);
    c.cancel(vec![job], None).unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Cancelled);
}

#[test]
fn test_only_reports_where_and_when_and_queues_nothing() {
    let d = Daemon::start(A100);
    let w = d.scratch("testonly");
    let mut c = d.client();
    let mut spec = script_job("true\n", &w);
    spec.request = ResourceRequest::leaves(2, 60);
    match c.request(&Request::TestOnly(spec.clone())).unwrap() {
        Response::WouldStart(ws) => {
            assert_eq!(ws.alloc.unwrap().leaves.len(), 2);
            assert_eq!(ws.reason, None);
        }
        r => panic!("{r:?}"),
    }
    let queued = c
        .queue(QueueFilter {
            include_finished: true,
            ..QueueFilter::default()
        })
        .unwrap();
    assert!(queued.is_empty(), "{queued:?}");

    let mut big = script_job("#!/bin/sh\nexec sleep 300\n", &w);
    big.request = ResourceRequest::leaves(14, 3600);
    let holder = c.submit(big).unwrap();
    d.wait_state(holder, &[JobState::Running]);
    match c.request(&Request::TestOnly(spec.clone())).unwrap() {
        Response::WouldStart(ws) => {
            assert!(ws.alloc.is_none());
            assert_eq!(ws.reason.as_deref(), Some("Resources"));
            assert!(
                ws.estimated_start.unwrap() >= d.job(holder).unwrap().start_time.unwrap() + 3600
            );
        }
        r => panic!("{r:?}"),
    }
    spec.request = ResourceRequest::leaves(15, 60);
    let (kind, msg) = daemon_error(c.call(&Request::TestOnly(spec.clone())));
    assert_eq!(kind, ErrorKind::Unsatisfiable, "{msg}");
    let (kind, msg) = daemon_error(c.submit(spec).map(|_| Response::Pong));
    assert_eq!(kind, ErrorKind::Unsatisfiable);
    assert!(msg.starts_with("unsatisfiable: "), "{msg}");
}

#[test]
fn submissions_are_validated_against_the_limits() {
    let d = Daemon::start_with(
        A100,
        "max_time_limit = \"2h\"\n[limits]\nmax_script_bytes = 100\nmax_queued_per_user = 2\n",
    );
    let w = d.scratch("limits");
    let mut c = d.client();
    let mut spec = script_job("true\n", &w);
    spec.request.time_limit_s = 3 * 3600;
    let (kind, msg) = daemon_error(c.submit(spec).map(|_| Response::Pong));
    assert_eq!(kind, ErrorKind::LimitExceeded);
    assert!(msg.contains("max_time_limit"), "{msg}");

    let (kind, msg) = daemon_error(
        c.submit(script_job(&"#".repeat(101), &w))
            .map(|_| Response::Pong),
    );
    assert_eq!(kind, ErrorKind::LimitExceeded);
    assert!(msg.contains("max_script_bytes"), "{msg}");

    let mut rel = script_job("true\n", &w);
    rel.workdir = "relative/dir".into();
    let (kind, _) = daemon_error(c.submit(rel).map(|_| Response::Pong));
    assert_eq!(kind, ErrorKind::InvalidRequest);

    // A time limit of 0 means "the default": one hour here.
    let mut long = script_job("#!/bin/sh\nexec sleep 300\n", &w);
    long.request.time_limit_s = 0;
    long.request.leaves = Some(14);
    let a = c.submit(long).unwrap();
    let b = c.submit(script_job("true\n", &w)).unwrap();
    assert_eq!(d.job(a).unwrap().request.time_limit_s, 3600);
    let (kind, msg) = daemon_error(c.submit(script_job("true\n", &w)).map(|_| Response::Pong));
    assert_eq!(kind, ErrorKind::LimitExceeded);
    assert!(msg.contains("max_queued_per_user = 2"), "{msg}");
    c.cancel(vec![a, b], None).unwrap();
    d.wait_finished(a);
}

#[test]
fn jobs_run_as_their_submitter_and_only_owners_cancel() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to submit as another user");
        return;
    }
    let d = Daemon::start(A100);
    let w = d.scratch("nobody");
    let script = "#!/bin/sh\nid -u > uid\nid -g >> uid\ntouch started\nexec sleep 300\n";
    let spec = script_job(script, &w);
    let job = match d.request_as(NOBODY, NOBODY, &Request::Submit(spec)) {
        Response::Submitted(flex_proto::SubmitReply { job, .. }) => job,
        r => panic!("{r:?}"),
    };
    wait_for("the job to start", || {
        w.join("started").exists().then_some(())
    });
    assert_eq!(
        std::fs::read_to_string(w.join("uid")).unwrap(),
        format!("{NOBODY}\n{NOBODY}\n")
    );
    let out = std::fs::metadata(w.join(format!("flex-{job}.out"))).unwrap();
    assert_eq!(
        (out.uid(), out.gid()),
        (NOBODY, NOBODY),
        "created as the user"
    );
    let v = d.job(job).unwrap();
    assert_eq!((v.uid, v.user.as_str()), (NOBODY, "nobody"));

    // Root's job cannot be cancelled by nobody; nobody's can by root.
    let mine = d
        .client()
        .submit(script_job("#!/bin/sh\nexec sleep 300\n", &w))
        .unwrap();
    match d.request_as(
        NOBODY,
        NOBODY,
        &Request::Cancel(flex_proto::CancelRequest {
            jobs: vec![mine],
            signal: None,
            tasks: vec![],
        }),
    ) {
        Response::Error(e) => {
            assert_eq!(e.kind, ErrorKind::PermissionDenied);
            assert_eq!(
                e.message,
                format!("permission denied: job {mine} belongs to root")
            );
        }
        r => panic!("{r:?}"),
    }
    let mut c = d.client();
    c.cancel(vec![job, mine], None).unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Cancelled);
    assert_eq!(d.wait_finished(mine).state, JobState::Cancelled);
}

#[test]
fn output_files_are_never_written_through_a_planted_symlink() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to submit as another user");
        return;
    }
    let d = Daemon::start(A100);
    let w = d.scratch("symlink");
    let target = d.scratch("protected").join("target");
    std::fs::write(&target, "untouched").unwrap();
    // Writable by the job's user: only O_NOFOLLOW keeps the job from writing through the link.
    std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    std::os::unix::fs::symlink(&target, w.join("out.txt")).unwrap();
    let mut spec = script_job("echo overwritten\n", &w);
    spec.stdout = Some("out.txt".into());
    let job = match d.request_as(NOBODY, NOBODY, &Request::Submit(spec)) {
        Response::Submitted(flex_proto::SubmitReply { job, .. }) => job,
        r => panic!("{r:?}"),
    };
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Failed);
    assert!(
        v.reason
            .as_deref()
            .unwrap_or("")
            .contains("cannot create the output file out.txt"),
        "{v:?}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
}

#[test]
fn a_non_root_flexd_runs_jobs_for_its_own_user_only() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to start flexd as another user");
        return;
    }
    let d = Daemon::start_as(A100, "", NOBODY, NOBODY);
    let w = d.scratch("own-user");
    // Root is another user to this flexd: refused.
    let (kind, msg) = daemon_error(
        d.client()
            .submit(script_job("true\n", &w))
            .map(|_| Response::Pong),
    );
    assert_eq!(kind, ErrorKind::PermissionDenied);
    assert!(
        msg.contains(&format!("flexd runs as uid {NOBODY}")),
        "{msg}"
    );
    // Its own user's job runs, without any change of user.
    let job = match d.request_as(
        NOBODY,
        NOBODY,
        &Request::Submit(script_job("#!/bin/sh\nid -u > uid\nexec sleep 300\n", &w)),
    ) {
        Response::Submitted(flex_proto::SubmitReply { job, .. }) => job,
        r => panic!("{r:?}"),
    };
    wait_for("the job's uid", || {
        let t = std::fs::read_to_string(w.join("uid")).ok()?;
        t.ends_with('\n').then_some(t)
    });
    assert_eq!(
        std::fs::read_to_string(w.join("uid")).unwrap(),
        format!("{NOBODY}\n")
    );
    // Root may still cancel it; flexd signals its own supervisor.
    d.client().cancel(vec![job], None).unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Cancelled);
}
