//! Control (flexcontrol): hold, release, requeue and update jobs, or show them. Users act on
//! their own jobs only, root on all; root's hold is released only by root. A reference to a
//! whole array acts on each of its tasks and answers once for the array.

use super::{err, Peer};
use crate::config::Settings;
use crate::state::control::Change;
use crate::state::State;
use flex_proto::{
    ControlAction, ControlOutcome, ControlRequest, ErrorKind, JobRef, QueuePage, Response,
};
use gres_plugin::JobId;

pub(crate) fn control(
    s: &Settings,
    st: &mut State,
    peer: &Peer,
    req: &ControlRequest,
    now: u64,
) -> Response {
    if req.jobs.is_empty() {
        return err(ErrorKind::InvalidRequest, "no job was given");
    }
    if req.action == ControlAction::Show {
        return show(st, &req.jobs);
    }
    let changes = match &req.action {
        ControlAction::Update(pairs) => match changes(s, peer, pairs) {
            Ok(c) => c,
            Err(m) => return err(ErrorKind::InvalidRequest, m),
        },
        _ => Vec::new(),
    };
    let outcomes = req
        .jobs
        .iter()
        .map(|r| ControlOutcome {
            job: r.to_string(),
            error: on_ref(st, peer, r, &req.action, &changes, now).err(),
        })
        .collect();
    Response::Controlled(outcomes)
}

/// The action on every job a reference names; an error when it failed on all of them.
fn on_ref(
    st: &mut State,
    peer: &Peer,
    r: &JobRef,
    action: &ControlAction,
    changes: &[Change],
    now: u64,
) -> Result<(), String> {
    let ids = st.resolve(r);
    let first = *ids.first().ok_or_else(|| format!("job {r} not found"))?;
    let owner = st.job(first).map(|j| (j.row.uid, j.row.user.clone()));
    if let Some((uid, user)) = owner {
        if !peer.is_root() && uid != peer.uid {
            return Err(format!("permission denied: job {r} belongs to {user}"));
        }
    }
    let mut errors = Vec::new();
    let n = ids.len();
    for id in ids {
        if let Err(e) = one(st, peer, id, action, changes, now) {
            errors.push(e);
        }
    }
    match errors.len() {
        0 => Ok(()),
        k if k < n => Ok(()),
        1 => Err(errors.remove(0)),
        k => Err(format!("{} (and {} more tasks)", errors[0], k - 1)),
    }
}

fn one(
    st: &mut State,
    peer: &Peer,
    id: JobId,
    action: &ControlAction,
    changes: &[Change],
    now: u64,
) -> Result<(), String> {
    match action {
        ControlAction::Hold => st.set_hold(id, true, peer.is_root()),
        ControlAction::Release => st.set_hold(id, false, peer.is_root()),
        ControlAction::Requeue { hold } => st.requeue(id, *hold, now),
        ControlAction::Update(_) => {
            let shown = st.shown(id);
            let limit = st.job(id).map_or(0, |j| j.row.request.time_limit_s);
            for c in changes {
                if let Change::TimeLimit(t) = c {
                    if !peer.is_root() && *t > limit {
                        return Err(format!(
                            "job {shown}: only root may raise a time limit ({limit} s to {t} s)"
                        ));
                    }
                }
            }
            st.update(id, changes)
        }
        ControlAction::Show => unreachable!("answered by show"),
    }
}

/// `key=value` pairs as changes: TimeLimit (seconds), JobName, Priority and Nice (root).
fn changes(s: &Settings, peer: &Peer, pairs: &[(String, String)]) -> Result<Vec<Change>, String> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        let int = |what: &str| {
            v.parse::<i64>()
                .map_err(|_| format!("{what}={v} is not a whole number"))
        };
        let change = match k.to_ascii_lowercase().as_str() {
            // Held to what a submission's -J is held to.
            "jobname" | "name" if v.len() > s.limits.max_name_bytes as usize => {
                return Err(format!(
                    "JobName is {} bytes, more than max_name_bytes = {}",
                    v.len(),
                    s.limits.max_name_bytes
                ));
            }
            "jobname" | "name" if !v.is_empty() => Change::Name(v.clone()),
            "timelimit" => {
                let t = int("TimeLimit")?;
                let max = s.max_time_limit.as_secs();
                if t <= 0 || t as u64 > max {
                    return Err(format!(
                        "TimeLimit={t} s is not between 1 s and max_time_limit = {max} s"
                    ));
                }
                Change::TimeLimit(t as u64)
            }
            "priority" | "nice" if !peer.is_root() => {
                return Err(format!("only root may change {k}"));
            }
            "priority" => Change::Priority(int("Priority")?),
            "nice" => Change::Nice(int("Nice")?),
            _ => {
                return Err(format!(
                    "cannot update {k}={v} (TimeLimit, JobName, Priority and Nice can change)"
                ))
            }
        };
        out.push(change);
    }
    Ok(out)
}

/// `flexcontrol show job`: the jobs in full, every task of an array named whole.
fn show(st: &State, refs: &[JobRef]) -> Response {
    let mut jobs = Vec::new();
    for r in refs {
        let ids = st.resolve(r);
        if ids.is_empty() {
            return err(ErrorKind::NotFound, format!("job {r} not found"));
        }
        jobs.extend(
            ids.into_iter()
                .filter_map(|id| st.job(id))
                .map(|j| st.view(j)),
        );
    }
    Response::Queue(QueuePage { jobs, next: None })
}
