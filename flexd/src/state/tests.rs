//! Arrays, dependencies, holds and requeues in the state, without a socket or a database: what
//! enters the core's queue, what the outbox says, what flexq would show.

use super::{Effect, Outcome, Signaller, State};
use crate::config::Settings;
use crate::exec::affinity::CpuMap;
use crate::server::handlers::{submit, Peer};
use crate::store::writer::Op;
use flex_proto::{ArraySpec, Dependency, JobSpec, JobState, QueueOptions};
use flex_sched::{Cluster, ClusterConfig};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::sync::{Arc, Mutex};

const NOW: u64 = 1_000_000;

struct Recorded(Arc<Mutex<Vec<String>>>);

impl Signaller for Recorded {
    fn supervisor(&self, pid: u32, signal: i32) -> Result<(), String> {
        self.0.lock().unwrap().push(format!("{pid} {signal}"));
        Ok(())
    }
    fn job_group(&self, _: JobId, _: i32) -> Result<(), String> {
        Ok(())
    }
}

fn state() -> (State, Arc<Mutex<Vec<String>>>) {
    let host = gres_plugin::probe::discover_file(std::path::Path::new("a100-40gb-x2.toml"))
        .unwrap()
        .host;
    let cores: Vec<u32> = host.cores.iter().map(|c| c.id.0).collect();
    let (cpus, _) = CpuMap::new(&cores, cores.clone());
    let sent = Arc::new(Mutex::new(Vec::new()));
    let cluster = Cluster::new(vec![host], ClusterConfig::default());
    let st = State::new(cluster, cpus, Box::new(Recorded(sent.clone())), 0);
    (st, sent)
}

fn ana() -> Peer {
    Peer {
        uid: 1000,
        gid: 1000,
        pid: None,
        user: "ana".into(),
    }
}

fn spec(leaves: u32, queue: QueueOptions) -> JobSpec {
    JobSpec {
        name: "j".into(),
        script: "true".into(),
        args: vec![],
        workdir: "/".into(),
        submit_dir: "/".into(),
        env: vec![].into(),
        stdout: None,
        stderr: None,
        request: ResourceRequest::leaves(leaves, 600),
        account: None,
        queue: Box::new(queue),
        umask: None,
        signal: None,
        qos: None,
        nice: 0,
        options: Default::default(),
    }
}

/// Submit as ana and commit at once with id `id`.
fn add(s: &Settings, st: &mut State, id: u64, leaves: u32, q: QueueOptions) -> JobId {
    let nj = submit::prepare_submit(s, st, &ana(), spec(leaves, q), NOW).unwrap();
    st.add_submitted(s, JobId(id), nj);
    JobId(id)
}

fn array(a: &str) -> QueueOptions {
    QueueOptions {
        array: Some(ArraySpec::parse(a).unwrap()),
        ..QueueOptions::default()
    }
}

fn after(d: &str) -> QueueOptions {
    QueueOptions {
        dependency: Some(Dependency::parse(d).unwrap()),
        ..QueueOptions::default()
    }
}

fn end(st: &mut State, id: JobId, state: JobState) {
    let o = Outcome {
        state,
        exit_code: Some(i32::from(state != JobState::Completed)),
        signal: None,
        time: NOW + 1,
        note: None,
        max_rss: None,
        cpu_usec: None,
    };
    assert!(st.finish(id, o));
}

fn state_of(st: &State, id: JobId) -> (JobState, Option<String>) {
    let v = st.view(st.job(id).unwrap());
    (v.state, v.reason)
}

#[test]
fn an_array_is_a_few_queue_entries_and_keeps_to_its_throttle() {
    let s = Settings::defaults();
    let (mut st, _) = state();
    // 1,000 tasks of a whole host (14 leaves): at most one runs, so two enter the queue.
    add(&s, &mut st, 1, 14, array("0-999"));
    assert_eq!(st.pending_count(), 2);
    assert_eq!(st.schedule(&s, NOW), 1);
    assert_eq!(
        st.pending_count(),
        2,
        "the next task took the started one's place"
    );
    let (mut st, _) = state();
    let first = add(&s, &mut st, 1, 1, array("0-99%3"));
    assert_eq!(st.schedule(&s, NOW), 3);
    assert_eq!(st.schedule(&s, NOW), 0, "the throttle holds the rest back");
    assert_eq!(
        state_of(&st, JobId(50)).1.as_deref(),
        Some("JobArrayTaskLimit")
    );
    end(&mut st, first, JobState::Completed);
    assert_eq!(st.schedule(&s, NOW), 1);
    assert_eq!(st.running_jobs().count(), 3);
}

