//! The scheduling pass: FIFO, aggressive (EASY) or conservative backfilling over any [`Model`].

use super::order::{sort_queue, Load};
use super::{
    Decisions, Model, Order, Pending, PendingJob, Policy, PolicyKind, Reason, Reservation,
    RunningJob, Start, Time,
};
use gres_plugin::JobId;

/// One scheduling pass. `model` is the free state with every running job already occupying
/// its placement; `queue` may be in any order (it is put in the policy's [`Order`]). Jobs are
/// taken as submitted `now` (no aging); [`schedule_with`] takes their submission times.
pub fn schedule<M: Model>(
    model: &M,
    queue: &[PendingJob],
    running: &[RunningJob<M::Placement>],
    now: Time,
    policy: &Policy,
) -> Decisions<M::Placement> {
    schedule_with(model, queue, running, now, policy, |_| now)
}

/// [`schedule`] with each job's submission time, for the aging of the ordered policies.
pub fn schedule_with<M: Model>(
    model: &M,
    queue: &[PendingJob],
    running: &[RunningJob<M::Placement>],
    now: Time,
    policy: &Policy,
    submitted: impl Fn(&PendingJob) -> Time,
) -> Decisions<M::Placement> {
    let mut order: Vec<&PendingJob> = queue.iter().collect();
    let load = Load {
        units: if policy.order == Order::Adaptive {
            model.units()
        } else {
            0
        },
    };
    sort_queue(&mut order, policy, now, &submitted, load);
    let mut jobs = order.into_iter();
    // Every job is listed: room for all of them from the start.
    let mut out = pass_in_order(model, &mut jobs, running, now, policy, queue.len());
    jobs.for_each(|job| behind_window(job, &mut out));
    out
}

/// One pass over a queue already in the policy's order (as [`sort_queue`] puts it), for a
/// caller that keeps its queue ordered between passes. It reads only the jobs the policy looks
/// at: those that start in order, the head, the unsatisfiable ones before it, and the backfill
/// window behind it. The jobs left in `jobs` after it returns all wait behind the window
/// (reason [`Reason::Priority`], no estimated start) and are not listed in `pending`;
/// [`schedule_with`] is this pass followed by listing them. A pass so costs the same whatever
/// the length of the queue.
pub fn schedule_ordered<'q, M: Model>(
    model: &M,
    jobs: &mut impl Iterator<Item = &'q PendingJob>,
    running: &[RunningJob<M::Placement>],
    now: Time,
    policy: &Policy,
) -> Decisions<M::Placement> {
    pass_in_order(model, jobs, running, now, policy, 0)
}

/// [`schedule_ordered`] with room for `listed` pending jobs.
fn pass_in_order<'q, M: Model>(
    model: &M,
    jobs: &mut impl Iterator<Item = &'q PendingJob>,
    running: &[RunningJob<M::Placement>],
    now: Time,
    policy: &Policy,
    listed: usize,
) -> Decisions<M::Placement> {
    let mut state = model.clone();
    let mut out = Decisions {
        starts: Vec::new(),
        reservation: None,
        pending: Vec::with_capacity(listed),
    };
    // Resources held past now, by index: below `running.len()` a running job, above it a job
    // this pass starts (borrowed, not copied: a pass over thousands of running jobs stays cheap).
    let mut ends: Vec<(Time, usize)> = running
        .iter()
        .enumerate()
        .map(|(i, r)| (r.expected_end.max(now), i))
        .collect();

    let Some(Head {
        job: head,
        reservation,
    }) = start_in_order(&mut state, jobs, running, &mut ends, now, &mut out)
    else {
        return out;
    };
    // Room for the head and the window at once (grown from empty, the list was reallocated
    // several times in each pass over a long queue).
    let window = backfill_window(policy);
    out.pending.reserve(window.min(64) + 1);
    out.pending.push(Pending {
        job: head.id,
        reason: Reason::Resources,
        estimated_start: reservation.as_ref().map(|(t, _)| *t),
    });
    let Some((t, shadow)) = reservation else {
        // With no reservation to protect the head, no job behind it may pass it.
        return out;
    };
    out.reservation = Some(Reservation {
        job: head.id,
        start: t,
    });
    let window = jobs.take(window);
    if policy.kind == PolicyKind::Conservative {
        let plan = Plan {
            running,
            ends,
            now,
            reserved: vec![(t, t + head.request.time_limit_s, head)],
        };
        conservative(state, plan, window, &mut out);
    } else {
        backfill(state, head, (t, shadow), window, now, &mut out);
    }
    out
}

