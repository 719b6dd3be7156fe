//! The policy keys of flexd.toml (`policy`, `backfill_window`, `queue_order`, `aging_pct`),
//! parsed from plain values so that flexd (which reads the file with its defaults and
//! warnings) and flexsim (which replays a flexd.toml) turn them into the same [`Policy`].

use super::{Order, Policy, PolicyKind};

/// The values of the policy keys; None takes the compiled-in default (etc/flexd.toml).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyKeys<'a> {
    pub policy: Option<&'a str>,
    pub backfill_window: Option<i64>,
    pub queue_order: Option<&'a str>,
    pub aging_pct: Option<i64>,
}

impl PolicyKeys<'_> {
    /// The keys, in the order flexd.toml documents them.
    pub const NAMES: [&'static str; 4] = ["policy", "backfill_window", "queue_order", "aging_pct"];
    /// Largest `backfill_window`.
    pub const WINDOW_MAX: i64 = 1_000_000;
    /// Largest `aging_pct`.
    pub const AGING_MAX: i64 = 1_000_000;

    /// The policy these keys give; the error names the key and why.
    pub fn policy(&self) -> Result<Policy, (&'static str, String)> {
        let d = Policy::backfill(Policy::DEFAULT_WINDOW);
        let kind: PolicyKind = match self.policy {
            Some(s) => s.parse().map_err(|e| ("policy", e))?,
            None => d.kind,
        };
        let int = |key, v: Option<i64>, max: i64, default: i64| match v {
            None => Ok(default),
            Some(v) if (0..=max).contains(&v) => Ok(v),
            Some(v) => Err((key, format!("{v} must be between 0 and {max}"))),
        };
        let window = int(
            "backfill_window",
            self.backfill_window,
            Self::WINDOW_MAX,
            d.window as i64,
        )?;
        let order: Order = match self.queue_order {
            Some(s) => s.parse().map_err(|e| ("queue_order", e))?,
            None => d.order,
        };
        let aging = int(
            "aging_pct",
            self.aging_pct,
            Self::AGING_MAX,
            d.aging_pct as i64,
        )?;
        Ok(Policy {
            kind,
            window: window as usize,
            order,
            aging_pct: aging as u32,
        })
    }
}
