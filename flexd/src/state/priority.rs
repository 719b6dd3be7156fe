//! Priorities and limits, decided before each pass: every pending job's multifactor priority
//! (age, fair share, job size, QOS, nice; see [`flex_sched::fairshare`]) and the jobs that a
//! QOS or account limit holds back (left out of the core's queue, with Slurm's reason).
//!
//! Fair-share usage lives in a [`Ledger`]: decayed slice-seconds per user and per account,
//! loaded from the store at start-up and charged when a job ends (the new value goes to the
//! store with the end). Running jobs count what they have used so far at each pass, from their
//! start time: no accounting scan, ever.

use super::{Job, State};
use crate::fairshare::{PriorityConfig, Qos};
use crate::store::usage::{Holder, UsageRow};
use crate::store::StoredAlloc;
use flex_proto::{PrioRow, ShareRow};
use flex_sched::fairshare::{self as fs, Decayed, Factors};
use flex_sched::{Model as _, Pending, PendingJob, Reason};
use gres_plugin::JobId;
use std::collections::HashMap;

/// Decayed usage per user and per account, in slice-seconds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    users: HashMap<String, Decayed>,
    accounts: HashMap<String, Decayed>,
}

impl Ledger {
    pub(crate) fn load(rows: Vec<UsageRow>) -> Ledger {
        let mut l = Ledger::default();
        for r in rows {
            let map = match r.holder {
                Holder::User => &mut l.users,
                Holder::Account => &mut l.accounts,
            };
            map.insert(r.name, r.usage);
        }
        l
    }

    /// Charge a finished run to its user and account; the rows to store with its end.
    pub(crate) fn charge(&mut self, j: &Job, end: u64, half_life: u64) -> Vec<UsageRow> {
        let (Some(start), Some(a)) = (j.row.start_time, j.row.alloc.as_deref()) else {
            return Vec::new();
        };
        let amount = held_slices(a) * end.saturating_sub(start) as f64;
        let mut rows = Vec::with_capacity(2);
        for (holder, map, name) in [
            (Holder::User, &mut self.users, &j.row.user),
            (Holder::Account, &mut self.accounts, &j.row.account),
        ] {
            let d = map.entry(name.clone()).or_default();
            d.add(amount, end, half_life);
            rows.push(UsageRow {
                holder,
                name: name.clone(),
                usage: *d,
            });
        }
        rows
    }
}

/// Compute slices an allocation holds: each unit's SM slices × the share of it held.
pub(crate) fn held_slices(a: &StoredAlloc) -> f64 {
    a.units
        .iter()
        .map(|u| u.sm_slices as f64 * u.share as f64 / 1000.0)
        .sum()
}

/// Usage and shares as of one moment, for every user and account flexd knows of.
pub(crate) struct Shares<'a> {
    cfg: &'a PriorityConfig,
    users: HashMap<&'a str, f64>,
    accounts: HashMap<&'a str, f64>,
    user_totals: (f64, f64),
    account_totals: (f64, f64),
}

