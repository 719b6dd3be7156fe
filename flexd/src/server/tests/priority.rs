//! Priorities, fair share, QOS and limits through the handlers and the state: what is decided
//! before the pass reaches the core, and what the views show of it.

use super::{peer, spec, state, NOW};
use crate::config::Settings;
use crate::fairshare::Qos;
use crate::server::handlers;
use crate::state::{Effect, Outcome, State};
use crate::store::writer::Op;
use flex_proto::{JobState, PrioQuery, Response, ShareQuery};
use flex_sched::fairshare::Weights;
use flex_sched::Order;
use gres_plugin::JobId;

/// Submit `n` jobs of `leaves` for `user` (uid from the name) with `qos`, from id `first`.
fn submit_n(
    s: &Settings,
    st: &mut State,
    user: (u32, &str),
    first: u64,
    n: u64,
    qos: Option<&str>,
    at: u64,
) -> Vec<JobId> {
    let p = peer(user.0, user.1);
    (first..first + n)
        .map(|id| {
            let mut sp = spec(1);
            sp.qos = qos.map(String::from);
            sp.account = Some(user.1.into());
            let job = handlers::submit::prepare_submit(s, st, &p, sp, at).unwrap();
            st.add_submitted(s, JobId(id), job);
            JobId(id)
        })
        .collect()
}

fn running_of(st: &State, uid: u32) -> Vec<JobId> {
    let mut v: Vec<JobId> = st
        .running_jobs()
        .filter(|j| j.row.uid == uid)
        .map(|j| j.row.id)
        .collect();
    v.sort();
    v
}

fn end(st: &mut State, id: JobId, time: u64) {
    let o = Outcome {
        state: JobState::Completed,
        exit_code: Some(0),
        signal: None,
        time,
        note: None,
        max_rss: None,
        cpu_usec: None,
    };
    assert!(st.finish(id, o));
}

/// A submits 200 one-leaf jobs (14 start: the host has 14 leaves), then B submits 5; as A's
/// running jobs end one by one, who gets each freed leaf?
fn light_user_after_heavy(s: &Settings) -> Vec<u32> {
    let (mut st, _) = state(0);
    let (a, b) = ((1001, "alice"), (1002, "bob"));
    submit_n(s, &mut st, a, 1, 200, None, NOW);
    st.schedule(s, NOW);
    assert_eq!(running_of(&st, a.0).len(), 14);
    submit_n(s, &mut st, b, 1000, 5, None, NOW + 60);
    let mut got = Vec::new();
    for (k, id) in running_of(&st, a.0).into_iter().take(5).enumerate() {
        let t = NOW + 120 + k as u64;
        end(&mut st, id, t);
        st.schedule(s, t);
        let started = st.running_jobs().filter(|j| j.row.start_time == Some(t));
        got.extend(started.map(|j| j.row.uid));
    }
    got
}

#[test]
fn fair_share_lets_a_light_user_past_a_heavy_users_backlog() {
    let s = Settings::defaults();
    assert!(
        s.priority.weights.fairshare > 0,
        "fair share is on by default"
    );
    assert_eq!(light_user_after_heavy(&s), [1002; 5]);
}

#[test]
fn all_zero_weights_keep_the_submission_order() {
    let mut s = Settings::defaults();
    s.priority.weights = Weights::default();
    assert_eq!(light_user_after_heavy(&s), [1001; 5]);
}

