//! The queue orders and conservative backfilling.

use super::*;

fn limited(id: u64, leaves: u32, limit: u64) -> PendingJob {
    let mut j = job(id, leaves);
    j.request.time_limit_s = limit;
    j
}

fn order_of(q: &[PendingJob], policy: &Policy, now: Time, submit: &[Time], units: u64) -> Vec<u64> {
    let mut v: Vec<&PendingJob> = q.iter().collect();
    let load = Load { units };
    sort_queue(&mut v, policy, now, &|j| submit[j.id.0 as usize - 1], load);
    v.into_iter().map(|j| j.id.0).collect()
}

#[test]
fn shortest_and_longest_first_with_aging_and_priority_first() {
    let q = [limited(1, 1, 3600), limited(2, 1, 600), limited(3, 1, 7200)];
    let submit = [0, 0, 0];
    let p = Policy::backfill(14);
    assert_eq!(order_of(&q, &p, 0, &submit, 14), [1, 2, 3]);
    let sjf = p.ordered(Order::Shortest);
    assert_eq!(order_of(&q, &sjf, 0, &submit, 14), [2, 1, 3]);
    assert_eq!(
        order_of(&q, &p.ordered(Order::Longest), 0, &submit, 14),
        [3, 1, 2]
    );
    // job 3 waited 2 h: at 100% aging it now looks 0 s long and goes first
    assert_eq!(order_of(&q, &sjf, 7200, &[7200, 7200, 0], 14), [3, 2, 1]);
    // without aging it stays last
    let no_aging = Policy {
        aging_pct: 0,
        ..sjf
    };
    assert_eq!(
        order_of(&q, &no_aging, 7200, &[7200, 7200, 0], 14),
        [2, 1, 3]
    );
    // priority comes before any order
    let mut hi = q.clone();
    hi[2].priority = 1;
    assert_eq!(order_of(&hi, &sjf, 0, &submit, 14), [3, 2, 1]);
}

#[test]
fn adaptive_starts_the_critical_path_first_only_when_the_backlog_is_short() {
    // one long job and many short ones on 14 leaves
    let mut q = vec![limited(1, 4, 7200)];
    for id in 2..=30 {
        q.push(limited(id, 4, 1800));
    }
    let submit = vec![0; q.len()];
    let p = Policy::backfill(14).ordered(Order::Adaptive);
    // backlog: (4·7200 + 29·4·1800) / 14 = 16971 s > 7200: a deep queue, shortest first
    let deep = order_of(&q, &p, 0, &submit, 14);
    assert_eq!(deep.last(), Some(&1));
    // five short jobs left: backlog (28800 + 36000) / 14 = 4629 s ≤ 7200: the long one first
    let short: Vec<PendingJob> = q[..6].to_vec();
    let shallow = order_of(&short, &p, 0, &submit[..6], 14);
    assert_eq!(shallow[0], 1);
    assert_eq!(&shallow[1..], [2, 3, 4, 5, 6]);
}

#[test]
fn conservative_does_not_backfill_a_job_that_delays_the_second_reservation() {
    // 14 leaves; a running job holds 10 until t=100
    let (c, run) = world(&["a100-40gb-x2"], &[(10, 100)]);
    assert_eq!(run.len(), 1);
    let q = [
        limited(1, 12, 100),
        limited(2, 14, 100),
        limited(3, 2, 1000),
    ];
    // EASY: job 3 fits now and leaves the head its 12 leaves at t=100, so it starts, and job 2
    // (all 14 leaves) waits until t=1000
    let easy = schedule(&c, &q, &run, 0, &Policy::backfill(14));
    assert_eq!(easy.starts.iter().map(|s| s.job.0).collect::<Vec<_>>(), [3]);
    // conservative: job 1 at 100, job 2 at 200; job 3 would hold 2 leaves at 200, so it waits
    // for its own reservation after job 2
    let cons = schedule(&c, &q, &run, 0, &Policy::conservative(14));
    assert!(cons.starts.is_empty());
    let est: Vec<_> = cons
        .pending
        .iter()
        .map(|p| (p.job.0, p.reason.clone(), p.estimated_start))
        .collect();
    assert_eq!(
        est,
        [
            (1, Reason::Resources, Some(100)),
            (2, Reason::Resources, Some(200)),
            (3, Reason::Reservation, Some(300)),
        ]
    );
    // a short job that ends before job 2's reservation does start
    let q2 = [limited(1, 12, 100), limited(2, 14, 100), limited(3, 2, 150)];
    let cons = schedule(&c, &q2, &run, 0, &Policy::conservative(14));
    assert_eq!(cons.starts.iter().map(|s| s.job.0).collect::<Vec<_>>(), [3]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// No reserved job is delayed: at every reservation's start, with every running and started
    /// job that may still run holding its resources, all reservations active at that time fit
    /// together (in queue order). The head's reservation is FIFO's, and every job started ahead
    /// of a reservation overlaps nothing.
    #[test]
    fn conservative_never_delays_a_reserved_job((hosts, running, queue, window) in arb_world()) {
        let (c, run) = world(&hosts, &running);
        let q = queue_of(&queue);
        let now = 0;
        let d = schedule(&c, &q, &run, now, &Policy::conservative(window));
        let mut after = c.clone();
        for s in &d.starts {
            prop_assert!(after.place_on_check(&s.placement), "start {} overlaps", s.job);
            after.occupy(&s.placement);
        }
        let limit = |id: JobId| q.iter().find(|j| j.id == id).unwrap().request.time_limit_s;
        let reserved: Vec<(Time, Time, &PendingJob)> = d
            .pending
            .iter()
            .filter_map(|p| {
                let t = p.estimated_start?;
                Some((t, t + limit(p.job), q.iter().find(|j| j.id == p.job).unwrap()))
            })
            .collect();
        for &(t, _, r) in &reserved {
            prop_assert!(t >= now);
            let mut at = after.clone();
            for x in &run {
                if x.expected_end <= t { at.release(&x.placement); }
            }
            for s in &d.starts {
                if now + limit(s.job) <= t { at.release(&s.placement); }
            }
            for &(s2, e2, other) in &reserved {
                if s2 <= t && t < e2 {
                    let p = at.place(other);
                    prop_assert!(p.is_some(), "job {} reserved at {} does not fit at {} (checking {})", other.id, s2, t, r.id);
                    at.occupy(&p.unwrap());
                }
            }
        }
        if let Some(res) = &d.reservation {
            let fifo = schedule(&c, &q, &run, now, &Policy::fifo());
            prop_assert_eq!(fifo.reservation.as_ref().map(|r| (r.job, r.start)), Some((res.job, res.start)));
        }
        // what conservative starts, the head's reservation permitting, EASY could start too:
        // EASY never starts fewer jobs ahead of the head
        let fifo = schedule(&c, &q, &run, now, &Policy::fifo());
        prop_assert!(d.starts.len() >= fifo.starts.len());
    }
}
