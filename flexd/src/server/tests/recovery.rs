//! Recovery after a restart: running jobs re-adopted or ended, never a leaf handed out twice.

use super::*;

fn row(id: u64, state: JobState, leaves: u32) -> JobRow {
    JobRow {
        id: JobId(id),
        name: "r".into(),
        uid: 1000,
        gid: 1000,
        user: "ana".into(),
        account: "".into(),
        request: ResourceRequest::leaves(leaves, 600),
        priority: 0,
        state,
        submit_time: NOW - 100,
        start_time: None,
        end_time: None,
        exit_code: None,
        signal: None,
        reason: None,
        alloc: None,
        supervisor_pid: Some(77),
        master_port: None,
        qos: None,
        q: Default::default(),
    }
}

#[test]
fn recovery_readopts_ends_and_never_hands_a_leaf_out_twice() {
    let s = Settings::defaults();
    // Allocations as a previous flexd stored them: two jobs on the same leaves (a corrupt or
    // changed state) must not both be adopted.
    let (first, _) = state(0);
    let j = flex_sched::PendingJob {
        id: JobId(1),
        request: ResourceRequest::leaves(14, 600),
        priority: 0,
        kind: Default::default(),
    };
    let placement = flex_sched::Model::place(&first.cluster, &j).unwrap();
    let stored = crate::store::StoredAlloc::new(&placement, first.cluster.host(placement.host));
    let mut alive = row(1, JobState::Running, 14);
    alive.alloc = Some(Box::new(stored.clone()));
    alive.start_time = Some(NOW - 50);
    let mut twice = row(2, JobState::Running, 14);
    twice.alloc = Some(Box::new(stored.clone()));
    let mut ended = row(3, JobState::Running, 1);
    ended.alloc = Some(Box::new(stored.clone()));
    let mut gone = row(4, JobState::Running, 1);
    gone.alloc = Some(Box::new(stored.clone()));
    let mut never_ran = row(8, JobState::Running, 1);
    never_ran.alloc = Some(Box::new(stored));
    never_ran.start_time = Some(NOW - 5);
    let pending = row(7, JobState::Pending, 1);
    let mut finished = row(6, JobState::Completed, 1);
    finished.end_time = Some(NOW - 10);
    let impossible = row(5, JobState::Pending, 40);

    let (mut st, sent) = state(0);
    let mut gone_seen = Vec::new();
    st.recover(
        vec![
            alive, twice, ended, gone, never_ran, pending, finished, impossible,
        ],
        &Default::default(),
        NOW,
        |r| match r.id.0 {
            1 => Found::Alive(101),
            2 => Found::Alive(102),
            3 => Found::Ended(StatusFile {
                job: 3,
                state: JobState::Failed,
                exit_code: Some(2),
                signal: None,
                end_time: NOW - 20,
                note: None,
                max_rss: None,
                cpu_usec: None,
                oom_killed: false,
            }),
            8 => Found::NeverRan,
            _ => Found::Gone,
        },
        |r| gone_seen.push(r.id),
    );
    let state_of = |st: &State, id: u64| view(st, JobId(id)).state;
    assert_eq!(state_of(&st, 1), JobState::Running);
    assert_eq!(st.job(JobId(1)).unwrap().row.supervisor_pid, Some(101));
    assert_eq!(state_of(&st, 2), JobState::NodeFail);
    assert!(view(&st, JobId(2))
        .reason
        .unwrap()
        .contains("allocation lost"));
    assert_eq!(sent.lock().unwrap().as_slice(), ["supervisor 102 15"]);
    assert_eq!(state_of(&st, 3), JobState::Failed);
    assert_eq!(view(&st, JobId(3)).exit_code, Some(2));
    assert_eq!(state_of(&st, 4), JobState::NodeFail);
    assert_eq!(gone_seen, vec![JobId(4)]);
    assert_eq!(state_of(&st, 6), JobState::Completed);
    // Its start was stored but nothing of it ran: queued again, one restart more.
    let v = view(&st, JobId(8));
    assert_eq!(
        (v.state, v.start_time, v.restarts),
        (JobState::Pending, None, 1)
    );
    assert_eq!(
        st.queued_by(1000),
        4,
        "the adopted job, the two pending ones and the one that never ran"
    );
    // The leaves stay with job 1: the pending job waits; the impossible one fails.
    st.schedule(&s, NOW);
    assert_eq!(state_of(&st, 7), JobState::Pending);
    let v = view(&st, JobId(5));
    assert_eq!(v.state, JobState::Failed);
    assert!(v.reason.unwrap().starts_with("Unsatisfiable: "));
    assert_eq!(st.queued_by(1000), 3);
    assert_eq!(view(&st, JobId(7)).estimated_start, Some(NOW - 50 + 600));
}
