//! The handlers and the state without a socket, a database or processes: a fake signaller
//! records what would have been sent, the outbox what would have been written.

use super::handlers::{self, Peer};
use crate::config::Settings;
use crate::exec::affinity::CpuMap;
use crate::exec::files::StatusFile;
use crate::state::{Effect, Found, Signaller, State};
use crate::store::writer::Op;
use crate::store::JobRow;
use flex_proto::{Env, ErrorKind, JobSpec, JobState, QueueFilter, Request, Response};
use flex_sched::{Cluster, ClusterConfig};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::sync::{Arc, Mutex};

type Sent = Arc<Mutex<Vec<String>>>;

struct FakeSignaller(Sent);

impl Signaller for FakeSignaller {
    fn supervisor(&self, pid: u32, signal: i32) -> Result<(), String> {
        self.0
            .lock()
            .unwrap()
            .push(format!("supervisor {pid} {signal}"));
        Ok(())
    }
    fn job_group(&self, job: JobId, signal: i32) -> Result<(), String> {
        self.0.lock().unwrap().push(format!("job {job} {signal}"));
        Ok(())
    }
}

const NOW: u64 = 1_000_000;

fn state(daemon_uid: u32) -> (State, Sent) {
    let host = gres_plugin::probe::discover_file(std::path::Path::new("a100-40gb-x2.toml"))
        .unwrap()
        .host;
    let cores: Vec<u32> = host.cores.iter().map(|c| c.id.0).collect();
    let (cpus, _) = CpuMap::new(&cores, cores.clone());
    let sent = Sent::default();
    let st = State::new(
        Cluster::new(vec![host], ClusterConfig::default()),
        cpus,
        Box::new(FakeSignaller(sent.clone())),
        daemon_uid,
    );
    (st, sent)
}

fn peer(uid: u32, user: &str) -> Peer {
    Peer {
        uid,
        gid: uid,
        pid: Some(1),
        user: user.into(),
    }
}

fn spec(leaves: u32) -> JobSpec {
    JobSpec {
        name: "t".into(),
        script: "#!/bin/sh\ntrue\n".into(),
        args: vec![],
        workdir: "/tmp".into(),
        submit_dir: "/tmp".into(),
        env: vec![].into(),
        stdout: None,
        stderr: None,
        request: ResourceRequest::leaves(leaves, 600),
        account: None,
        qos: None,
        nice: 0,
        options: Default::default(),
        queue: Default::default(),
        umask: None,
        signal: None,
    }
}

/// Submit as the dispatcher does, with the database's id.
fn submit(s: &Settings, st: &mut State, p: &Peer, id: u64, leaves: u32) -> JobId {
    let job = handlers::submit::prepare_submit(s, st, p, spec(leaves), NOW).unwrap();
    st.add_submitted(s, JobId(id), job);
    JobId(id)
}

fn error(r: Response) -> (ErrorKind, String) {
    match r {
        Response::Error(e) => (e.kind, e.message),
        r => panic!("expected an error, got {r:?}"),
    }
}

fn view(st: &State, id: JobId) -> flex_proto::JobView {
    st.view(st.job(id).unwrap())
}

