//! The queue a pass gets, decided before it: each pending job's priority (state/priority.rs's
//! arithmetic) and the jobs a QOS or account limit holds back, in one walk over the pending
//! jobs that costs a few hundred nanoseconds a job (100,000 jobs well inside a pass's budget;
//! BENCHMARKS.md).
//!
//! What depends on the user alone (fair share, the QOS and its limits) is computed once per
//! distinct (user, account, QOS) — a "who" — not once per job. The [`Roster`] keeps each
//! pending job's who and submit time beside the queue, so a pass reads neither job rows nor
//! strings per job: only the queue's snapshot and one small map.

use super::priority::{job_factors, qos_factor, Shares};
use super::{Job, State};
use crate::fairshare::{PriorityConfig, Qos};
use flex_sched::fairshare::requested_slices;
use flex_sched::{Model as _, Pending, PendingJob, Reason};
use gres_plugin::JobId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// What a pass is given: the queue in priority order when a limit held jobs back (else the
/// snapshot's jobs with `in_order`'s priorities are the queue), the held jobs with their
/// reasons, and every pending job's priority by id.
pub(crate) struct Prepared {
    pub queue: Option<Vec<PendingJob>>,
    pub held: Vec<Pending>,
    pub priorities: Vec<(JobId, i64)>,
    /// Each snapshot job's priority, in the snapshot's order (when `queue` is None).
    pub in_order: Vec<i64>,
    /// Every pending job's submission time by id, for the aging of the ordered policies.
    pub submitted: Vec<(JobId, u64)>,
}

/// One distinct (uid, user, account, QOS) that has had pending jobs since flexd started.
struct WhoKey {
    uid: u32,
    user: Arc<str>,
    account: Arc<str>,
    qos: Arc<str>,
}

/// Pending jobs' who, submit time and base priority (as submitted, less its nice), kept as
/// jobs join and leave the queue.
#[derive(Default)]
pub(crate) struct Roster {
    keys: Vec<WhoKey>,
    index: HashMap<(u32, Arc<str>, Arc<str>), u32>,
    jobs: HashMap<JobId, (u32, u64, i64), BuildHasherDefault<IdHasher>>,
}

/// A job id's hash for the roster: the id itself in the low bits, so that ids close together
/// sit in neighbouring buckets and a pass, which looks up every queued job in about id order,
/// walks the table instead of missing the cache once per job; the top 7 bits (what the table
/// compares first within a group) are mixed from it. flexd hands out the ids, so no one can
/// choose them to collide.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    /// FNV-1a, for keys that are not one u64 (a job id is).
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        const TOP: u64 = 0x7f << 57;
        self.0 = id ^ (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) & TOP);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Roster {
    /// A job joins the queue.
    pub(crate) fn add(&mut self, j: &Job) {
        let r = &j.row;
        let qos = r.qos.clone().unwrap_or_else(|| Arc::from(""));
        let key = (r.uid, r.account.clone(), qos);
        let k = match self.index.get(&key) {
            Some(&k) => k,
            None => {
                let k = self.keys.len() as u32;
                self.keys.push(WhoKey {
                    uid: r.uid,
                    user: r.user.clone(),
                    account: key.1.clone(),
                    qos: key.2.clone(),
                });
                self.index.insert(key, k);
                k
            }
        };
        self.jobs
            .insert(r.id, (k, r.submit_time, r.priority - r.q.nice));
    }

    /// A queued job's base priority (0 for one not on the roster).
    pub(crate) fn base(&self, id: JobId) -> i64 {
        self.jobs.get(&id).map_or(0, |e| e.2)
    }

    /// A queued job's submission time.
    pub(crate) fn submitted(&self, id: JobId) -> Option<u64> {
        self.jobs.get(&id).map(|e| e.1)
    }

    /// A job leaves the queue.
    pub(crate) fn remove(&mut self, id: JobId) {
        self.jobs.remove(&id);
    }
}

/// A who of this pass: what its jobs share.
struct Who<'a> {
    key: &'a WhoKey,
    qos: Option<&'a Qos>,
    qos_name: &'a str,
    fairshare: f64,
    qos_factor: f64,
    /// The first who of the same user and QOS: per-user limits count there.
    group: u32,
    /// Its account's index among this pass's accounts.
    account: u32,
}

