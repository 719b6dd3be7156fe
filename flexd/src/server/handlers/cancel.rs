//! Cancel (flexcancel): end jobs, or send them a signal. Users act on their own jobs only; root
//! on all.

use super::{err, Peer};
use crate::state::State;
use flex_proto::{CancelOutcome, ErrorKind, JobRef, Response};
use gres_plugin::JobId;

/// Cancel jobs, or send them a signal. Users may cancel only their own jobs; root any. Each
/// job gets an outcome; when every job failed, the answer is the first failure's error.
pub(crate) fn cancel(
    st: &mut State,
    peer: &Peer,
    req: &flex_proto::CancelRequest,
    now: u64,
) -> Response {
    let (jobs, signal) = (expand(st, req), req.signal);
    if jobs.is_empty() {
        return err(ErrorKind::InvalidRequest, "no job to cancel was given");
    }
    if let Some(n) = signal {
        if nix::sys::signal::Signal::try_from(n).is_err() {
            return err(
                ErrorKind::InvalidRequest,
                format!("{n} is not a signal number"),
            );
        }
    }
    let mut outcomes = Vec::with_capacity(jobs.len());
    let mut first: Option<(ErrorKind, String)> = None;
    for (id, shown) in jobs {
        let r = cancel_one(st, peer, id, signal, now, &shown);
        if let Err((kind, m)) = &r {
            first.get_or_insert((*kind, m.clone()));
        }
        outcomes.push(CancelOutcome {
            job: id,
            error: r.err().map(|(_, m)| m),
        });
    }
    match first {
        Some((kind, _)) if outcomes.iter().all(|o| o.error.is_some()) => {
            let all: Vec<String> = outcomes.into_iter().filter_map(|o| o.error).collect();
            err(kind, all.join("; "))
        }
        _ => Response::Cancelled(outcomes),
    }
}

/// The jobs named: a plain id that is an array's names every task of it (those not finished),
/// a task reference the tasks it names; each with the name it is reported under. A name that
/// matches nothing stays, to be reported as not found.
fn expand(st: &State, req: &flex_proto::CancelRequest) -> Vec<(JobId, String)> {
    let refs = req.jobs.iter().map(|&job| JobRef { job, tasks: None });
    let mut out = Vec::new();
    for r in refs.chain(req.tasks.iter().cloned()) {
        let ids = st.resolve(&r);
        let live: Vec<JobId> = ids
            .iter()
            .copied()
            .filter(|id| st.job(*id).is_some_and(|j| !j.row.state.is_finished()))
            .collect();
        match (ids.len(), live.is_empty()) {
            (0, _) => out.push((r.job, r.to_string())),
            (1, _) => out.push((ids[0], st.shown(ids[0]))),
            (_, true) => out.push((ids[0], r.to_string())),
            (_, false) => out.extend(live.into_iter().map(|id| (id, st.shown(id)))),
        }
    }
    out
}

fn cancel_one(
    st: &mut State,
    peer: &Peer,
    id: JobId,
    signal: Option<i32>,
    now: u64,
    shown: &str,
) -> Result<(), (ErrorKind, String)> {
    let j = st
        .job(id)
        .ok_or_else(|| (ErrorKind::NotFound, format!("job {shown} not found")))?;
    if !peer.is_root() && peer.uid != j.row.uid {
        return Err((
            ErrorKind::PermissionDenied,
            format!("permission denied: job {shown} belongs to {}", j.row.user),
        ));
    }
    let state = j.row.state;
    match signal {
        Some(n) if state == flex_proto::JobState::Running => st
            .signaller()
            .job_group(id, n)
            .map_err(|m| (ErrorKind::InvalidRequest, m)),
        Some(_) => Err((
            ErrorKind::InvalidRequest,
            format!("job {shown} is not running ({state}): there is nothing to signal"),
        )),
        None => st
            .cancel(id, peer.uid, now)
            .map_err(|m| (ErrorKind::InvalidRequest, m)),
    }
}
