//! JobEnded, from a job's supervisor: the job ended. The outcome comes in the frame, and the
//! answer waits until the end is committed (the supervisor writes no status file once it has
//! one); a frame without it points at the job's status file. Only root or flexd's own user may
//! send it.

use super::{err, Peer};
use crate::exec::files::{self, StatusFile};
use crate::server::Shared;
use crate::state::{Outcome, State};
use flex_proto::{ErrorKind, JobState, Response};
use gres_plugin::JobId;

/// Record the job's end, from `sent` or else its status file; answer once it is committed.
pub(crate) async fn reported(
    shared: &Shared,
    peer: &Peer,
    job: JobId,
    sent: Option<StatusFile>,
) -> Response {
    let from_frame = sent.is_some();
    let status = match sent {
        Some(s) if s.job != job.0 => Err(format!("a status for job {} sent as job {job}", s.job)),
        Some(s) => Ok(Some(s)),
        None => files::read_status(&shared.run_dir, job),
    };
    let had_status = matches!(status, Ok(Some(_))) && !from_frame;
    let (r, stale) = shared.with_core(|c| {
        let was_running = c
            .state
            .job(job)
            .is_some_and(|j| j.row.state == JobState::Running);
        let r = job_ended(&mut c.state, peer, job, status);
        let stale = !was_running && r == Response::Pong;
        (r, stale)
    });
    // The end was recorded before (NODE_FAIL while its supervisor was still going):
    // nothing will remove these files after a commit.
    if stale && had_status {
        files::remove_job_files(&shared.run_dir, job);
    }
    if from_frame && r == Response::Pong {
        shared.barrier().await;
    }
    r
}

/// A supervisor says its job ended; `status` is what its status file holds.
pub(crate) fn job_ended(
    st: &mut State,
    peer: &Peer,
    job: JobId,
    status: Result<Option<StatusFile>, String>,
) -> Response {
    if !peer.is_root() && peer.uid != st.daemon_uid {
        return err(
            ErrorKind::PermissionDenied,
            "permission denied: only a job's supervisor may report its end",
        );
    }
    match status {
        Ok(Some(s)) => {
            st.finish(job, Outcome::from(&s));
        }
        Ok(None) => tracing::warn!("job {job}: its supervisor reported an end but wrote no status"),
        Err(e) => tracing::error!("job {job}: unreadable status file: {e}"),
    }
    Response::Pong
}
