//! Priority (flexprio) and Shares (flexshare): each pending job's factors, and each user's and
//! account's shares, usage and fair-share factor, computed from the state as of now.

use crate::config::Settings;
use crate::state::priority::{factors, pending_jobs, prio_row, Shares};
use crate::state::State;
use flex_proto::{JobState, PrioQuery, PrioReply, PrioWeights, Response, ShareQuery};
use flex_sched::Model as _;

/// The factors of the pending jobs the query selects, highest priority first.
pub(crate) fn priority(s: &Settings, st: &State, q: &PrioQuery, now: u64) -> Response {
    let cfg = &s.priority;
    let shares = Shares::new(st, cfg, now, waiting(st));
    let units = st.cluster.units();
    let mut jobs: Vec<_> = st
        .jobs()
        .filter(|j| j.row.state == JobState::Pending)
        .filter(|j| q.jobs.is_empty() || q.jobs.contains(&j.row.id))
        .filter(|j| {
            q.users.is_empty()
                || q.users
                    .iter()
                    .any(|u| **u == *j.row.user || u.parse::<u32>() == Ok(j.row.uid))
        })
        .map(|j| prio_row(cfg, &factors(cfg, &shares, units, j, now), j))
        .collect();
    jobs.sort_by_key(|r| (std::cmp::Reverse(r.priority), r.job));
    let w = &cfg.weights;
    Response::Priority(PrioReply {
        weights: PrioWeights {
            age: w.age,
            fairshare: w.fairshare,
            job_size: w.job_size,
            qos: w.qos,
        },
        jobs,
    })
}

/// Accounts, then users, with their shares and usage.
pub(crate) fn shares(s: &Settings, st: &State, q: &ShareQuery, now: u64) -> Response {
    Response::Shares(Shares::new(st, &s.priority, now, waiting(st)).rows(&q.users))
}

/// The users and accounts of pending jobs.
fn waiting(st: &State) -> impl Iterator<Item = (&str, &str)> {
    pending_jobs(st).map(|j| (&*j.row.user, &*j.row.account))
}