#[test]
fn submissions_start_with_their_commit_or_by_a_pass() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    // An empty queue: the job is placed when it is prepared and runs once committed.
    let nj = handlers::submit::prepare_submit(&s, &mut st, &ana, spec(6), NOW).unwrap();
    let placed = nj.start.clone().expect("placed with its submission");
    assert_eq!(placed.units.len(), 6);
    let first = JobId(1);
    st.add_submitted(&s, first, nj);
    // Starting: it shows RUNNING once its supervisor runs.
    assert_eq!(view(&st, first).state, JobState::Pending);
    match &st.take_outbox()[..] {
        [Effect::Launch(l)] => {
            assert_eq!(l.job, first);
            assert_eq!(l.units.len(), 6);
            assert_eq!(l.cores.len(), 6);
            assert_eq!(l.cores_per_unit, 1);
            assert_eq!(l.bind_cpus, l.cores);
            assert_eq!(l.time_limit_s, 600);
        }
        o => panic!("{o:?}"),
    }
    st.launched(first, 4242, 1);
    st.take_outbox();
    let v = view(&st, first);
    assert_eq!((v.state, v.start_time), (JobState::Running, Some(NOW)));
    // A job that must wait queues; one behind it waits for a pass even though it fits.
    let big = submit(&s, &mut st, &ana, 2, 14);
    let small = submit(&s, &mut st, &ana, 3, 1);
    assert_eq!(view(&st, big).state, JobState::Pending);
    assert_eq!(view(&st, small).state, JobState::Pending);
    assert!(st.take_dirty());
    assert_eq!(st.schedule(&s, NOW), 1, "backfilled");
    assert_eq!(st.job(small).unwrap().row.state, JobState::Running);
    match &st.take_outbox()[..] {
        [Effect::Start(Op::Start { job, time, alloc }, launch)] => {
            assert_eq!((*job, *time, launch.job), (small, NOW, small));
            assert_eq!(alloc.units.len(), 1);
        }
        o => panic!("{o:?}"),
    }
    // A failed commit gives the placement back.
    let (mut st2, _) = state(0);
    let nj = handlers::submit::prepare_submit(&s, &mut st2, &ana, spec(14), NOW).unwrap();
    assert!(nj.start.is_some());
    st2.abandon_submission(
        nj.uid,
        nj.spec.qos.as_deref(),
        1,
        nj.held,
        nj.start.as_ref(),
    );
    assert_eq!(st2.queued_by(1000), 0);
    assert!(
        handlers::submit::prepare_submit(&s, &mut st2, &ana, spec(14), NOW)
            .unwrap()
            .start
            .is_some()
    );
    // Defaults fill a time limit and cores per leaf of 0.
    let mut sp = spec(1);
    sp.request.time_limit_s = 0;
    sp.request.cores_per_leaf = 0;
    sp.name = String::new();
    let nj = handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap();
    assert_eq!(nj.spec.request.time_limit_s, 3600);
    assert_eq!(nj.spec.request.cores_per_leaf, 1);
    assert_eq!(nj.spec.name, "job");
    assert_eq!(st.queued_by(1000), 4);
}