#[test]
fn dependencies_decide_eligibility_before_the_pass() {
    let mut s = Settings::defaults();
    let (mut st, _) = state();
    let a = add(&s, &mut st, 1, 14, QueueOptions::default());
    let b = add(&s, &mut st, 2, 1, after("afterok:1"));
    let c = add(&s, &mut st, 3, 1, after("afterany:1?afterok:2"));
    assert_eq!(st.schedule(&s, NOW), 0, "a started with its submission");
    assert_eq!(state_of(&st, b).1.as_deref(), Some("Dependency"));
    end(&mut st, a, JobState::Completed);
    assert_eq!(st.schedule(&s, NOW), 2, "b and c");
    // A failed dependee: never, and what waits on that job never either.
    let d = add(&s, &mut st, 4, 14, QueueOptions::default());
    let e = add(&s, &mut st, 5, 1, after("afterok:4"));
    let f = add(&s, &mut st, 6, 1, after("afterok:5"));
    st.schedule(&s, NOW);
    st.schedule(&s, NOW);
    end(&mut st, b, JobState::Completed);
    end(&mut st, c, JobState::Completed);
    st.schedule(&s, NOW);
    end(&mut st, d, JobState::Failed);
    st.schedule(&s, NOW);
    let never = Some("DependencyNeverSatisfied".to_string());
    assert_eq!(state_of(&st, e), (JobState::Pending, never.clone()));
    assert_eq!(state_of(&st, f), (JobState::Pending, never));
    // With kill_invalid_depend they are cancelled, and say why.
    s.kill_invalid_depend = true;
    st.schedule(&s, NOW);
    let g = add(&s, &mut st, 7, 1, after("afternotok:1"));
    st.schedule(&s, NOW);
    let (state, why) = state_of(&st, g);
    assert_eq!(state, JobState::Cancelled);
    assert!(why
        .unwrap()
        .starts_with("DependencyNeverSatisfied: job 1 completed"));
}

#[test]
fn holds_and_requeues_keep_the_job_and_its_count() {
    let s = Settings::defaults();
    let (mut st, sent) = state();
    let held = QueueOptions {
        hold: true,
        ..QueueOptions::default()
    };
    let a = add(&s, &mut st, 1, 1, held);
    assert_eq!(st.schedule(&s, NOW), 0);
    assert_eq!(state_of(&st, a).1.as_deref(), Some("JobHeldUser"));
    st.set_hold(a, true, true).unwrap();
    let e = st.set_hold(a, false, false).unwrap_err();
    assert!(e.contains("job 1") && e.contains("only root"), "{e}");
    st.set_hold(a, false, true).unwrap();
    assert_eq!(st.schedule(&s, NOW), 1);
    // Requeue a running job: its supervisor is told, its end puts it back.
    st.launched(a, 4242, 1);
    st.take_outbox();
    st.requeue(a, false, NOW).unwrap();
    assert_eq!(sent.lock().unwrap().last().unwrap(), "4242 15");
    end(&mut st, a, JobState::Cancelled);
    let out = st.take_outbox();
    assert!(out.iter().any(|e| matches!(e,
        Effect::Write(Op::Requeue { job, from: JobState::Cancelled, .. }) if *job == a)));
    let v = st.view(st.job(a).unwrap());
    assert_eq!((v.state, v.restarts), (JobState::Pending, 1));
    assert_eq!(st.queued_by(1000), 1);
    assert_eq!(st.schedule(&s, NOW), 1, "it runs again");
}

