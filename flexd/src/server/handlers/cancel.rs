//! Cancel (flexcancel): end jobs, or send them a signal. Users act on their own jobs only; root
//! on all.

use super::{err, Peer};
use crate::state::State;
use flex_proto::{CancelOutcome, ErrorKind, Response};
use gres_plugin::JobId;

/// Cancel jobs, or send them a signal. Users may cancel only their own jobs; root any. Each
/// job gets an outcome; when every job failed, the answer is the first failure's error.
pub(crate) fn cancel(
    st: &mut State,
    peer: &Peer,
    jobs: &[JobId],
    signal: Option<i32>,
    now: u64,
) -> Response {
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
    for &id in jobs {
        let r = cancel_one(st, peer, id, signal, now);
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

fn cancel_one(
    st: &mut State,
    peer: &Peer,
    id: JobId,
    signal: Option<i32>,
    now: u64,
) -> Result<(), (ErrorKind, String)> {
    let j = st
        .job(id)
        .ok_or_else(|| (ErrorKind::NotFound, format!("job {id} not found")))?;
    if !peer.is_root() && peer.uid != j.row.uid {
        return Err((
            ErrorKind::PermissionDenied,
            format!("permission denied: job {id} belongs to {}", j.row.user),
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
            format!("job {id} is not running ({state}): there is nothing to signal"),
        )),
        None => st
            .cancel(id, peer.uid, now)
            .map_err(|m| (ErrorKind::InvalidRequest, m)),
    }
}
