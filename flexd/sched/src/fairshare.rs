//! Multifactor priority and fair share, as plain arithmetic: flexd (from its state and store)
//! and flexsim (from a trace) compute each pending job's [`Factors`] before a pass and hand the
//! core a [`PendingJob::priority`](super::PendingJob::priority); nothing here reads a clock.
//!
//! - Usage is charged in compute slices × seconds (a 1g leaf is one slice, a whole GPU seven, a
//!   share of a whole GPU its fraction of seven) and decays with a half-life ([`Decayed`]).
//! - The fair-share factor of a user (or an account) is Slurm's classic `2^(-U/S)`: `U` its
//!   share of all decayed usage, `S` its share of all shares; 1 with no usage, 0.5 at exactly
//!   its share, towards 0 above it.
//! - Priority = nice-adjusted base + Σ weight × factor, each factor in [0, 1]. With every
//!   weight 0 the priority is the base alone, so the queue keeps its submission order.

use super::Time;
use serde::{Deserialize, Serialize};

/// A quantity that halves every `half_life` seconds, as of `at`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decayed {
    pub value: f64,
    pub at: Time,
}

impl Decayed {
    /// The value at `t` (never grows back for a `t` before `at`); `half_life` 0: no decay.
    pub fn at(&self, t: Time, half_life: u64) -> f64 {
        if half_life == 0 || t <= self.at {
            return self.value;
        }
        self.value * 0.5f64.powf((t - self.at) as f64 / half_life as f64)
    }

    /// Add `amount` at `t`.
    pub fn add(&mut self, amount: f64, t: Time, half_life: u64) {
        self.value = self.at(t, half_life) + amount;
        self.at = self.at.max(t);
    }
}

/// The weights of the factors (flexd.toml's `[priority]`); all 0 gives the submission order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weights {
    pub age: u32,
    pub fairshare: u32,
    pub job_size: u32,
    pub qos: u32,
    /// Waiting this long gives the whole age factor (0: the age factor is 0).
    pub max_age_s: u64,
}

impl Weights {
    /// Whether priority is the base priority alone (every weight 0).
    pub fn is_zero(&self) -> bool {
        self.age == 0 && self.fairshare == 0 && self.job_size == 0 && self.qos == 0
    }
}

/// A pending job's factors, each in [0, 1], and its base (`-nice`, plus anything fixed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub age: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub qos: f64,
    pub base: i64,
}

impl Factors {
    /// The priority the core orders by.
    pub fn priority(&self, w: &Weights) -> i64 {
        let sum = w.age as f64 * self.age
            + w.fairshare as f64 * self.fairshare
            + w.job_size as f64 * self.job_size
            + w.qos as f64 * self.qos;
        self.base.saturating_add(sum.round() as i64)
    }
}

/// The age factor of a job submitted at `submitted`.
pub fn age_factor(submitted: Time, now: Time, max_age_s: u64) -> f64 {
    if max_age_s == 0 {
        return 0.0;
    }
    (now.saturating_sub(submitted) as f64 / max_age_s as f64).min(1.0)
}

/// Slurm's classic fair-share factor `2^(-U/S)`: `usage` of `total_usage`, `shares` of
/// `total_shares`. 1 when nothing was used yet; 0 for no shares.
pub fn fair_share(usage: f64, total_usage: f64, shares: f64, total_shares: f64) -> f64 {
    if shares <= 0.0 || total_shares <= 0.0 {
        return 0.0;
    }
    if total_usage <= 0.0 || usage <= 0.0 {
        return 1.0;
    }
    let u = usage / total_usage;
    let s = shares / total_shares;
    2f64.powf(-u / s)
}

/// Compute slices a request asks for: one per leaf, or `ceil(f × 7)` for a GPU fraction.
pub fn requested_slices(r: &gres_plugin::Request) -> u32 {
    match (r.leaves, r.gpus) {
        (Some(n), _) => n.max(1),
        (None, Some(f)) => ((f * 7.0).ceil() as u32).max(1),
        (None, None) => 1,
    }
}

/// Jain's fairness index of some non-negative values: 1 when all are equal, 1/n when one value
/// holds everything; 1 for no values or all zero.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if values.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (values.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_halves_every_half_life_and_adds_up() {
        let mut d = Decayed::default();
        d.add(100.0, 1000, 3600);
        assert_eq!(d.at(1000 + 3600, 3600), 50.0);
        assert_eq!(d.at(1000 + 7200, 3600), 25.0);
        d.add(50.0, 1000 + 3600, 3600);
        assert_eq!((d.value, d.at), (100.0, 4600));
        // No decay with a half-life of 0, and none backwards.
        assert_eq!(d.at(1_000_000, 0), 100.0);
        assert_eq!(d.at(10, 3600), 100.0);
    }

    #[test]
    fn fair_share_is_one_unused_half_at_share_and_falls_above() {
        assert_eq!(fair_share(0.0, 0.0, 1.0, 2.0), 1.0);
        assert_eq!(fair_share(0.0, 10.0, 1.0, 2.0), 1.0);
        assert_eq!(fair_share(5.0, 10.0, 1.0, 2.0), 0.5);
        assert_eq!(fair_share(10.0, 10.0, 1.0, 2.0), 0.25);
        assert_eq!(fair_share(10.0, 10.0, 0.0, 2.0), 0.0);
    }

    #[test]
    fn zero_weights_leave_the_base_and_weights_scale_factors() {
        let f = Factors {
            age: 0.5,
            fairshare: 0.25,
            job_size: 1.0,
            qos: 1.0,
            base: -3,
        };
        assert_eq!(f.priority(&Weights::default()), -3);
        let w = Weights {
            age: 1000,
            fairshare: 10000,
            job_size: 0,
            qos: 100,
            max_age_s: 3600,
        };
        assert_eq!(f.priority(&w), -3 + 500 + 2500 + 100);
        assert_eq!(age_factor(0, 1800, 3600), 0.5);
        assert_eq!(age_factor(0, 9000, 3600), 1.0);
        assert_eq!(age_factor(0, 9000, 0), 0.0);
    }

    #[test]
    fn slices_and_jain() {
        use gres_plugin::Request;
        assert_eq!(requested_slices(&Request::leaves(4, 60)), 4);
        let mut r = Request::leaves(1, 60);
        r.leaves = None;
        r.gpus = Some(0.5);
        assert_eq!(requested_slices(&r), 4);
        assert_eq!(jain(&[2.0, 2.0, 2.0]), 1.0);
        assert_eq!(jain(&[4.0, 0.0, 0.0, 0.0]), 0.25);
        assert_eq!(jain(&[]), 1.0);
    }
}