/// The first job of the queue that could not start, with its reservation (when it can start,
/// and the free state then), if it has one.
struct Head<'q, M> {
    job: &'q PendingJob,
    reservation: Option<(Time, M)>,
}

/// Starts jobs in order until one does not fit: that one is the head. Jobs that could never
/// fit are set pending on the way; None when no job is left to be the head.
fn start_in_order<'q, M: Model>(
    state: &mut M,
    jobs: &mut impl Iterator<Item = &'q PendingJob>,
    running: &[RunningJob<M::Placement>],
    ends: &mut Vec<(Time, usize)>,
    now: Time,
    out: &mut Decisions<M::Placement>,
) -> Option<Head<'q, M>> {
    for job in jobs {
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
        if let Some(r) = reserve(state, job, ends, now, held) {
            return Some(Head {
                job,
                reservation: Some(r),
            });
        }
        match state.admit(job) {
            // Fits idle hardware but not even after every known job ends (the model holds
            // something the pass was not told about): it blocks, with no reservation.
            Ok(()) => {
                return Some(Head {
                    job,
                    reservation: None,
                })
            }
            Err(why) => out.pending.push(Pending {
                job: job.id,
                reason: Reason::Unsatisfiable(why),
                estimated_start: None,
            }),
        }
    }
    None
}

/// How many jobs behind a reserved head backfilling examines: none under FIFO, every one for a
/// window of 0.
fn backfill_window(policy: &Policy) -> usize {
    match policy.kind {
        PolicyKind::Fifo => 0,
        _ if policy.window == 0 => usize::MAX,
        _ => policy.window,
    }
}

/// Records a job that backfilling does not examine: it waits for the jobs ahead of it.
fn behind_window<P>(job: &PendingJob, out: &mut Decisions<P>) {
    out.pending.push(Pending {
        job: job.id,
        reason: Reason::Priority,
        estimated_start: None,
    });
}