#[test]
fn a_per_user_qos_limit_holds_jobs_back_with_slurms_reason() {
    let mut s = Settings::defaults();
    s.priority
        .qos
        .get_mut("normal")
        .unwrap()
        .max_running_leaves_per_user = 4;
    let (mut st, _) = state(0);
    let ids = submit_n(&s, &mut st, (1001, "alice"), 1, 10, None, NOW);
    // A burst of passes never lets more than 4 leaves run.
    for t in 0..3 {
        st.schedule(&s, NOW + t);
        assert_eq!(running_of(&st, 1001).len(), 4);
    }
    let v = super::view(&st, ids[9]);
    assert_eq!(v.reason.as_deref(), Some("QOSMaxGRESPerUser"));
    // Another user is not held by alice's limit.
    submit_n(&s, &mut st, (1002, "bob"), 20, 2, None, NOW + 5);
    st.schedule(&s, NOW + 5);
    assert_eq!(running_of(&st, 1002).len(), 2);
    // The running-jobs limit has its own reason.
    let q = s.priority.qos.get_mut("normal").unwrap();
    (q.max_running_leaves_per_user, q.max_running_jobs_per_user) = (0, 4);
    st.schedule(&s, NOW + 6);
    let v = super::view(&st, ids[9]);
    assert_eq!(v.reason.as_deref(), Some("QOSMaxJobsPerUserLimit"));
    // An account limit counts every user of the account.
    s.priority
        .qos
        .get_mut("normal")
        .unwrap()
        .max_running_jobs_per_user = 0;
    s.priority.account_limits.insert("alice".into(), 4);
    st.schedule(&s, NOW + 7);
    assert_eq!(running_of(&st, 1001).len(), 4);
    assert_eq!(
        super::view(&st, ids[9]).reason.as_deref(),
        Some("AssocGrpGRES")
    );
}

#[test]
fn a_higher_qos_jumps_the_queue_and_qos_rules_are_checked_at_submission() {
    let mut s = Settings::defaults();
    let high = Qos {
        priority: 100,
        max_time_limit: 3600,
        users: vec!["bob".into()],
        ..Qos::default()
    };
    s.priority.qos.insert("high".into(), high);
    let (mut st, _) = state(0);
    // Fill the host, then queue alice's normal jobs and bob's one high job.
    submit_n(&s, &mut st, (1001, "alice"), 1, 30, None, NOW);
    st.schedule(&s, NOW);
    let urgent = submit_n(&s, &mut st, (1002, "bob"), 100, 1, Some("high"), NOW + 10)[0];
    let first = running_of(&st, 1001)[0];
    end(&mut st, first, NOW + 20);
    st.schedule(&s, NOW + 20);
    assert_eq!(running_of(&st, 1002), [urgent]);
    // alice may not use it, nor may anyone ask for a longer limit or an unknown QOS.
    let mut sp = spec(1);
    sp.qos = Some("high".into());
    let r = handlers::submit::prepare_submit(&s, &mut st, &peer(1001, "alice"), sp.clone(), NOW);
    assert!(r.unwrap_err() == error_like("user alice may not use qos high"));
    sp.request.time_limit_s = 7200;
    let r = handlers::submit::prepare_submit(&s, &mut st, &peer(1002, "bob"), sp.clone(), NOW);
    assert!(format!("{:?}", r.unwrap_err()).contains("QOSMaxWallDurationPerJobLimit"));
    // One high job per user at a time, pending or running: bob has his.
    sp.request.time_limit_s = 600;
    s.priority
        .qos
        .get_mut("high")
        .unwrap()
        .max_submit_jobs_per_user = 1;
    let r = handlers::submit::prepare_submit(&s, &mut st, &peer(1002, "bob"), sp.clone(), NOW);
    assert!(format!("{:?}", r.unwrap_err()).contains("QOSMaxSubmitJobPerUserLimit"));
    sp.qos = Some("nope".into());
    let r = handlers::submit::prepare_submit(&s, &mut st, &peer(1002, "bob"), sp, NOW);
    assert!(format!("{:?}", r.unwrap_err()).contains("invalid qos"));
}

fn error_like(m: &str) -> Response {
    Response::error(flex_proto::ErrorKind::InvalidRequest, m)
}

#[test]
fn queue_order_aging_reaches_the_core_with_each_jobs_submit_time() {
    let mut s = Settings::defaults();
    s.priority.weights = Weights::default();
    s.policy = s.policy.ordered(Order::Shortest);
    let (mut st, _) = state(0);
    let p = peer(1001, "alice");
    let mut blocker = spec(14);
    blocker.request.time_limit_s = 100;
    let job = handlers::submit::prepare_submit(&s, &mut st, &p, blocker, NOW).unwrap();
    st.add_submitted(&s, JobId(1), job);
    // A long job waits 5000 s; a short one arrives just now. Aged (100 %), the long one's
    // 3600 s limit counts as -1400 s: it goes first. Taken as submitted now, the short would.
    for (id, limit, at) in [(2, 3600, NOW), (3, 600, NOW + 5000)] {
        let mut sp = spec(14);
        sp.request.time_limit_s = limit;
        let job = handlers::submit::prepare_submit(&s, &mut st, &p, sp, at).unwrap();
        st.add_submitted(&s, JobId(id), job);
    }
    end(&mut st, JobId(1), NOW + 5000);
    st.schedule(&s, NOW + 5000);
    assert_eq!(running_of(&st, 1001), [JobId(2)]);
}

