//! The scheduling pass: FIFO or aggressive (EASY) backfilling over any [`Model`].

use super::{
    Decisions, Model, Pending, PendingJob, Policy, PolicyKind, Reason, Reservation, RunningJob,
    Start, Time,
};

/// One scheduling pass. `model` is the free state with every running job already occupying
/// its placement; `queue` may be in any order (it is ordered by priority, then id).
pub fn schedule<M: Model>(
    model: &M,
    queue: &[PendingJob],
    running: &[RunningJob<M::Placement>],
    now: Time,
    policy: &Policy,
) -> Decisions<M::Placement> {
    let mut order: Vec<&PendingJob> = queue.iter().collect();
    order.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.id.cmp(&b.id)));

    let mut state = model.clone();
    let mut out = Decisions {
        starts: Vec::new(),
        reservation: None,
        pending: Vec::with_capacity(order.len()),
    };
    // Resources held past now: running jobs plus the ones this pass starts.
    let mut ends: Vec<(Time, M::Placement)> = running
        .iter()
        .map(|r| (r.expected_end.max(now), r.placement.clone()))
        .collect();

    let mut jobs = order.into_iter();
    // Start jobs in order until one does not fit: that one is the head.
    let head = loop {
        let Some(job) = jobs.next() else {
            return out;
        };
        if let Some(p) = state.place(job) {
            state.occupy(&p);
            ends.push((now + job.request.time_limit_s, p.clone()));
            out.starts.push(Start {
                job: job.id,
                placement: p,
            });
            continue;
        }
        match reserve(&state, job, &mut ends, now) {
            Some(shadow) => break (job, shadow),
            None => out.pending.push(Pending {
                job: job.id,
                reason: Reason::Unsatisfiable(
                    state
                        .admit(job)
                        .err()
                        .unwrap_or_else(|| "it does not fit even on idle hardware".into()),
                ),
                estimated_start: None,
            }),
        }
    };
    let (head, (shadow_time, mut shadow)) = head;
    out.reservation = Some(Reservation {
        job: head.id,
        start: shadow_time,
    });
    out.pending.push(Pending {
        job: head.id,
        reason: Reason::Resources,
        estimated_start: Some(shadow_time),
    });

    let window = match policy.kind {
        PolicyKind::Fifo => 0,
        PolicyKind::Backfill if policy.window == 0 => usize::MAX,
        PolicyKind::Backfill => policy.window,
    };
    for (examined, job) in jobs.enumerate() {
        if examined >= window {
            out.pending.push(Pending {
                job: job.id,
                reason: Reason::Priority,
                estimated_start: None,
            });
            continue;
        }
        let reason = match state.place(job) {
            None => Reason::Resources,
            Some(p) => {
                let end = now + job.request.time_limit_s;
                // A job that ends by the reservation never touches it; one that runs past it
                // must leave the head room at the reservation time.
                let ok = end <= shadow_time || {
                    shadow.occupy(&p);
                    let fits = shadow.place(head).is_some();
                    if !fits {
                        shadow.release(&p);
                    }
                    fits
                };
                if ok {
                    state.occupy(&p);
                    out.starts.push(Start {
                        job: job.id,
                        placement: p,
                    });
                    continue;
                }
                Reason::Reservation
            }
        };
        out.pending.push(Pending {
            job: job.id,
            reason,
            estimated_start: None,
        });
    }
    out
}

/// The head's earliest start, from running jobs' expected ends, and the free state at that
/// time; None when it would not fit even with every running job gone.
fn reserve<M: Model>(
    state: &M,
    head: &PendingJob,
    ends: &mut [(Time, M::Placement)],
    now: Time,
) -> Option<(Time, M)> {
    ends.sort_by_key(|(t, _)| *t);
    let mut shadow = state.clone();
    let mut i = 0;
    while i < ends.len() {
        let (t, p) = &ends[i];
        shadow.release(p);
        i += 1;
        if shadow.place_after_release(head, p).is_some() {
            let at = (*t).max(now);
            // Everything that ends at the same moment is free at the reservation too.
            while i < ends.len() && ends[i].0 <= at {
                shadow.release(&ends[i].1);
                i += 1;
            }
            return Some((at, shadow));
        }
    }
    None
}

/// Fill in estimated start times for the first `depth` pending jobs of a pass's decisions
/// (the head already has its reservation), by playing the queue forward in order: every
/// running and newly started job holds its resources until its time limit, and each pending job
/// starts, in queue order, at the first job end after which it fits. Backfilling can only make a
/// job start earlier, and never delays the head, so these are upper bounds for all but the head.
pub fn estimate_starts<M: Model>(
    model: &M,
    queue: &[PendingJob],
    running: &[RunningJob<M::Placement>],
    now: Time,
    decisions: &mut Decisions<M::Placement>,
    depth: usize,
) {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};

    let by_id: HashMap<_, _> = queue.iter().map(|j| (j.id, j)).collect();
    let mut state = model.clone();
    let mut held: Vec<M::Placement> = Vec::new();
    let mut events: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    for r in running {
        events.push(Reverse((r.expected_end.max(now), held.len())));
        held.push(r.placement.clone());
    }
    for s in &decisions.starts {
        let Some(j) = by_id.get(&s.job) else { continue };
        state.occupy(&s.placement);
        events.push(Reverse((now + j.request.time_limit_s, held.len())));
        held.push(s.placement.clone());
    }
    let mut t = now;
    for pending in decisions.pending.iter_mut().take(depth) {
        if matches!(pending.reason, Reason::Unsatisfiable(_)) {
            continue;
        }
        let Some(job) = by_id.get(&pending.job) else {
            continue;
        };
        let mut placed = state.place(job);
        while placed.is_none() {
            let Some(Reverse((end, i))) = events.pop() else {
                break;
            };
            t = t.max(end);
            state.release(&held[i]);
            placed = state.place_after_release(job, &held[i]);
        }
        let Some(p) = placed else { break };
        state.occupy(&p);
        events.push(Reverse((t + job.request.time_limit_s, held.len())));
        held.push(p);
        if pending.estimated_start.is_none() {
            pending.estimated_start = Some(t);
        }
    }
}
