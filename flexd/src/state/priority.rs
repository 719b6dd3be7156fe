//! Priorities and limits, decided before each pass: every pending job's multifactor priority
//! (age, fair share, job size, QOS, nice; see [`flex_sched::fairshare`]) and the jobs that a
//! QOS or account limit holds back (left out of the core's queue, with Slurm's reason).
//!
//! Fair-share usage lives in a [`Ledger`]: decayed slice-seconds per user and per account,
//! loaded from the store at start-up and charged when a job ends (the new value goes to the
//! store with the end). A job is charged its dominant share of the host in slices
//! ([`billed_slices`]): the SM slices it holds, or its share of the host's cores or of its
//! memory times the host's slices, whichever is largest (Slurm's `PriorityFlags=MAX_TRES`),
//! so a CPU-only job that holds half the cores pays as much as one that holds half the GPUs. Running jobs count what they have used so far at each pass, from their
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
    pub(crate) fn charge(
        &mut self,
        j: &Job,
        end: u64,
        half_life: u64,
        host: &HostTotals,
    ) -> Vec<UsageRow> {
        let (Some(start), Some(a)) = (j.row.start_time, j.row.alloc.as_deref()) else {
            return Vec::new();
        };
        let amount = billed_slices(a, host) * end.saturating_sub(start) as f64;
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

/// What the host has, to charge cores and memory in slices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HostTotals {
    pub slices: f64,
    pub cores: f64,
    /// Schedulable host memory; 0 when unknown (memory is then not charged).
    pub mem: f64,
}

impl HostTotals {
    pub(crate) fn of(c: &flex_sched::Cluster) -> HostTotals {
        let Some((id, h)) = c.hosts().next() else {
            return HostTotals {
                slices: 0.0,
                cores: 0.0,
                mem: 0.0,
            };
        };
        HostTotals {
            slices: h.leaves.iter().map(|l| f64::from(l.sm_slices)).sum(),
            cores: h.cores.len() as f64,
            mem: c.memory(id).0.unwrap_or(0) as f64,
        }
    }
}

/// What a job is charged per second: its dominant share of the host, in slices.
pub(crate) fn billed_slices(a: &StoredAlloc, host: &HostTotals) -> f64 {
    let share = |held: f64, total: f64| {
        if total > 0.0 {
            held / total * host.slices
        } else {
            0.0
        }
    };
    held_slices(a)
        .max(share(a.cores.len() as f64, host.cores))
        .max(share(a.placement.mem_bytes as f64, host.mem))
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
        let host = HostTotals::of(&st.cluster);
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
                (Some(s), Some(a)) => billed_slices(a, &host) * now.saturating_sub(s) as f64,
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
        // A user asked for by name has a row even before any usage: its shares, usage 0
        // (sshare shows every user's association).
        users.extend(only.iter().map(String::as_str));
        accounts.sort_unstable();
        users.sort_unstable();
        users.dedup();
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

#[cfg(test)]
mod tests {
    use super::*;
    use flex_sched::{Allocation, Unit};
    use gres_plugin::{CoreId, HostId, LeafId};

    fn testbed() -> gres_plugin::HostModel {
        let t = gres_plugin::topology::builtin("a100-40gb-x2").unwrap();
        let mut h =
            gres_plugin::probe::build_host(&gres_plugin::topology::parse(t, "t").unwrap()).unwrap();
        h.memory_bytes = 32 << 30;
        h
    }

    #[test]
    fn a_job_is_charged_its_dominant_share_of_the_host() {
        let h = testbed();
        // 14 one-slice leaves, 32 cores, 32 GiB.
        let host = HostTotals {
            slices: 14.0,
            cores: 32.0,
            mem: (32u64 << 30) as f64,
        };
        let alloc = |leaves: u32, cores: u32, mem: u64| {
            let a = Allocation {
                host: HostId(0),
                units: (0..leaves)
                    .map(|l| Unit {
                        leaf: LeafId(l),
                        share: 1000,
                    })
                    .collect(),
                cores: (0..cores).map(CoreId).collect(),
                mem_bytes: mem,
            };
            StoredAlloc::new(&a, &h)
        };
        // A GPU job of one leaf and one core: its slice.
        assert_eq!(billed_slices(&alloc(1, 1, 1 << 30), &host), 1.0);
        // A CPU-only job of half the cores: half the host's slices.
        assert_eq!(billed_slices(&alloc(0, 16, 1 << 30), &host), 7.0);
        // A job that holds all the memory: all of them.
        assert_eq!(billed_slices(&alloc(0, 1, 32 << 30), &host), 14.0);
        // Unknown memory is not charged.
        let no_mem = HostTotals { mem: 0.0, ..host };
        assert_eq!(billed_slices(&alloc(0, 1, 32 << 30), &no_mem), 14.0 / 32.0);
    }
}
