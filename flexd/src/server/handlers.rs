//! One plain synchronous function per request, over the settings and the state: no socket, no
//! database, no clock (`now` comes in). The dispatcher in [`super`] is the only code that
//! touches the socket. Submit is split in two: [`prepare_submit`] validates and counts the job
//! against its user's limit, the dispatcher commits it, and [`crate::state::State::add_submitted`]
//! queues it.

use crate::config::Settings;
use crate::exec::files::StatusFile;
use crate::state::{Job, Outcome, State};
use crate::store::{NewJob, StoredAlloc};
use flex_proto::{
    CancelOutcome, ErrorKind, HostLeaves, JobSpec, JobView, LeafMapEntry, QueueFilter, QueueRows,
    Request, Response, WouldStart,
};
use flex_sched::{self as sched, Model, PendingJob, Reason};
use gres_plugin::JobId;
use std::collections::HashMap;

/// Who is asking, from SO_PEERCRED.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
    /// The uid's name (the number when it has none).
    pub user: String,
}

impl Peer {
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

fn err(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::error(kind, message)
}

/// Every request but Submit (see [`prepare_submit`]), JobEnded (see [`job_ended`]) and
/// Accounting (read from the database by the dispatcher).
pub fn handle(s: &Settings, st: &mut State, peer: &Peer, req: Request, now: u64) -> Response {
    match req {
        Request::TestOnly(spec) => test_only(s, st, peer, spec, now),
        Request::Queue(f) => {
            let mut sel = selected(st, &f).peekable();
            let jobs: Vec<JobView> = sel.by_ref().take(PAGE).map(|j| st.view(j)).collect();
            let next = sel.peek().and(jobs.last()).map(|j| j.id);
            Response::Queue { jobs, next }
        }
        Request::QueueRows(f) => {
            let mut sel = selected(st, &f).peekable();
            let mut last = None;
            let page = sel.by_ref().take(PAGE).inspect(|j| last = Some(j.row.id));
            let rows = QueueRows::new(st.queue_rows(page, now));
            let next = sel.peek().and(last);
            Response::QueueRows { rows, next }
        }
        Request::Cancel { jobs, signal } => cancel(st, peer, &jobs, signal, now),
        Request::LeafMap => leaf_map(st),
        Request::Ping => Response::Pong,
        Request::Submit(_) | Request::JobEnded { .. } | Request::Accounting(_) => err(
            ErrorKind::Internal,
            "this request is handled by the dispatcher",
        ),
    }
}

/// Check a submission and fill in the configured defaults (time limit and cores per leaf of
/// 0 mean "not given").
fn validate(s: &Settings, st: &State, peer: &Peer, mut spec: JobSpec) -> Result<JobSpec, Response> {
    if st.daemon_uid != 0 && peer.uid != st.daemon_uid {
        return Err(err(
            ErrorKind::PermissionDenied,
            format!(
                "permission denied: flexd runs as uid {} (not root) and runs jobs only for that \
                 user, not for {} (uid {})",
                st.daemon_uid, peer.user, peer.uid
            ),
        ));
    }
    let invalid = |m: String| Err(err(ErrorKind::InvalidRequest, m));
    if spec.script.trim().is_empty() {
        return invalid("the batch script is empty".into());
    }
    let max = s.limits.max_script_bytes;
    if spec.script.len() as u64 > max {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "the batch script is {} bytes, more than max_script_bytes = {max}",
                spec.script.len()
            ),
        ));
    }
    for (what, p) in [
        ("working directory", &spec.workdir),
        ("submit directory", &spec.submit_dir),
    ] {
        if !p.is_absolute() {
            return invalid(format!(
                "the {what} {} is not an absolute path",
                p.display()
            ));
        }
    }
    let env = spec.env.check(|k, v| {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(format!("environment variable name {k:?} is not valid"));
        }
        if v.contains('\0') {
            return Err(format!("environment variable {k} contains a NUL byte"));
        }
        Ok(())
    });
    if let Err(e) = env {
        return invalid(e);
    }
    if let Some(a) = spec.args.iter().find(|a| a.contains('\0')) {
        return invalid(format!("script argument {a:?} contains a NUL byte"));
    }
    for (what, p) in [("output", &spec.stdout), ("error", &spec.stderr)] {
        if let Some(p) = p {
            if p.is_empty() || p.contains('\0') {
                return invalid(format!("the {what} path {p:?} is not valid"));
            }
        }
    }
    if spec.name.is_empty() {
        spec.name = "job".into();
    }
    let r = &mut spec.request;
    if r.time_limit_s == 0 {
        r.time_limit_s = s.default_time_limit.as_secs().max(1);
    }
    if r.cores_per_leaf == 0 {
        r.cores_per_leaf = s.default_cpus_per_leaf;
    }
    let max_t = s.max_time_limit.as_secs();
    if r.time_limit_s > max_t {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "time limit {} is more than max_time_limit = {}",
                humantime::format_duration(std::time::Duration::from_secs(r.time_limit_s)),
                humantime::format_duration(s.max_time_limit)
            ),
        ));
    }
    if let Err(why) = st.cluster.admit(&pending(JobId(u64::MAX), &spec)) {
        return Err(err(
            ErrorKind::Unsatisfiable,
            format!("unsatisfiable: {why}"),
        ));
    }
    Ok(spec)
}

fn pending(id: JobId, spec: &JobSpec) -> PendingJob {
    PendingJob {
        id,
        request: spec.request.clone(),
        priority: 0,
        kind: sched::JobKind::Batch,
    }
}