impl<'a> Shares<'a> {
    /// Decayed usage at `now`, plus what running jobs used so far; everyone with usage or a
    /// job counts towards the totals of shares.
    pub(crate) fn new(st: &'a State, cfg: &'a PriorityConfig, now: u64) -> Shares<'a> {
        let hl = cfg.half_life_s;
        let mut users: HashMap<&str, f64> =
            st.ledger.users.iter().map(|(k, d)| (k.as_str(), d.at(now, hl))).collect();
        let mut accounts: HashMap<&str, f64> =
            st.ledger.accounts.iter().map(|(k, d)| (k.as_str(), d.at(now, hl))).collect();
        for j in st.running_jobs() {
            let so_far = match (j.row.start_time, j.row.alloc.as_deref()) {
                (Some(s), Some(a)) => held_slices(a) * now.saturating_sub(s) as f64,
                _ => 0.0,
            };
            *users.entry(&j.row.user).or_default() += so_far;
            *accounts.entry(&j.row.account).or_default() += so_far;
        }
        for j in pending_jobs(st) {
            users.entry(&j.row.user).or_default();
            accounts.entry(&j.row.account).or_default();
        }
        let totals = |m: &HashMap<&str, f64>, shares: &dyn Fn(&str) -> u32| {
            m.iter()
                .fold((0.0, 0.0), |(u, s), (k, v)| (u + v, s + shares(k) as f64))
        };
        let user_totals = totals(&users, &|u| cfg.user_shares(u));
        let account_totals = totals(&accounts, &|a| cfg.account_shares(a));
        Shares {
            cfg,
            users,
            accounts,
            user_totals,
            account_totals,
        }
    }

    fn user_factor(&self, user: &str) -> f64 {
        let u = self.users.get(user).copied().unwrap_or(0.0);
        let (tu, ts) = self.user_totals;
        fs::fair_share(u, tu, self.cfg.user_shares(user) as f64, ts)
    }

    fn account_factor(&self, account: &str) -> f64 {
        let u = self.accounts.get(account).copied().unwrap_or(0.0);
        let (tu, ts) = self.account_totals;
        fs::fair_share(u, tu, self.cfg.account_shares(account) as f64, ts)
    }

    /// The fair-share factor of a job: its user's times its account's.
    pub(crate) fn factor(&self, user: &str, account: &str) -> f64 {
        self.user_factor(user) * self.account_factor(account)
    }

    /// flexshare's rows: accounts, then users, by name; `only` restricts the users.
    pub(crate) fn rows(&self, only: &[String]) -> Vec<ShareRow> {
        let row = |name: &str, account: bool| {
            let (usage, (tu, ts), shares, factor) = if account {
                let u = self.accounts.get(name).copied().unwrap_or(0.0);
                let s = self.cfg.account_shares(name);
                (u, self.account_totals, s, self.account_factor(name))
            } else {
                let u = self.users.get(name).copied().unwrap_or(0.0);
                let s = self.cfg.user_shares(name);
                (u, self.user_totals, s, self.user_factor(name))
            };
            ShareRow {
                account: if account { name.into() } else { String::new() },
                user: (!account).then(|| name.to_string()),
                raw_shares: shares,
                norm_shares: if ts > 0.0 { shares as f64 / ts } else { 0.0 },
                raw_usage: usage / 3600.0,
                effective_usage: if tu > 0.0 { usage / tu } else { 0.0 },
                fairshare: factor,
            }
        };
        let mut accounts: Vec<&str> = self.accounts.keys().copied().collect();
        let mut users: Vec<&str> = self.users.keys().copied().collect();
        accounts.sort_unstable();
        users.sort_unstable();
        let mut out: Vec<ShareRow> = if only.is_empty() {
            accounts.iter().map(|a| row(a, true)).collect()
        } else {
            Vec::new()
        };
        out.extend(
            users
                .iter()
                .filter(|u| only.is_empty() || only.iter().any(|o| o == *u))
                .map(|u| row(u, false)),
        );
        out
    }
}

/// A pending job's factors.
pub(crate) fn factors(
    cfg: &PriorityConfig,
    shares: &Shares,
    units: u64,
    j: &Job,
    now: u64,
) -> Factors {
    let qos = qos_of(cfg, j).map_or(0, |q| q.priority);
    let max_qos = cfg.max_qos_priority();
    Factors {
        age: fs::age_factor(j.row.submit_time, now, cfg.weights.max_age_s),
        fairshare: if cfg.weights.fairshare == 0 {
            0.0
        } else {
            shares.factor(&j.row.user, &j.row.account)
        },
        job_size: (fs::requested_slices(&j.row.request) as f64 / units.max(1) as f64).min(1.0),
        qos: if max_qos == 0 {
            0.0
        } else {
            qos as f64 / max_qos as f64
        },
        base: j.row.priority,
    }
}

/// A job's QOS (None when flexd.toml no longer defines it: no limits, no QOS priority).
pub(crate) fn qos_of<'c>(cfg: &'c PriorityConfig, j: &Job) -> Option<&'c Qos> {
    cfg.qos.get(j.row.qos.as_deref().unwrap_or(&cfg.default_qos))
}

/// flexprio's row for a pending job.
pub(crate) fn prio_row(cfg: &PriorityConfig, f: &Factors, j: &Job) -> PrioRow {
    let w = &cfg.weights;
    PrioRow {
        job: j.row.id,
        user: j.row.user.clone(),
        account: j.row.account.clone(),
        qos: j.row.qos.clone().unwrap_or_else(|| cfg.default_qos.clone()),
        priority: f.priority(w),
        age: w.age as f64 * f.age,
        fairshare: w.fairshare as f64 * f.fairshare,
        job_size: w.job_size as f64 * f.job_size,
        qos_part: w.qos as f64 * f.qos,
        nice: (-f.base).clamp(i32::MIN as i64, i32::MAX as i64) as i32,
    }
}

/// What the limits have used so far in one walk: per (uid, QOS) and per account.
#[derive(Default)]
struct Use<'a> {
    user: HashMap<(u32, &'a str), (u64, u64)>,
    account: HashMap<&'a str, u64>,
}

