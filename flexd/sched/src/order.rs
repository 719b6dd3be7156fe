//! Queue order: a pure function of each pending job's fields, its submission time and `now`.
//!
//! Priority always comes first (a higher [`PendingJob::priority`] runs first, so a multifactor
//! priority computed elsewhere composes with every order here); inside one priority the
//! policy's [`Order`] decides, and submission (id) order breaks ties.
//!
//! - `Submit`: submission order (the classic FIFO queue).
//! - `Shortest` / `Longest`: by time limit, each second waited counting as `aging_pct` / 100
//!   seconds less (shortest) or more (longest) of limit, so that no job starves.
//! - `Adaptive`, Flex's own: the backlog is the pending leaf-seconds (leaves × limit) ÷ the
//!   model's units. A pending job whose limit is at least the backlog is on the critical path
//!   (started last, it alone would stretch the makespan): those go first, longest first. Every
//!   other job goes shortest first with aging. A deep backlog so favours short jobs (mean wait);
//!   a queue about to drain starts its long jobs early (makespan). It reads only the queue and
//!   the model's size, never the future. (Adding the running jobs' longest remaining limit to
//!   the backlog made it start long jobs too late: measured in docs/flexsim.md's sweep.)

use super::{PendingJob, Policy, Time};
use serde::{Deserialize, Serialize};

/// How jobs of one priority are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Submission order.
    #[default]
    Submit,
    /// Shortest time limit first, with aging.
    Shortest,
    /// Longest time limit first, with aging.
    Longest,
    /// Critical-path jobs longest first, then the rest shortest first (see the module doc).
    Adaptive,
}

impl Order {
    pub const NAMES: [&'static str; 4] = ["submit", "shortest", "longest", "adaptive"];
}

impl std::str::FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "submit" | "fifo" => Ok(Order::Submit),
            "shortest" | "sjf" => Ok(Order::Shortest),
            "longest" | "ljf" => Ok(Order::Longest),
            "adaptive" => Ok(Order::Adaptive),
            _ => Err(format!("unknown order {s:?} (one of {:?})", Order::NAMES)),
        }
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Order::NAMES[*self as usize])
    }
}

/// What the ordering knows besides the jobs: the model's units (leaves; 0 when unknown).
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub units: u64,
}

/// Sort `jobs` into the policy's order. `submitted` gives a job's submission time (`now` when
/// unknown: no aging).
pub fn sort_queue(
    jobs: &mut [&PendingJob],
    policy: &Policy,
    now: Time,
    submitted: &impl Fn(&PendingJob) -> Time,
    load: Load,
) {
    let aged = |j: &PendingJob| {
        let wait = now.saturating_sub(submitted(j)) as u128;
        (wait * policy.aging_pct as u128 / 100) as i128
    };
    let limit = |j: &PendingJob| j.request.time_limit_s as i128;
    match policy.order {
        Order::Submit => jobs.sort_by_key(|j| (std::cmp::Reverse(j.priority), j.id)),
        Order::Shortest => {
            jobs.sort_by_cached_key(|j| (std::cmp::Reverse(j.priority), limit(j) - aged(j), j.id))
        }
        Order::Longest => {
            jobs.sort_by_cached_key(|j| (std::cmp::Reverse(j.priority), -limit(j) - aged(j), j.id))
        }
        Order::Adaptive => {
            let work: u128 = jobs
                .iter()
                .map(|j| size(j) as u128 * j.request.time_limit_s as u128)
                .sum();
            let backlog = (work / load.units.max(1) as u128) as i128;
            jobs.sort_by_cached_key(|j| {
                let critical = limit(j) >= backlog;
                let key = if critical {
                    -limit(j)
                } else {
                    limit(j) - aged(j)
                };
                (std::cmp::Reverse(j.priority), !critical, key, j.id)
            })
        }
    }
}

/// Leaves a job asks for (a fraction counts as one unit).
fn size(j: &PendingJob) -> u32 {
    j.request.leaves.unwrap_or(1).max(1)
}
