//! TestOnly (`flexsub --test-only`): where and when a job would start if it were submitted
//! now, from one pass of the core over the queue with the job added last; queues nothing. The
//! job is checked as a submission is (its QOS, account, limits and dependencies included). A
//! job with a begin time (`--begin`) starts no earlier: it is said to wait for `BeginTime`
//! until then, as sbatch --test-only does.

use super::submit::{admissible, pending};
use super::{err, Peer};
use crate::config::Settings;
use crate::state::State;
use crate::store::StoredAlloc;
use flex_proto::{ErrorKind, JobSpec, Response, WouldStart};
use flex_sched::{self as sched, Reason};
use gres_plugin::JobId;

/// Where and when the job would start if it were submitted now; queues nothing.
pub(crate) fn test_only(
    s: &Settings,
    st: &mut State,
    peer: &Peer,
    spec: JobSpec,
    now: u64,
) -> Response {
    // Everything a submission would be checked against, so "would start" is never followed by
    // a refusal; a limit that would hold the job back shows as the pass's reason.
    let (spec, warnings) = match admissible(s, st, peer, spec) {
        Ok(a) => (a.spec, a.warnings),
        Err(r) => return r,
    };
    let begin = spec.queue.begin.filter(|&t| t > now);
    let answer = match would_start(s, st, spec, now) {
        Response::WouldStart(w) => match begin {
            Some(t) if w.estimated_start.is_none_or(|e| e < t) => {
                Response::WouldStart(Box::new(WouldStart {
                    alloc: None,
                    estimated_start: Some(t),
                    reason: Some("BeginTime".into()),
                    warnings: Vec::new(),
                }))
            }
            _ => Response::WouldStart(w),
        },
        other => other,
    };
    match answer {
        Response::WouldStart(w) => Response::WouldStart(Box::new(WouldStart { warnings, ..*w })),
        other => other,
    }
}

/// Where and when a job of `spec` would start now, from a pass with it last in the queue.
fn would_start(s: &Settings, st: &mut State, spec: JobSpec, now: u64) -> Response {
    let id = JobId(u64::MAX);
    let queue = st.queue_with(Some(pending(id, &spec)));
    let running = st.running_for_core(now);
    let mut d = sched::schedule(&st.cluster, &queue, &running, now, &s.policy);
    // The job is last in the queue: estimate as far as it, within reason.
    let depth = d.pending.len().min(10 * crate::state::ESTIMATE_DEPTH);
    sched::estimate_starts(&st.cluster, &queue, &running, now, &mut d, depth);
    if let Some(start) = d.starts.iter().find(|x| x.job == id) {
        let host = st.cluster.host(start.placement.host);
        return Response::WouldStart(Box::new(WouldStart {
            alloc: Some(StoredAlloc::new(&start.placement, host).view()),
            estimated_start: Some(now),
            reason: None,
            warnings: Vec::new(),
        }));
    }
    match d.pending.into_iter().find(|p| p.job == id) {
        Some(p) => match p.reason {
            Reason::Unsatisfiable(why) => {
                err(ErrorKind::Unsatisfiable, format!("unsatisfiable: {why}"))
            }
            reason => Response::WouldStart(Box::new(WouldStart {
                alloc: None,
                estimated_start: p.estimated_start,
                reason: Some(reason.to_string()),
                warnings: Vec::new(),
            })),
        },
        None => err(
            ErrorKind::Internal,
            "the scheduler did not consider the job",
        ),
    }
}