#[test]
fn aftercorr_lets_each_task_follow_its_own() {
    let s = Settings::defaults();
    let (mut st, _) = state();
    // A: tasks 1, 2, 3 (indexes 0-2), a whole host each, so they run one at a time.
    add(&s, &mut st, 1, 14, array("0-2"));
    st.schedule(&s, NOW);
    let b = QueueOptions {
        dependency: Some(Dependency::parse("aftercorr:1").unwrap()),
        ..array("0-2")
    };
    add(&s, &mut st, 4, 1, b);
    st.schedule(&s, NOW);
    let reason = |st: &State, id: u64| state_of(st, JobId(id)).1;
    assert_eq!(reason(&st, 4).as_deref(), Some("Dependency"));
    end(&mut st, JobId(1), JobState::Completed);
    st.schedule(&s, NOW);
    // B_0 may start (it is in the core's queue, behind A_1), B_1 still waits for A_1.
    assert!(st.pending.contains(JobId(4)) && !st.pending.contains(JobId(5)));
    assert_eq!(reason(&st, 5).as_deref(), Some("Dependency"));
    end(&mut st, JobId(2), JobState::Failed);
    st.schedule(&s, NOW);
    assert_eq!(reason(&st, 5).as_deref(), Some("DependencyNeverSatisfied"));
    assert_eq!(reason(&st, 6).as_deref(), Some("Dependency"));
}

#[test]
fn a_job_waits_for_its_begin_time_held_or_not() {
    let s = Settings::defaults();
    let (mut st, _) = state();
    let at = |t: u64, hold: bool| QueueOptions {
        begin: Some(t),
        hold,
        ..QueueOptions::default()
    };
    let a = add(&s, &mut st, 1, 1, at(NOW + 60, false));
    let b = add(&s, &mut st, 2, 1, at(NOW + 60, true));
    let c = add(&s, &mut st, 3, 1, array("0-1"));
    assert_eq!(st.schedule(&s, NOW), 2, "only the array's tasks start");
    assert_eq!(state_of(&st, a).1.as_deref(), Some("BeginTime"));
    assert_eq!(state_of(&st, b).1.as_deref(), Some("JobHeldUser"));
    // Releasing the hold does not start it before its time.
    st.set_hold(b, false, false).unwrap();
    assert_eq!(st.schedule(&s, NOW + 59), 0);
    assert_eq!(state_of(&st, b).1.as_deref(), Some("BeginTime"));
    assert_eq!(st.schedule(&s, NOW + 60), 2, "both start at their time");
    // An array task's begin time counts as well; one in the past is no wait.
    let d = QueueOptions {
        begin: Some(NOW + 120),
        ..array("0-1")
    };
    let d = add(&s, &mut st, 10, 1, d);
    let e = add(&s, &mut st, 12, 1, at(NOW - 5, false));
    assert_eq!(
        st.job(e).unwrap().row.state,
        JobState::Running,
        "started with its commit"
    );
    assert_eq!(st.schedule(&s, NOW + 61), 0);
    assert_eq!(state_of(&st, d).1.as_deref(), Some("BeginTime"));
    assert_eq!(st.schedule(&s, NOW + 120), 2);
    assert_eq!(st.job(c).unwrap().row.state, JobState::Running);
}

#[test]
fn time_limit_mails_are_sent_once_per_share_and_run() {
    let s = Settings::defaults();
    let (mut st, _) = state();
    let mut sp = spec(1, QueueOptions::default());
    sp.options.mail = Some(flex_proto::Mail {
        events: flex_proto::MailEvents(
            flex_proto::MailEvents::TIME_LIMIT_50 | flex_proto::MailEvents::TIME_LIMIT_80,
        ),
        user: Some("ana@example.org".into()),
    });
    let nj = submit::prepare_submit(&s, &mut st, &ana(), sp, NOW).unwrap();
    st.add_submitted(&s, JobId(1), nj);
    // Started with its commit at NOW, a 600 s limit: 50% at +300, 80% at +480.
    assert_eq!(st.job(JobId(1)).unwrap().row.state, JobState::Running);
    assert!(crate::mail::time_limit_mails(&mut st, NOW + 299).is_empty());
    let m = crate::mail::time_limit_mails(&mut st, NOW + 300);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].to, "ana@example.org");
    assert!(
        m[0].subject.ends_with("Reached 50% of its time limit"),
        "{m:?}"
    );
    assert!(crate::mail::time_limit_mails(&mut st, NOW + 301).is_empty());
    // Past 80% at once: one mail, for 80%.
    let m = crate::mail::time_limit_mails(&mut st, NOW + 590);
    assert_eq!(m.len(), 1);
    assert!(m[0].subject.contains("80%"), "{m:?}");
    assert!(crate::mail::time_limit_mails(&mut st, NOW + 599).is_empty());
}

