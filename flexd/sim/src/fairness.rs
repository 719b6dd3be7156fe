//! Fair share between a trace's users (its `user` column), computed as flexd computes it
//! (flex-sched's `fairshare`: usage in slice-seconds with a half-life, `2^(-U/S)` with equal
//! shares, weights as in flexd.toml), and what it changes: each user's mean wait and Jain's
//! fairness index over the users' mean bounded slowdowns, FIFO order against fair share.

use crate::engine::RunResult;
use crate::trace::Trace;
use flex_sched::fairshare::{age_factor, fair_share, jain, Decayed, Factors, Weights};
use flex_sched::PendingJob;
use std::collections::{BTreeMap, HashMap};

/// What the priority weighs, as flexd.toml's `[priority]` and `[fairshare]` say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FairShare {
    pub weights: Weights,
    pub half_life_s: u64,
}

impl Default for FairShare {
    /// flexd's shipped defaults (etc/flexd.toml), QOS and job size left out (a trace has none).
    fn default() -> Self {
        FairShare {
            weights: Weights {
                age: 1000,
                fairshare: 10000,
                job_size: 0,
                qos: 0,
                max_age_s: 7 * 86400,
            },
            half_life_s: 7 * 86400,
        }
    }
}

/// Users' decayed usage during a run: charged as jobs end, plus running jobs so far.
#[derive(Debug, Default)]
pub struct Usage {
    users: Vec<Decayed>,
}

impl Usage {
    pub fn new(users: usize) -> Usage {
        Usage {
            users: vec![Decayed::default(); users],
        }
    }

    /// A job of `user` held `slices` from `start` to `end`.
    pub fn charge(&mut self, user: u32, slices: u32, start: u64, end: u64, f: &FairShare) {
        let amount = f64::from(slices) * end.saturating_sub(start) as f64;
        self.users[user as usize].add(amount, end, f.half_life_s);
    }

    /// Set each queued job's priority. `user_of` and `submit_of` give a job's user and submit
    /// time; `running` lists (user, slices, start) of the running jobs.
    pub fn prioritize(
        &self,
        queue: &mut [PendingJob],
        user_of: impl Fn(&PendingJob) -> u32,
        submit_of: impl Fn(&PendingJob) -> u64,
        running: impl Iterator<Item = (u32, u32, u64)>,
        now: u64,
        f: &FairShare,
    ) {
        let priority = self.priority(running, now, f);
        for p in queue {
            p.priority = priority.of(user_of(p), submit_of(p));
        }
    }

    /// The priorities at `now`. `running` lists (user, slices, start) of the running jobs.
    pub fn priority(
        &self,
        running: impl Iterator<Item = (u32, u32, u64)>,
        now: u64,
        f: &FairShare,
    ) -> Priority {
        let mut used: Vec<f64> = self
            .users
            .iter()
            .map(|d| d.at(now, f.half_life_s))
            .collect();
        for (u, slices, start) in running {
            used[u as usize] += f64::from(slices) * now.saturating_sub(start) as f64;
        }
        let total: f64 = used.iter().sum();
        let n = used.len() as f64;
        let factor = used.iter().map(|&u| fair_share(u, total, 1.0, n)).collect();
        Priority { factor, now, f: *f }
    }
}

/// The queued jobs' priorities at one time.
#[derive(Debug)]
pub struct Priority {
    /// Each user's fair-share factor.
    factor: Vec<f64>,
    now: u64,
    f: FairShare,
}

impl Priority {
    /// The priority of a job of `user` submitted at `submit`.
    pub fn of(&self, user: u32, submit: u64) -> i64 {
        Factors {
            age: age_factor(submit, self.now, self.f.weights.max_age_s),
            fairshare: self.factor[user as usize],
            ..Factors::default()
        }
        .priority(&self.f.weights)
    }
}

