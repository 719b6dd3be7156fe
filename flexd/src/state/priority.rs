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
            let d = map.entry(name.to_string()).or_default();
            d.add(amount, end, half_life);
            rows.push(UsageRow {
                holder,
                name: name.to_string(),
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
    /// Decayed usage at `now`, plus what running jobs used so far; everyone with usage, a
    /// running job or a pending one (`waiting`: users and accounts) counts towards the totals
    /// of shares.
    pub(crate) fn new(
        st: &'a State,
        cfg: &'a PriorityConfig,
        now: u64,
        waiting: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Shares<'a> {
        let hl = cfg.half_life_s;
        let mut users: HashMap<&str, f64> = st
            .ledger
            .users
            .iter()
            .map(|(k, d)| (k.as_str(), d.at(now, hl)))
            .collect();
        let mut accounts: HashMap<&str, f64> = st
            .ledger
            .accounts
            .iter()
            .map(|(k, d)| (k.as_str(), d.at(now, hl)))
            .collect();
        for j in st.running_jobs() {
            let so_far = match (j.row.start_time, j.row.alloc.as_deref()) {
                (Some(s), Some(a)) => held_slices(a) * now.saturating_sub(s) as f64,
                _ => 0.0,
            };
            *users.entry(&j.row.user).or_default() += so_far;
            *accounts.entry(&j.row.account).or_default() += so_far;
        }
        for (user, account) in waiting {
            users.entry(user).or_default();
            accounts.entry(account).or_default();
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

/// A pending job's factors (flexprio; a pass computes the same in state/prepare.rs with the
/// per-user parts computed once per user).
pub(crate) fn factors(
    cfg: &PriorityConfig,
    shares: &Shares,
    units: u64,
    j: &Job,
    now: u64,
) -> Factors {
    let fairshare = if cfg.weights.fairshare == 0 {
        0.0
    } else {
        shares.factor(&j.row.user, &j.row.account)
    };
    let p = super::pending_job(j);
    let q = qos_factor(cfg, qos_of(cfg, j));
    let parts = (fairshare, q);
    job_factors(
        cfg,
        &p.request,
        p.priority,
        j.row.submit_time,
        parts,
        units,
        now,
    )
}

/// The factors from a queued job's request, its base priority (as submitted, less its nice),
/// its submit time and its user's (fair share, QOS factor).
pub(crate) fn job_factors(
    cfg: &PriorityConfig,
    request: &gres_plugin::Request,
    base: i64,
    submitted: u64,
    (fairshare, qos): (f64, f64),
    units: u64,
    now: u64,
) -> Factors {
    Factors {
        age: fs::age_factor(submitted, now, cfg.weights.max_age_s),
        fairshare,
        job_size: (fs::requested_slices(request) as f64 / units.max(1) as f64).min(1.0),
        qos,
        base,
    }
}

/// The QOS factor: its priority over the largest.
pub(crate) fn qos_factor(cfg: &PriorityConfig, q: Option<&Qos>) -> f64 {
    let max = cfg.max_qos_priority();
    match q {
        Some(q) if max > 0 => q.priority as f64 / max as f64,
        _ => 0.0,
    }
}

/// A job's QOS (None when flexd.toml no longer defines it: no limits, no QOS priority).
pub(crate) fn qos_of<'c>(cfg: &'c PriorityConfig, j: &Job) -> Option<&'c Qos> {
    cfg.qos
        .get(j.row.qos.as_deref().unwrap_or(&cfg.default_qos))
}

/// flexprio's row for a pending job.
pub(crate) fn prio_row(cfg: &PriorityConfig, f: &Factors, j: &Job) -> PrioRow {
    let w = &cfg.weights;
    PrioRow {
        job: j.row.id,
        user: j.row.user.to_string(),
        account: j.row.account.to_string(),
        qos: j.row.qos.as_deref().unwrap_or(&cfg.default_qos).to_string(),
        priority: f.priority(w),
        age: w.age as f64 * f.age,
        fairshare: w.fairshare as f64 * f.fairshare,
        job_size: w.job_size as f64 * f.job_size,
        qos_part: w.qos as f64 * f.qos,
        nice: (-f.base).clamp(i32::MIN as i64, i32::MAX as i64) as i32,
    }
}

pub(crate) fn pending_jobs(st: &State) -> impl Iterator<Item = &Job> {
    st.jobs()
        .filter(|j| j.row.state == flex_proto::JobState::Pending)
}