/// None when every weight is 0 and no limit is set: the pass then takes the queue as it is.
pub(crate) fn prepare(
    cfg: &PriorityConfig,
    st: &State,
    snapshot: &[PendingJob],
    now: u64,
) -> Option<Prepared> {
    if cfg.weights.is_zero() && !limited(cfg) {
        return None;
    }
    let (mut who, active, jobs) = gather(cfg, &st.roster, snapshot);
    let shares = Shares::new(
        st,
        cfg,
        now,
        active.iter().map(|&k| {
            let w = who[k as usize].as_ref().expect("active");
            (&*w.key.user, &*w.key.account)
        }),
    );
    let accounts = settle(cfg, &shares, &mut who, &active);
    let units = st.cluster.units();
    // Each job's priority, in the snapshot's order.
    let in_order: Vec<i64> = jobs
        .iter()
        .map(|&(p, k, submitted, base)| {
            let w = who[k as usize].as_ref().expect("active");
            let parts = (w.fairshare, w.qos_factor);
            let f = job_factors(cfg, &p.request, base, submitted, parts, units, now);
            f.priority(&cfg.weights)
        })
        .collect();
    // The snapshot is in (base priority, id) order: nearly sorted by id, so this sort is cheap.
    let mut priorities: Vec<(JobId, i64)> = jobs
        .iter()
        .zip(&in_order)
        .map(|(j, &pr)| (j.0.id, pr))
        .collect();
    priorities.sort_unstable_by_key(|p| p.0);
    let mut submitted: Vec<(JobId, u64)> = jobs.iter().map(|j| (j.0.id, j.2)).collect();
    submitted.sort_unstable_by_key(|s| s.0);
    if !limited(cfg) {
        // Nothing to hold back: the snapshot itself takes the priorities (no copy of the queue).
        return Some(Prepared {
            queue: None,
            held: Vec::new(),
            priorities,
            in_order,
            submitted,
        });
    }
    let mut ranked: Vec<(i64, &PendingJob, u32)> = jobs
        .iter()
        .zip(&in_order)
        .map(|(&(p, k, ..), &pr)| (pr, p, k))
        .collect();
    ranked.sort_unstable_by_key(|r| (std::cmp::Reverse(r.0), r.1.id));
    let (queue, held) = limit(cfg, st, &who, &accounts, ranked);
    Some(Prepared {
        queue: Some(queue),
        held,
        priorities,
        in_order: Vec::new(),
        submitted,
    })
}

/// A queued job of this pass: its queue entry, its who, submit time and base priority.
type Queued<'a> = (&'a PendingJob, u32, u64, i64);

/// The snapshot's jobs with their who, each who of this pass (by roster index; None for those
/// with no queued job), and the indexes of those that have some, in order of appearance.
fn gather<'a>(
    cfg: &'a PriorityConfig,
    roster: &'a Roster,
    snapshot: &'a [PendingJob],
) -> (Vec<Option<Who<'a>>>, Vec<u32>, Vec<Queued<'a>>) {
    let mut who: Vec<Option<Who>> = (0..roster.keys.len()).map(|_| None).collect();
    let mut active = Vec::new();
    let mut jobs = Vec::with_capacity(snapshot.len());
    for p in snapshot {
        let &(k, submitted, base) = roster
            .jobs
            .get(&p.id)
            .expect("a queued job is on the roster");
        if who[k as usize].is_none() {
            let key = &roster.keys[k as usize];
            let qos_name: &str = if key.qos.is_empty() {
                &cfg.default_qos
            } else {
                &key.qos
            };
            who[k as usize] = Some(Who {
                key,
                qos: cfg.qos.get(qos_name),
                qos_name,
                fairshare: 0.0,
                qos_factor: 0.0,
                group: k,
                account: 0,
            });
            active.push(k);
        }
        jobs.push((p, k, submitted, base));
    }
    (who, active, jobs)
}

/// Each active who's fair share, QOS factor, limit group and account index; the accounts'
/// indexes.
fn settle<'a>(
    cfg: &PriorityConfig,
    shares: &Shares,
    who: &mut [Option<Who<'a>>],
    active: &[u32],
) -> HashMap<&'a str, u32> {
    let mut groups: HashMap<(u32, &str), u32> = HashMap::new();
    let mut accounts: HashMap<&str, u32> = HashMap::new();
    for &k in active {
        let w = who[k as usize].as_mut().expect("active");
        w.fairshare = match cfg.weights.fairshare {
            0 => 0.0,
            _ => shares.factor(&w.key.user, &w.key.account),
        };
        w.qos_factor = qos_factor(cfg, w.qos);
        w.group = *groups.entry((w.key.uid, w.qos_name)).or_insert(k);
        let next = accounts.len() as u32;
        w.account = *accounts.entry(&*w.key.account).or_insert(next);
    }
    accounts
}