#[test]
fn a_finished_run_is_charged_in_slice_seconds_with_its_end() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    let ids = submit_n(&s, &mut st, (1001, "alice"), 1, 2, None, NOW);
    st.schedule(&s, NOW);
    st.take_outbox();
    end(&mut st, ids[0], NOW + 3600);
    let charge = st
        .take_outbox()
        .into_iter()
        .find_map(|e| match e {
            Effect::End(Op::End(e)) => Some(e.charge),
            _ => None,
        })
        .unwrap();
    // One 1g leaf for an hour: 3600 slice-seconds, to the user and to the account.
    assert_eq!(charge.len(), 2);
    assert!(charge.iter().all(|r| r.usage.value == 3600.0));
    // A flexd started on that usage sees it (plus what the running job used so far).
    let (mut again, _) = state(0);
    again.load_usage(&s, charge);
    let rows = match handlers::priority::shares(&s, &again, &ShareQuery::default(), NOW + 3600) {
        Response::Shares(r) => r,
        r => panic!("{r:?}"),
    };
    let alice = rows
        .iter()
        .find(|r| r.user.as_deref() == Some("alice"))
        .unwrap();
    assert_eq!(alice.raw_usage, 1.0);
    assert_eq!(alice.fairshare, 0.5, "all the usage, all the shares");
    // flexprio shows the factors that make up each pending job's priority.
    // 13 leaves are free: bob's first 13 start with their submission, 7 wait.
    submit_n(&s, &mut st, (1002, "bob"), 10, 20, None, NOW + 3600);
    let r = handlers::priority::priority(&s, &st, &PrioQuery::default(), NOW + 3600);
    let Response::Priority(p) = r else {
        panic!("{r:?}")
    };
    assert_eq!(p.jobs.len(), 7);
    assert!(p
        .jobs
        .iter()
        .all(|j| j.user == "bob" && j.fairshare == 10000.0));
}

/// The core's queue takes each pass's priorities in place: pass after pass they come from the
/// jobs' base priorities (never from the last pass's), and with every weight set to 0 again
/// the queue goes back to the priorities as submitted.
#[test]
fn priorities_are_recomputed_from_the_base_each_pass() {
    let mut s = Settings::defaults();
    let (mut st, _) = state(0);
    // 14 fill the host; the rest wait.
    submit_n(&s, &mut st, (1001, "alice"), 1, 20, None, NOW);
    let core = |st: &mut State, s: &Settings| -> Vec<(u64, i64)> {
        let plan = st.plan(s, NOW + 10).expect("jobs are pending");
        plan.queue.iter().map(|p| (p.id.0, p.priority)).collect()
    };
    st.schedule(&s, NOW);
    let first = core(&mut st, &s);
    assert_eq!(first.len(), 6);
    assert!(first.iter().all(|&(_, p)| p > 0), "{first:?}");
    for _ in 0..3 {
        assert_eq!(core(&mut st, &s), first);
    }
    s.priority.weights = Weights::default();
    let bases = core(&mut st, &s);
    assert_eq!(
        bases,
        [(15, 0), (16, 0), (17, 0), (18, 0), (19, 0), (20, 0)]
    );
}

/// `flexcontrol update` of a pending job's priority reaches the next pass's computed priority.
#[test]
fn an_updated_base_priority_reaches_the_next_pass() {
    let s = Settings::defaults();
    let (mut st, _) = state(0);
    submit_n(&s, &mut st, (1001, "alice"), 1, 20, None, NOW);
    st.schedule(&s, NOW);
    let prio = |st: &mut State, id: u64| {
        let plan = st.plan(&s, NOW + 10).expect("jobs are pending");
        let p = plan.queue.iter().find(|p| p.id.0 == id).map(|p| p.priority);
        p.expect("queued")
    };
    let before = prio(&mut st, 20);
    st.update(JobId(20), &[crate::state::control::Change::Priority(5000)])
        .unwrap();
    assert_eq!(prio(&mut st, 20), before + 5000);
}