/// Validate a submission and count it against its user's limit; the dispatcher commits the
/// returned job and then calls `State::add_submitted` (or `State::abandon_submission` when
/// the commit fails). With an empty queue the job may be placed here already (see
/// `State::start_now`).
pub fn prepare_submit(
    s: &Settings,
    st: &mut State,
    peer: &Peer,
    spec: JobSpec,
    now: u64,
) -> Result<NewJob, Response> {
    let spec = validate(s, st, peer, spec)?;
    let max = s.limits.max_queued_per_user;
    let have = st.queued_by(peer.uid);
    if have >= max {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "{} already has {have} jobs pending or running (max_queued_per_user = {max})",
                peer.user
            ),
        ));
    }
    st.begin_submission(peer.uid);
    let start = st.start_now(s, &spec.request, now);
    Ok(NewJob {
        account: spec.account.clone().unwrap_or_default(),
        spec,
        uid: peer.uid,
        gid: peer.gid,
        user: peer.user.clone(),
        priority: 0,
        submit_time: now,
        start,
    })
}

/// Where and when the job would start if it were submitted now; queues nothing.
pub fn test_only(s: &Settings, st: &mut State, peer: &Peer, spec: JobSpec, now: u64) -> Response {
    let spec = match validate(s, st, peer, spec) {
        Ok(spec) => spec,
        Err(r) => return r,
    };
    let id = JobId(u64::MAX);
    let queue = st.queue_with(Some(pending(id, &spec)));
    let running = st.running_for_core(now);
    let mut d = sched::schedule(&st.cluster, &queue, &running, now, &s.policy);
    // The job is last in the queue: estimate as far as it, within reason.
    let depth = d.pending.len().min(10 * crate::state::ESTIMATE_DEPTH);
    sched::estimate_starts(&st.cluster, &queue, &running, now, &mut d, depth);
    if let Some(start) = d.starts.iter().find(|x| x.job == id) {
        let host = st.cluster.host(start.placement.host);
        return Response::WouldStart(WouldStart {
            alloc: Some(StoredAlloc::new(&start.placement, host).view()),
            estimated_start: Some(now),
            reason: None,
        });
    }
    match d.pending.into_iter().find(|p| p.job == id) {
        Some(p) => match p.reason {
            Reason::Unsatisfiable(why) => {
                err(ErrorKind::Unsatisfiable, format!("unsatisfiable: {why}"))
            }
            reason => Response::WouldStart(WouldStart {
                alloc: None,
                estimated_start: p.estimated_start,
                reason: Some(reason.to_string()),
            }),
        },
        None => err(
            ErrorKind::Internal,
            "the scheduler did not consider the job",
        ),
    }
}

/// Jobs in one page of a listing: small enough that making one holds the state for a few ms.
pub const PAGE: usize = 4096;

/// The jobs the filter selects, by id. Finished jobs appear with `include_finished`, or when
/// the filter names them or their state.
fn selected<'a>(st: &'a State, f: &'a QueueFilter) -> impl Iterator<Item = &'a Job> + 'a {
    st.jobs_after(f.after).filter(|j| {
        let r = &j.row;
        (f.users.is_empty()
            || f.users
                .iter()
                .any(|u| *u == r.user || u.parse::<u32>() == Ok(r.uid)))
            && (f.states.is_empty() || f.states.contains(&r.state))
            && (f.jobs.is_empty() || f.jobs.contains(&r.id))
            && (!r.state.is_finished()
                || f.include_finished
                || f.jobs.contains(&r.id)
                || f.states.contains(&r.state))
    })
}

/// The request for the page after `page`, when `page` is one of a listing that goes on.
pub fn next_page(filter: Option<QueueFilter>, page: &Response) -> Option<Request> {
    let (rows, after) = match page {
        Response::Queue { next, .. } => (false, (*next)?),
        Response::QueueRows { next, .. } => (true, (*next)?),
        _ => return None,
    };
    let f = QueueFilter {
        after: Some(after),
        ..filter?
    };
    Some(if rows {
        Request::QueueRows(f)
    } else {
        Request::Queue(f)
    })
}

/// Cancel jobs, or send them a signal. Users may cancel only their own jobs; root any. Each
/// job gets an outcome; when every job failed, the answer is the first failure's error.
pub fn cancel(
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

/// Every leaf of every host: its GPU, profile, free share and the jobs holding it.
pub fn leaf_map(st: &State) -> Response {
    let mut holders: HashMap<(u32, u32), Vec<JobId>> = HashMap::new();
    for j in st.running_jobs() {
        if let Some(a) = &j.alloc {
            for u in &a.units {
                holders
                    .entry((a.host.0, u.leaf.0))
                    .or_default()
                    .push(j.row.id);
            }
        }
    }
    let hosts = st
        .cluster
        .hosts()
        .map(|(hid, h)| HostLeaves {
            host: h.hostname.clone(),
            leaves: h
                .leaves
                .iter()
                .map(|l| LeafMapEntry {
                    uuid: l.uuid.clone(),
                    profile: l.profile.clone(),
                    gpu: l.gpu.0,
                    gpu_name: h.gpu(l.gpu).map(|g| g.name.clone()).unwrap_or_default(),
                    numa_node: h.numa_of_gpu(l.gpu),
                    free: st.cluster.leaf_free(hid, l.id),
                    jobs: holders.remove(&(hid.0, l.id.0)).unwrap_or_default(),
                })
                .collect(),
        })
        .collect();
    Response::LeafMap(hosts)
}

/// A supervisor says its job ended; `status` is what its status file holds.
pub fn job_ended(
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