#[test]
fn submissions_are_refused_with_the_reason() {
    let mut s = Settings::defaults();
    s.limits.max_queued_per_user = 1;
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    let (k, m) =
        error(handlers::submit::prepare_submit(&s, &mut st, &ana, spec(15), NOW).unwrap_err());
    assert_eq!(k, ErrorKind::Unsatisfiable);
    assert!(m.starts_with("unsatisfiable: "), "{m}");
    let mut sp = spec(1);
    sp.request.time_limit_s = 8 * 86400;
    let (k, m) = error(handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap_err());
    assert_eq!(k, ErrorKind::LimitExceeded);
    assert!(m.contains("max_time_limit = 7days"), "{m}");
    let mut sp = spec(1);
    sp.env = vec![("A=B".into(), "x".into())].into();
    let (k, m) = error(handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap_err());
    assert_eq!(k, ErrorKind::InvalidRequest);
    assert!(m.contains("\"A=B\" is not valid"), "{m}");
    // An escaped NUL is still a NUL.
    let mut sp = spec(1);
    sp.env = Env::from_json(r#"[["A","x\u0000y"]]"#.into()).unwrap();
    let (_, m) = error(handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap_err());
    assert!(m.contains("A contains a NUL byte"), "{m}");
    // An environment that is JSON but not pairs.
    let mut sp = spec(1);
    sp.env = Env::from_json(r#"{"A":"x"}"#.into()).unwrap();
    let (k, m) = error(handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap_err());
    assert_eq!(k, ErrorKind::InvalidRequest);
    assert!(m.contains("not a list of [name, value] pairs"), "{m}");
    // A comment is held to the job names' limit; a constraint to the host's features.
    let mut sp = spec(1);
    sp.options.comment = Some("c".repeat(300));
    let (k, m) = error(handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap_err());
    assert_eq!(k, ErrorKind::LimitExceeded);
    assert!(m.contains("the comment is 300 bytes"), "{m}");
    let mut sp = spec(1);
    sp.options.constraint = Some("a100&80gb".into());
    let (k, m) = error(handlers::submit::prepare_submit(&s, &mut st, &ana, sp, NOW).unwrap_err());
    assert_eq!(k, ErrorKind::Unsatisfiable);
    assert!(
        m.contains("40gb") && m.contains("1g.10gb") && m.contains("mig"),
        "{m}"
    );
    submit(&s, &mut st, &ana, 1, 1);
    let (k, m) =
        error(handlers::submit::prepare_submit(&s, &mut st, &ana, spec(1), NOW).unwrap_err());
    assert_eq!(k, ErrorKind::LimitExceeded);
    assert!(m.contains("ana already has 1 jobs"), "{m}");
    // Another user has a limit of their own.
    submit(&s, &mut st, &peer(1001, "bo"), 2, 1);
}

#[test]
fn a_non_root_flexd_runs_jobs_only_for_its_own_user() {
    let s = Settings::defaults();
    let (mut st, _) = state(500);
    let (k, m) = error(
        handlers::submit::prepare_submit(&s, &mut st, &peer(1000, "ana"), spec(1), NOW)
            .unwrap_err(),
    );
    assert_eq!(k, ErrorKind::PermissionDenied);
    assert!(m.contains("flexd runs as uid 500"), "{m}");
    assert!(handlers::submit::prepare_submit(&s, &mut st, &peer(500, "svc"), spec(1), NOW).is_ok());
}

#[test]
fn cancel_checks_ownership_and_reaches_the_supervisor() {
    let s = Settings::defaults();
    let (mut st, sent) = state(0);
    let ana = peer(1000, "ana");
    let bo = peer(1001, "bo");
    let running = submit(&s, &mut st, &ana, 1, 14);
    let pending = submit(&s, &mut st, &ana, 2, 1);
    st.schedule(&s, NOW);
    st.take_outbox();

    let cancel = |st: &mut State, p: &Peer, jobs: Vec<JobId>, signal| {
        let req = flex_proto::CancelRequest {
            jobs,
            signal,
            tasks: vec![],
        };
        handlers::cancel::cancel(st, p, &req, NOW)
    };
    let (k, m) = error(cancel(&mut st, &bo, vec![running], None));
    assert_eq!(k, ErrorKind::PermissionDenied);
    assert_eq!(m, "permission denied: job 1 belongs to ana");
    let (k, m) = error(cancel(&mut st, &ana, vec![JobId(9)], None));
    assert_eq!((k, m.as_str()), (ErrorKind::NotFound, "job 9 not found"));

    // Before the supervisor is known, the cancel waits for it.
    match cancel(&mut st, &ana, vec![running, JobId(9)], None) {
        Response::Cancelled(o) => {
            assert_eq!(o[0].error, None);
            assert_eq!(o[1].error.as_deref(), Some("job 9 not found"));
        }
        r => panic!("{r:?}"),
    }
    assert!(sent.lock().unwrap().is_empty());
    st.launched(running, 4242, 29500);
    assert_eq!(sent.lock().unwrap().as_slice(), ["supervisor 4242 15"]);
    assert_eq!(
        view(&st, running).state,
        JobState::Running,
        "until its status says"
    );

    // Root may cancel anyone's pending job; it ends at once.
    assert!(matches!(
        cancel(&mut st, &peer(0, "root"), vec![pending], None),
        Response::Cancelled(_)
    ));
    assert_eq!(view(&st, pending).state, JobState::Cancelled);
    let ends: Vec<_> = st
        .take_outbox()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Write(Op::End(e)) => Some((e.job, e.to, e.cancelled_by)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![(pending, JobState::Cancelled, Some(0))]);

    // A signal goes to the job's group; a pending or finished job has none.
    assert!(matches!(
        cancel(&mut st, &ana, vec![running], Some(10)),
        Response::Cancelled(_)
    ));
    assert_eq!(sent.lock().unwrap().last().unwrap(), "job 1 10");
    let (k, _) = error(cancel(&mut st, &ana, vec![pending], Some(10)));
    assert_eq!(k, ErrorKind::InvalidRequest);
    let (k, _) = error(cancel(&mut st, &ana, vec![running], Some(99)));
    assert_eq!(k, ErrorKind::InvalidRequest);
}

#[test]
fn a_reported_end_frees_the_leaves_for_the_next_job() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    let a = submit(&s, &mut st, &ana, 1, 14);
    let b = submit(&s, &mut st, &ana, 2, 2);
    st.schedule(&s, NOW);
    let vb = view(&st, b);
    assert_eq!(vb.reason.as_deref(), Some("Resources"));
    assert_eq!(vb.estimated_start, Some(NOW + 600));
    match handlers::leaf_map::leaf_map(&st) {
        Response::LeafMap(h) => {
            assert_eq!(h[0].leaves.len(), 14);
            assert!(h[0].leaves.iter().all(|l| l.free == 0 && l.jobs == vec![a]));
        }
        r => panic!("{r:?}"),
    }
    let status = StatusFile {
        job: 1,
        state: JobState::Completed,
        exit_code: Some(0),
        signal: None,
        end_time: NOW + 5,
        note: None,
        max_rss: None,
        cpu_usec: None,
        oom_killed: false,
    };
    let r = handlers::job_ended::job_ended(&mut st, &ana, a, Ok(Some(status.clone())));
    assert_eq!(
        error(r).0,
        ErrorKind::PermissionDenied,
        "only the supervisor's user"
    );
    assert_eq!(
        handlers::job_ended::job_ended(&mut st, &peer(0, "root"), a, Ok(Some(status.clone()))),
        Response::Pong
    );
    let va = view(&st, a);
    assert_eq!(
        (va.state, va.exit_code, va.end_time),
        (JobState::Completed, Some(0), Some(NOW + 5))
    );
    // Told twice: nothing happens the second time.
    st.take_outbox();
    handlers::job_ended::job_ended(&mut st, &peer(0, "root"), a, Ok(Some(status)));
    assert!(st.take_outbox().is_empty());
    st.schedule(&s, NOW + 5);
    assert_eq!(st.job(b).unwrap().row.state, JobState::Running);
}

#[test]
fn the_queue_view_filters() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let a = submit(&s, &mut st, &peer(1000, "ana"), 1, 14);
    let b = submit(&s, &mut st, &peer(1001, "bo"), 2, 1);
    let c = submit(&s, &mut st, &peer(1001, "bo"), 3, 1);
    let req = flex_proto::CancelRequest {
        jobs: vec![c],
        signal: None,
        tasks: vec![],
    };
    handlers::cancel::cancel(&mut st, &peer(1001, "bo"), &req, NOW);
    st.schedule(&s, NOW);
    let ids = |st: &mut State, f: QueueFilter| -> Vec<JobId> {
        match handlers::queue::queue(st, &f) {
            Response::Queue(flex_proto::QueuePage { jobs, .. }) => {
                jobs.into_iter().map(|j| j.id).collect()
            }
            r => panic!("{r:?}"),
        }
    };
    assert_eq!(ids(&mut st, QueueFilter::default()), vec![a, b]);
    let all = QueueFilter {
        include_finished: true,
        ..QueueFilter::default()
    };
    assert_eq!(ids(&mut st, all), vec![a, b, c]);
    let bo = QueueFilter {
        users: vec!["bo".into()],
        ..QueueFilter::default()
    };
    assert_eq!(ids(&mut st, bo), vec![b]);
    let by_uid = QueueFilter {
        users: vec!["1000".into()],
        ..QueueFilter::default()
    };
    assert_eq!(ids(&mut st, by_uid), vec![a]);
    let cancelled = QueueFilter {
        states: vec![JobState::Cancelled],
        ..QueueFilter::default()
    };
    assert_eq!(ids(&mut st, cancelled), vec![c]);
    let named = QueueFilter {
        jobs: vec![c, a],
        ..QueueFilter::default()
    };
    assert_eq!(ids(&mut st, named), vec![a, c]);
    st.prune_finished(NOW + 1, &Settings::defaults().limits);
    assert!(st.job(c).is_none());
}