/// Walk the queue in priority order and hold back each job that a limit stops, counting the
/// jobs let through as if they started (so the core can never start more than a limit allows).
/// Returns the queue to schedule and the held jobs with their reasons.
pub(crate) fn apply_limits(
    cfg: &PriorityConfig,
    st: &State,
    queue: Vec<PendingJob>,
) -> (Vec<PendingJob>, Vec<Pending>) {
    let limited = cfg.qos.values().any(|q| {
        q.max_running_leaves_per_user > 0 || q.max_running_jobs_per_user > 0
    }) || !cfg.account_limits.is_empty();
    if !limited {
        return (queue, Vec::new());
    }
    let mut used = Use::default();
    for j in st.running_jobs() {
        let leaves = j.row.alloc.as_deref().map_or(0.0, held_slices).ceil() as u64;
        let qos = j.row.qos.as_deref().unwrap_or(&cfg.default_qos);
        let u = used.user.entry((j.row.uid, qos)).or_default();
        *u = (u.0 + leaves, u.1 + 1);
        *used.account.entry(&j.row.account).or_default() += leaves;
    }
    let mut held = Vec::new();
    let mut keep = Vec::with_capacity(queue.len());
    for p in queue {
        let j = st.job(p.id).expect("a queued job is known");
        match over_limit(cfg, j, &mut used) {
            None => keep.push(p),
            Some(reason) => held.push(Pending {
                job: p.id,
                reason: Reason::Limit(reason.into()),
                estimated_start: None,
            }),
        }
    }
    (keep, held)
}

/// The limit a job would exceed, by Slurm's name; when none, count it in.
fn over_limit<'a>(cfg: &'a PriorityConfig, j: &'a Job, used: &mut Use<'a>) -> Option<&'static str> {
    let leaves = fs::requested_slices(&j.row.request) as u64;
    let qos_name = j.row.qos.as_deref().unwrap_or(&cfg.default_qos);
    let q = cfg.qos.get(qos_name);
    let u = used.user.get(&(j.row.uid, qos_name)).copied().unwrap_or((0, 0));
    let acct = used.account.get(j.row.account.as_str()).copied().unwrap_or(0);
    if let Some(q) = q {
        let max = q.max_running_leaves_per_user as u64;
        if max > 0 && u.0 + leaves > max {
            return Some("QOSMaxGRESPerUser");
        }
        let max = q.max_running_jobs_per_user as u64;
        if max > 0 && u.1 + 1 > max {
            return Some("QOSMaxJobsPerUserLimit");
        }
    }
    if let Some(&max) = cfg.account_limits.get(&j.row.account) {
        if acct + leaves > max as u64 {
            return Some("AssocGrpGRES");
        }
    }
    used.user.insert((j.row.uid, qos_name), (u.0 + leaves, u.1 + 1));
    used.account.insert(&j.row.account, acct + leaves);
    None
}

/// Jobs of `uid` in QOS `qos` that are pending or running (for max_submit_jobs_per_user).
pub(crate) fn queued_in_qos(cfg: &PriorityConfig, st: &State, uid: u32, qos: &str) -> u32 {
    let in_qos = |j: &&Job| j.row.qos.as_deref().unwrap_or(&cfg.default_qos) == qos;
    let n = pending_jobs(st).chain(st.running_jobs());
    n.filter(|j| j.row.uid == uid).filter(in_qos).count() as u32
}

/// The queue for a pass with each job's priority recomputed, in the core's order, and the
/// priorities by job id (what flexq's `%Q` shows).
pub(crate) fn prioritize(
    cfg: &PriorityConfig,
    st: &State,
    snapshot: &[PendingJob],
    now: u64,
) -> (Vec<PendingJob>, Vec<(JobId, i64)>) {
    if cfg.weights.is_zero() {
        let by_id = snapshot.iter().map(|p| (p.id, p.priority)).collect();
        return (snapshot.to_vec(), sorted(by_id));
    }
    let shares = Shares::new(st, cfg, now);
    let units = st.cluster.units();
    let mut queue = Vec::with_capacity(snapshot.len());
    let mut by_id = Vec::with_capacity(snapshot.len());
    for p in snapshot {
        let j = st.job(p.id).expect("a queued job is known");
        let priority = factors(cfg, &shares, units, j, now).priority(&cfg.weights);
        by_id.push((p.id, priority));
        queue.push(PendingJob {
            priority,
            ..p.clone()
        });
    }
    queue.sort_by_key(|j| (std::cmp::Reverse(j.priority), j.id));
    (queue, sorted(by_id))
}

fn sorted(mut v: Vec<(JobId, i64)>) -> Vec<(JobId, i64)> {
    v.sort_unstable_by_key(|p| p.0);
    v
}

fn pending_jobs(st: &State) -> impl Iterator<Item = &Job> {
    st.jobs()
        .filter(|j| j.row.state == flex_proto::JobState::Pending)
}