#[test]
fn mails_follow_the_effects_a_job_asked_for() {
    use flex_proto::MailEvents as M;
    let s = Settings::defaults();
    let (mut st, _) = state();
    let mut sp = spec(1, QueueOptions::default());
    sp.options.mail = Some(flex_proto::Mail {
        events: M(M::BEGIN | M::REQUEUE | M::TIME_LIMIT),
        user: None,
    });
    let nj = submit::prepare_submit(&s, &mut st, &ana(), sp, NOW).unwrap();
    st.add_submitted(&s, JobId(1), nj);
    let mails = |st: &mut State| -> Vec<String> {
        let out = st.take_outbox();
        out.iter()
            .filter_map(|e| crate::mail::for_effect(e, |id| st.job(id)))
            .map(|m| format!("{} {}", m.to, m.subject))
            .collect()
    };
    assert_eq!(mails(&mut st), ["ana Flex Job_id=1 Name=j Began"]);
    st.launched(JobId(1), 4242, 1);
    st.requeue(JobId(1), false, NOW).unwrap();
    end(&mut st, JobId(1), JobState::Cancelled);
    // A cancelled run asks for no END mail here; the requeue does.
    assert_eq!(mails(&mut st), ["ana Flex Job_id=1 Name=j Requeued"]);
    assert_eq!(st.schedule(&s, NOW + 1), 1);
    assert_eq!(mails(&mut st), ["ana Flex Job_id=1 Name=j Began"]);
    st.launched(JobId(1), 4243, 2);
    end(&mut st, JobId(1), JobState::Timeout);
    let m = mails(&mut st);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].contains("Name=j Reached time limit, Run time"),
        "{m:?}"
    );
    assert!(m[0].ends_with("TIMEOUT, ExitCode 1"), "{m:?}");
}

#[test]
fn a_start_that_could_not_be_recorded_is_queued_again_and_shows_running_only_once_launched() {
    let s = Settings::defaults();
    let (mut st, sent) = state();
    // Every leaf, so that nothing else could start on them meanwhile.
    let a = add(&s, &mut st, 1, 14, QueueOptions::default());
    let b = add(&s, &mut st, 2, 1, QueueOptions::default());
    // Started with its commit, but its supervisor does not run yet.
    st.schedule(&s, NOW);
    assert_eq!(st.job(a).unwrap().row.state, JobState::Running);
    assert_eq!(
        state_of(&st, a),
        (JobState::Pending, Some("Starting".into()))
    );
    assert_eq!(st.view(st.job(a).unwrap()).start_time, None);
    st.launched(a, 4242, 1);
    assert_eq!(state_of(&st, a).0, JobState::Running);
    st.take_outbox();

    // Its supervisor could not write the run file: nothing ran, the leaves are free (the
    // next job starts on one), and it waits to be tried again.
    end(&mut st, a, JobState::Pending);
    let out = st.take_outbox();
    assert!(out.iter().any(|e| matches!(e,
        Effect::End(Op::Requeue { job, from: JobState::Running, .. }) if *job == a)));
    assert!(!out.iter().any(|e| matches!(e, Effect::End(Op::End(_)))));
    let v = st.view(st.job(a).unwrap());
    assert_eq!(
        (v.state, v.reason.as_deref(), v.restarts),
        (JobState::Pending, Some("BeginTime"), 1)
    );
    assert_eq!(st.queued_by(1000), 2);
    assert_eq!(st.schedule(&s, NOW + 2), 1);
    assert_eq!(st.job(b).unwrap().row.state, JobState::Running);
    assert_eq!(st.job(a).unwrap().row.state, JobState::Pending);

    // Cancelled while its start is tried again: it ends CANCELLED, not queued once more.
    end(&mut st, b, JobState::Completed);
    assert_eq!(st.schedule(&s, NOW + 10), 1);
    st.launched(a, 4243, 2);
    st.cancel(a, 0, NOW + 10).unwrap();
    assert_eq!(sent.lock().unwrap().last().unwrap(), "4243 15");
    end(&mut st, a, JobState::Pending);
    assert_eq!(st.job(a).unwrap().row.state, JobState::Cancelled);
}