#[test]
fn long_listings_come_in_pages_that_go_on_after_the_last_job() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    let n = 2 * handlers::queue::PAGE as u64 + 1;
    let first = submit(&s, &mut st, &ana, 1, 14);
    for id in 2..=n {
        submit(&s, &mut st, &ana, id, 1);
    }
    st.schedule(&s, NOW);
    st.launched(first, 4242, 1);
    for rows in [false, true] {
        let f = QueueFilter::default();
        let mut req = Some(if rows {
            Request::QueueRows(f)
        } else {
            Request::Queue(f)
        });
        let (mut ids, mut pages) = (Vec::new(), 0);
        while let Some(r) = req.take() {
            let filter = match &r {
                Request::Queue(f) | Request::QueueRows(f) => Some(f.clone()),
                _ => None,
            };
            let page = match &r {
                Request::Queue(f) => handlers::queue::queue(&st, f),
                Request::QueueRows(f) => handlers::queue::queue_rows(&st, f, NOW + 65),
                r => panic!("{r:?}"),
            };
            match &page {
                Response::Queue(flex_proto::QueuePage { jobs, next }) => {
                    ids.extend(jobs.iter().map(|j| j.id));
                    assert_eq!(*next, next.and(jobs.last().map(|j| j.id)));
                }
                Response::QueueRows(flex_proto::RowsPage { rows, .. }) => {
                    let rows = rows.rows().unwrap();
                    if pages == 0 {
                        // The running job, then one a pass left waiting.
                        assert_eq!((rows[0].id, rows[0].elapsed_s), (first, 65));
                        assert_eq!(rows[0].host.as_deref(), Some("a100-testbed"));
                        assert_eq!(rows[1].reason.as_deref(), Some("Resources"));
                        assert!(rows[1].start.is_some());
                    }
                    ids.extend(rows.iter().map(|r| r.id));
                }
                r => panic!("{r:?}"),
            }
            pages += 1;
            req = handlers::queue::next_page(filter, &page);
        }
        assert_eq!(pages, 3, "rows: {rows}");
        assert_eq!(ids, (1..=n).map(JobId).collect::<Vec<_>>(), "rows: {rows}");
    }
}