/// Whether any QOS or account limit holds jobs back before a pass.
pub(crate) fn limited(cfg: &PriorityConfig) -> bool {
    let per_user = |q: &Qos| q.max_running_leaves_per_user > 0 || q.max_running_jobs_per_user > 0;
    cfg.qos.values().any(per_user) || !cfg.account_limits.is_empty()
}

/// Walk the ranked jobs and hold back each one a limit stops, counting those let through as if
/// they started (so the core can never start more than a limit allows).
fn limit(
    cfg: &PriorityConfig,
    st: &State,
    who: &[Option<Who>],
    accounts: &HashMap<&str, u32>,
    ranked: Vec<(i64, &PendingJob, u32)>,
) -> (Vec<PendingJob>, Vec<Pending>) {
    let pending = |p: &PendingJob, priority: i64| PendingJob {
        priority,
        ..p.clone()
    };
    // Leaves running (then also let through) per account, and leaves and jobs per group (per
    // user and QOS).
    let mut account = vec![0u64; accounts.len()];
    let mut used = vec![(0u64, 0u64); who.len()];
    let group = |uid: u32, qos: &str| {
        let mut mine = who.iter().flatten();
        mine.find(|w| w.key.uid == uid && w.qos_name == qos)
            .map(|w| w.group)
    };
    for j in st.running_jobs() {
        let leaves = held_leaves(j);
        if let Some(&a) = accounts.get(&*j.row.account) {
            account[a as usize] += leaves;
        }
        if let Some(g) = group(j.row.uid, j.row.qos.as_deref().unwrap_or(&cfg.default_qos)) {
            let u = &mut used[g as usize];
            *u = (u.0 + leaves, u.1 + 1);
        }
    }
    let mut held = Vec::new();
    let mut keep = Vec::new();
    for (pr, p, k) in ranked {
        let leaves = u64::from(requested_slices(&p.request));
        let w = who[k as usize].as_ref().expect("active");
        let acct = &mut account[w.account as usize];
        let u = &mut used[w.group as usize];
        match over(cfg, w, *u, *acct, leaves) {
            Some(reason) => held.push(Pending {
                job: p.id,
                reason: Reason::Limit(std::borrow::Cow::Borrowed(reason)),
                estimated_start: None,
            }),
            None => {
                *u = (u.0 + leaves, u.1 + 1);
                *acct += leaves;
                keep.push(pending(p, pr));
            }
        }
    }
    (keep, held)
}

/// The limit a job of `leaves` would pass, by Slurm's name, with its user's QOS use `u`
/// (leaves, jobs) and its account's leaves `acct`.
fn over(
    cfg: &PriorityConfig,
    w: &Who,
    u: (u64, u64),
    acct: u64,
    leaves: u64,
) -> Option<&'static str> {
    if let Some(q) = w.qos {
        let max = u64::from(q.max_running_leaves_per_user);
        if max > 0 && u.0 + leaves > max {
            return Some("QOSMaxGRESPerUser");
        }
        let max = u64::from(q.max_running_jobs_per_user);
        if max > 0 && u.1 + 1 > max {
            return Some("QOSMaxJobsPerUserLimit");
        }
    }
    match cfg.account_limits.get(&*w.key.account) {
        Some(&max) if acct + leaves > u64::from(max) => Some("AssocGrpGRES"),
        _ => None,
    }
}

/// Leaves (slices) a running job holds, rounded up.
fn held_leaves(j: &Job) -> u64 {
    let held = j
        .row
        .alloc
        .as_deref()
        .map_or(0.0, super::priority::held_slices);
    held.ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn neighbouring_ids_hash_to_neighbouring_buckets_with_mixed_tags() {
        let h = BuildHasherDefault::<IdHasher>::default();
        let ids: Vec<u64> = (1000..1016).map(|id| h.hash_one(JobId(id))).collect();
        assert!(ids.iter().zip(1000..).all(|(&v, id)| v & 0xffff == id));
        let tags: std::collections::HashSet<u64> = ids.iter().map(|v| v >> 57).collect();
        assert!(tags.len() > 8, "{tags:?}");
    }
}
