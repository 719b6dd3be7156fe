//! The scheduling pass: FIFO or aggressive (EASY) backfilling over any [`Model`].

use super::{
    Decisions, Model, Pending, PendingJob, Policy, PolicyKind, Reason, Reservation, RunningJob,
    Start, Time,
};
use gres_plugin::JobId;

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
    // Resources held past now, by index: below `running.len()` a running job, above it a job
    // this pass starts (borrowed, not copied: a pass over thousands of running jobs stays cheap).
    let mut ends: Vec<(Time, usize)> = running
        .iter()
        .enumerate()
        .map(|(i, r)| (r.expected_end.max(now), i))
        .collect();

    let mut jobs = order.into_iter();
    // Start jobs in order until one does not fit: that one is the head.
    let (head, reservation) = loop {
        let Some(job) = jobs.next() else {
            return out;
        };
        if let Some(p) = state.place(job) {
            state.occupy(&p);
            ends.push((
                now + job.request.time_limit_s,
                running.len() + out.starts.len(),
            ));
            out.starts.push(Start {
                job: job.id,
                placement: p,
            });
            continue;
        }
        let held = |i: usize| match i.checked_sub(running.len()) {
            None => &running[i].placement,
            Some(k) => &out.starts[k].placement,
        };
        if let Some(r) = reserve(&state, job, &mut ends, now, held) {
            break (job, Some(r));
        }
        match state.admit(job) {
            // Fits idle hardware but not even after every known job ends (the model holds
            // something the pass was not told about): it blocks, with no reservation.
            Ok(()) => break (job, None),
            Err(why) => out.pending.push(Pending {
                job: job.id,
                reason: Reason::Unsatisfiable(why),
                estimated_start: None,
            }),
        }
    };
    out.pending.push(Pending {
        job: head.id,
        reason: Reason::Resources,
        estimated_start: reservation.as_ref().map(|(t, _)| *t),
    });
    let window = match (policy.kind, &reservation) {
        (PolicyKind::Fifo, _) | (_, None) => 0,
        (PolicyKind::Backfill, _) if policy.window == 0 => usize::MAX,
        (PolicyKind::Backfill, _) => policy.window,
    };
    let (shadow_time, mut shadow) = match reservation {
        Some((t, shadow)) => {
            out.reservation = Some(Reservation {
                job: head.id,
                start: t,
            });
            (t, Some(shadow))
        }
        None => (Time::MAX, None),
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
        let shadow = shadow
            .as_mut()
            .expect("a backfill window implies a reservation");
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

/// The head's earliest start, from the expected ends of the jobs holding resources (`held`
/// resolves an index of `ends` to its placement), and the free state at that time; None when
/// it would not fit even with every one of them gone.
fn reserve<'a, M: Model + 'a>(
    state: &M,
    head: &PendingJob,
    ends: &mut [(Time, usize)],
    now: Time,
    held: impl Fn(usize) -> &'a M::Placement,
) -> Option<(Time, M)> {
    ends.sort_unstable();
    let mut shadow = state.clone();
    let mut i = 0;
    while i < ends.len() {
        let (t, k) = ends[i];
        shadow.release(held(k));
        i += 1;
        if shadow.place_after_release(head, held(k)).is_some() {
            let at = t.max(now);
            // Everything that ends at the same moment is free at the reservation too.
            while i < ends.len() && ends[i].0 <= at {
                shadow.release(held(ends[i].1));
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

    // Only the jobs looked at below: those the pass started and the first `depth` pending
    // ones. They come first in a queue given in order, so the walk usually stops early.
    let mut by_id: HashMap<JobId, Option<&PendingJob>> = decisions
        .starts
        .iter()
        .map(|s| s.job)
        .chain(decisions.pending.iter().take(depth).map(|p| p.job))
        .map(|id| (id, None))
        .collect();
    let mut missing = by_id.len();
    for j in queue {
        if missing == 0 {
            break;
        }
        if let Some(slot @ None) = by_id.get_mut(&j.id) {
            *slot = Some(j);
            missing -= 1;
        }
    }
    let mut state = model.clone();
    let mut held: Vec<M::Placement> = Vec::new();
    let mut events: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    for r in running {
        events.push(Reverse((r.expected_end.max(now), held.len())));
        held.push(r.placement.clone());
    }
    for s in &decisions.starts {
        let Some(j) = by_id.get(&s.job).copied().flatten() else {
            continue;
        };
        state.occupy(&s.placement);
        events.push(Reverse((now + j.request.time_limit_s, held.len())));
        held.push(s.placement.clone());
    }
    let mut t = now;
    for pending in decisions.pending.iter_mut().take(depth) {
        if matches!(pending.reason, Reason::Unsatisfiable(_)) {
            continue;
        }
        let Some(job) = by_id.get(&pending.job).copied().flatten() else {
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