#[test]
fn test_only_answers_without_queueing() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    match handlers::test_only::test_only(&s, &mut st, &ana, spec(6), NOW) {
        Response::WouldStart(w) => {
            assert_eq!(w.alloc.unwrap().leaves.len(), 6);
            assert_eq!(w.estimated_start, Some(NOW));
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(st.pending_count(), 0);
    assert_eq!(st.queued_by(1000), 0);
    assert!(st.take_outbox().is_empty());
    submit(&s, &mut st, &ana, 1, 14);
    st.schedule(&s, NOW);
    match handlers::test_only::test_only(&s, &mut st, &ana, spec(1), NOW) {
        Response::WouldStart(w) => {
            assert!(w.alloc.is_none());
            assert_eq!(w.estimated_start, Some(NOW + 600));
            assert_eq!(w.reason.as_deref(), Some("Resources"));
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn test_only_waits_for_a_begin_time() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    let mut later = spec(1);
    later.queue.begin = Some(NOW + 3600);
    match handlers::test_only::test_only(&s, &mut st, &ana, later, NOW) {
        Response::WouldStart(w) => {
            assert!(w.alloc.is_none());
            assert_eq!(w.estimated_start, Some(NOW + 3600));
            assert_eq!(w.reason.as_deref(), Some("BeginTime"));
        }
        r => panic!("{r:?}"),
    }
    // A begin time already past changes nothing.
    let mut past = spec(1);
    past.queue.begin = Some(NOW - 10);
    match handlers::test_only::test_only(&s, &mut st, &ana, past, NOW) {
        Response::WouldStart(w) => {
            assert_eq!(w.alloc.unwrap().leaves.len(), 1);
            assert_eq!(w.estimated_start, Some(NOW));
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn pending_jobs_behind_the_head_get_estimated_starts() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ana = peer(1000, "ana");
    submit(&s, &mut st, &ana, 1, 14);
    let b = submit(&s, &mut st, &ana, 2, 14);
    let c = submit(&s, &mut st, &ana, 3, 2);
    st.schedule(&s, NOW);
    let limit = view(&st, b).request.time_limit_s;
    assert_eq!(view(&st, b).estimated_start, Some(NOW + limit));
    // c waits behind b (in queue order) until b's limit too
    assert_eq!(view(&st, c).estimated_start, Some(NOW + 2 * limit));
}

#[test]
fn answers_are_framed_as_the_protocol_frames_them() {
    let answers = [
        Response::Pong,
        Response::Submitted(flex_proto::SubmitReply {
            job: JobId(7),
            warnings: Vec::new(),
        }),
        Response::error(ErrorKind::LimitExceeded, "max_frame_bytes = 1 \u{e9}\"\n"),
        Response::Queue(flex_proto::QueuePage {
            jobs: Vec::new(),
            next: None,
        }),
        Response::QueueRows(flex_proto::RowsPage {
            rows: flex_proto::QueueRows::new(std::iter::empty()),
            next: Some(JobId(3)),
        }),
    ];
    for r in answers {
        let framed = super::conn::encode(&r).unwrap();
        assert_eq!(framed, flex_proto::encode(&r));
        let (back, used) = flex_proto::decode::<Response>(&framed, framed.len())
            .unwrap()
            .unwrap();
        assert_eq!((back, used), (r, framed.len()));
    }
}

#[path = "tests/priority.rs"]
mod priority;
mod recovery;