/// Aggressive (EASY) backfilling over `jobs`, the window behind the head, reserved at `shadow_time`:
/// a job starts now when it fits and either ends by then or leaves the head room at it, checked
/// on `shadow`, the free state at the reservation, which keeps what such jobs take.
fn backfill<'a, M: Model>(
    mut state: M,
    head: &PendingJob,
    (shadow_time, mut shadow): (Time, M),
    jobs: impl Iterator<Item = &'a PendingJob>,
    now: Time,
    out: &mut Decisions<M::Placement>,
) {
    for job in jobs {
        let reason = match state.place(job) {
            None => Reason::Resources,
            Some(p) => {
                let end = now + job.request.time_limit_s;
                // A job that ends by the reservation never touches it; one that runs past it
                // must leave the head room at the reservation time.
                let ok = end <= shadow_time || {
                    shadow.occupy(&p);
                    let fits = shadow.fits(head);
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
}

/// What conservative backfilling plans with: the jobs holding resources now (running, and
/// started by this pass) with their ends, and the reservations made so far (start, end, job).
struct Plan<'r, 'a, P> {
    running: &'r [RunningJob<P>],
    ends: Vec<(Time, usize)>,
    now: Time,
    reserved: Vec<(Time, Time, &'a PendingJob)>,
}

impl<P> Plan<'_, '_, P> {
    fn held<'b>(&'b self, i: usize, starts: &'b [Start<P>]) -> &'b P {
        match i.checked_sub(self.running.len()) {
            None => &self.running[i].placement,
            Some(k) => &starts[k].placement,
        }
    }
}

/// Conservative backfilling over `jobs`, the window behind the head (already reserved in `plan`):
/// each job starts now when that delays no reservation, else gets the earliest reservation
/// that delays none. Feasibility is checked at every instant where the set of holders grows
/// inside the job's run (its own start and each later reservation's start), by placing, on the
/// free state of that instant, every reserved job active then in reservation order and then
/// the job. Between those instants holders only leave.
fn conservative<'a, M: Model>(
    mut state: M,
    mut plan: Plan<'_, 'a, M::Placement>,
    jobs: impl Iterator<Item = &'a PendingJob>,
    out: &mut Decisions<M::Placement>,
) {
    let now = plan.now;
    for job in jobs {
        let limit = job.request.time_limit_s;
        if let Some(p) = state.place(job) {
            let clear = plan
                .reserved
                .iter()
                .filter(|r| r.0 > now && r.0 < now + limit)
                .all(|r| feasible(&state, &plan, &out.starts, r.0, None, Some(&p)));
            let active_now = plan.reserved.iter().any(|r| r.0 <= now);
            if clear && (!active_now || feasible(&state, &plan, &out.starts, now, None, Some(&p))) {
                state.occupy(&p);
                plan.ends
                    .push((now + limit, plan.running.len() + out.starts.len()));
                out.starts.push(Start {
                    job: job.id,
                    placement: p,
                });
                continue;
            }
        }
        let fits_now = state.fits(job);
        let mut times: Vec<Time> = plan
            .ends
            .iter()
            .map(|e| e.0)
            .chain(plan.reserved.iter().map(|r| r.1))
            .filter(|&t| t > now)
            .collect();
        times.sort_unstable();
        times.dedup();
        let mut ends = plan.ends.clone();
        ends.sort_unstable();
        // Sweep the candidate times with one state that loses holders as they end: where the
        // job does not fit even ignoring reservations, nothing more needs checking.
        let mut base = state.clone();
        let mut gone = 0;
        let at = times.into_iter().find(|&t| {
            while gone < ends.len() && ends[gone].0 <= t {
                base.release(plan.held(ends[gone].1, &out.starts));
                gone += 1;
            }
            base.fits(job)
                && holds(base.clone(), &plan, t, Some(job), None)
                && plan
                    .reserved
                    .iter()
                    .filter(|r| r.0 > t && r.0 < t + limit)
                    .all(|r| feasible(&state, &plan, &out.starts, r.0, Some(job), None))
        });
        if let Some(t) = at {
            plan.reserved.push((t, t + limit, job));
        }
        out.pending.push(Pending {
            job: job.id,
            reason: if fits_now {
                Reason::Reservation
            } else {
                Reason::Resources
            },
            estimated_start: at,
        });
    }
}

/// At instant `t`: the free state (holders ending by then gone) holds every reservation active
/// at `t` and then `job` (placed anywhere), or with `held` (a placement from now on) occupied.
fn feasible<M: Model>(
    state: &M,
    plan: &Plan<'_, '_, M::Placement>,
    starts: &[Start<M::Placement>],
    t: Time,
    job: Option<&PendingJob>,
    held: Option<&M::Placement>,
) -> bool {
    let mut s = state.clone();
    for &(end, i) in &plan.ends {
        if end <= t {
            s.release(plan.held(i, starts));
        }
    }
    holds(s, plan, t, job, held)
}

/// [`feasible`] on `s`, the free state at `t` already.
fn holds<M: Model>(
    mut s: M,
    plan: &Plan<'_, '_, M::Placement>,
    t: Time,
    job: Option<&PendingJob>,
    held: Option<&M::Placement>,
) -> bool {
    if let Some(p) = held {
        s.occupy(p);
    }
    for &(start, end, r) in &plan.reserved {
        if start <= t && t < end {
            match s.place(r) {
                Some(p) => s.occupy(&p),
                None => return false,
            }
        }
    }
    job.is_none_or(|j| s.fits(j))
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
        if shadow.fits_after_release(head, held(k)) {
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