/// Each trace job's user as a number (users in order of first appearance; no `user`: one user
/// ""), and the names.
pub fn users(trace: &Trace) -> (HashMap<u64, u32>, Vec<String>) {
    let (of, names) = user_of(trace);
    let by_id = trace.jobs.iter().zip(of).map(|(j, u)| (j.id, u)).collect();
    (by_id, names)
}

/// [`users`] by position in the trace.
pub fn user_of(trace: &Trace) -> (Vec<u32>, Vec<String>) {
    let mut names: Vec<String> = Vec::new();
    let mut index: HashMap<&str, u32> = HashMap::new();
    // Runs of one user (a trace without users is one run) skip the lookup; no user (None) is
    // the same as an empty name, and compared without looking at text.
    let mut last: Option<(Option<&str>, u32)> = None;
    let of = trace
        .jobs
        .iter()
        .map(|j| {
            let user = j.user.as_deref().filter(|n| !n.is_empty());
            if let Some((_, k)) = last.filter(|(n, _)| *n == user) {
                return k;
            }
            let name = user.unwrap_or("");
            let next = names.len() as u32;
            let k = *index.entry(name).or_insert_with(|| {
                names.push(name.to_string());
                next
            });
            last = Some((user, k));
            k
        })
        .collect();
    (of, names)
}

/// One user's row of the comparison.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct UserRow {
    pub user: String,
    pub jobs: usize,
    pub fifo_wait_s: f64,
    pub fair_wait_s: f64,
    pub fifo_slowdown: f64,
    pub fair_slowdown: f64,
}

/// Per-user mean wait and bounded slowdown ((wait + run) / max(run, 10 s)) of two runs of one
/// trace, and Jain's index over the users' mean slowdowns (FIFO, fair share).
pub fn compare(trace: &Trace, fifo: &RunResult, fair: &RunResult) -> (Vec<UserRow>, f64, f64) {
    let (of, names) = users(trace);
    let per_user = |r: &RunResult| {
        let mut m: BTreeMap<u32, (usize, f64, f64)> = BTreeMap::new();
        for j in &r.jobs {
            let e = m.entry(of[&j.id]).or_default();
            let slowdown = j.jct_s() as f64 / (j.run_s.max(10)) as f64;
            *e = (e.0 + 1, e.1 + j.wait_s() as f64, e.2 + slowdown);
        }
        m
    };
    let (a, b) = (per_user(fifo), per_user(fair));
    let rows: Vec<UserRow> = a
        .iter()
        .map(|(u, &(n, w, s))| {
            let (n2, w2, s2) = b.get(u).copied().unwrap_or((n, 0.0, 0.0));
            UserRow {
                user: names[*u as usize].clone(),
                jobs: n,
                fifo_wait_s: w / n as f64,
                fair_wait_s: w2 / n2.max(1) as f64,
                fifo_slowdown: s / n as f64,
                fair_slowdown: s2 / n2.max(1) as f64,
            }
        })
        .collect();
    let fifo_jain = jain(&rows.iter().map(|r| r.fifo_slowdown).collect::<Vec<_>>());
    let fair_jain = jain(&rows.iter().map(|r| r.fair_slowdown).collect::<Vec<_>>());
    (rows, fifo_jain, fair_jain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::{JobId, Request};

    #[test]
    fn a_user_with_usage_ranks_below_one_without() {
        let f = FairShare::default();
        let mut usage = Usage::new(2);
        usage.charge(0, 4, 0, 3600, &f);
        let job = |id, _user: u32| PendingJob {
            id: JobId(id),
            request: Request::leaves(1, 600),
            priority: 0,
            kind: Default::default(),
        };
        let mut q = vec![job(1, 0), job(2, 1)];
        usage.prioritize(
            &mut q,
            |p| (p.id.0 - 1) as u32,
            |_| 3600,
            std::iter::empty(),
            3600,
            &f,
        );
        assert!(q[1].priority > q[0].priority, "{q:?}");
        assert_eq!(
            q[1].priority, 10000,
            "no usage: the whole fair-share weight"
        );
    }
}
