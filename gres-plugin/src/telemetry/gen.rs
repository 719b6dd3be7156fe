//! Simulated telemetry drawn from a seed (`telemetry_seed = N` in a simulated topology): each
//! job gets a usage profile, and each sample of each of its leaves is that profile with noise.
//! Every figure is a pure function of (seed, job, leaf, sample number), so the same seed gives
//! the same series to a job in flexd and in flexsim, in whatever order the leaves are read.
//!
//! A job's profile: the part of a leaf's memory its busy leaves fill (5–95%), their
//! utilisation (5–100%) and the chance that a leaf of it is busy at all (so some jobs hold
//! leaves they leave idle, as the right-size notes are for). A busy leaf's sample is its
//! profile ±10 points of utilisation and ±5% of memory; an idle leaf holds a CUDA context
//! (256 MiB, at most its memory) and is at 0%. The GPU's power is read as if the whole GPU ran
//! like the leaf: 60 W idle up to 400 W at 100%. A job holding a share of a whole GPU gets
//! its own figures (as NVML's per-process ones would be): the profile within its part of the
//! GPU, memory and utilisation times the share.

use super::{Reading, Series, Target, Telemetry};
use crate::ids::JobId;

/// The generator of one seed.
#[derive(Debug)]
pub struct GenTelemetry {
    seed: u64,
    /// Where each job is in its series.
    series: Series,
}

/// splitmix64's finaliser: a well-mixed 64-bit hash of the inputs folded in.
fn mix(mut h: u64, inputs: &[u64]) -> u64 {
    for &v in inputs {
        h = h.wrapping_add(v).wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    h
}

/// A number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Idle and full power of the simulated GPU, watts.
const IDLE_W: f64 = 60.0;
const FULL_W: f64 = 400.0;
/// What an idle leaf of a running job holds: a CUDA context.
const CONTEXT_BYTES: u64 = 256 << 20;

/// One job's usage profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    /// The part of a busy leaf's memory in use, 0.05–0.95.
    pub mem_frac: f64,
    /// A busy leaf's utilisation, percent, 5–100.
    pub util_pct: f64,
    /// The chance that a leaf of the job is busy, 0.25–1.
    pub busy: f64,
}

impl GenTelemetry {
    pub fn new(seed: u64) -> Self {
        GenTelemetry {
            seed,
            series: Series::default(),
        }
    }

    /// The profile the seed gives `job`.
    pub fn profile(&self, job: JobId) -> Profile {
        let h = |k: u64| unit(mix(self.seed, &[1, job.0, k]));
        Profile {
            mem_frac: 0.05 + 0.9 * h(0),
            util_pct: 5.0 + 95.0 * h(1),
            // Half the jobs use every leaf they hold; the others each leaf with 25-100%.
            busy: if h(2) < 0.5 { 1.0 } else { 0.25 + 0.75 * h(3) },
        }
    }

    /// Sample `n` of `t`'s leaf: memory, utilisation, GPU power.
    fn sample(&self, t: &Target, n: u32) -> (u64, f64, f64) {
        let p = self.profile(t.job);
        let leaf = |k: u64| unit(mix(self.seed, &[2, t.job.0, t.leaf.0 as u64, k]));
        let noise = |k: u64| unit(mix(self.seed, &[3, t.job.0, t.leaf.0 as u64, n as u64, k]));
        let (mem, util) = if leaf(0) < p.busy {
            let mem = p.mem_frac * (0.95 + 0.1 * noise(0)) * t.leaf_mem_bytes as f64;
            let util = (p.util_pct + 20.0 * noise(1) - 10.0).clamp(0.0, 100.0);
            (mem.round() as u64, (util * 100.0).round() / 100.0)
        } else {
            (CONTEXT_BYTES, 0.0)
        };
        let mem = mem.min(t.leaf_mem_bytes);
        let power = ((IDLE_W + (FULL_W - IDLE_W) * util / 100.0) * 10.0).round() / 10.0;
        (mem, util, power)
    }
}

impl Telemetry for GenTelemetry {
    fn label(&self) -> String {
        format!("simulated (seed {})", self.seed)
    }

    fn read(&mut self, targets: &[Target]) -> Vec<Reading> {
        let samples = self.series.next(targets);
        targets
            .iter()
            .zip(samples)
            .map(|(t, sample)| {
                let (mem, util, power) = self.sample(t, sample);
                // A share of a whole GPU: its own processes' figures, the profile within its
                // part of the GPU.
                let part = if t.whole { 1.0 } else { t.gpu_share };
                Reading {
                    leaf: t.leaf,
                    job: t.job,
                    mem_bytes: Some((mem as f64 * part).round() as u64),
                    util_pct: Some((util * part * 100.0).round() / 100.0),
                    gpu_power_w: Some(power),
                }
            })
            .collect()
    }

    fn resume(&mut self, job: JobId, taken: u32) {
        self.series.resume(job, taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(leaf: u32, job: u64) -> Target {
        Target::test_mig_leaf(leaf, job)
    }

    fn series(seed: u64, job: u64) -> Vec<Reading> {
        let mut g = GenTelemetry::new(seed);
        let targets: Vec<Target> = (0..4).map(|l| target(l, job)).collect();
        (0..20).flat_map(|_| g.read(&targets)).collect()
    }

    #[test]
    fn a_seed_gives_one_series_whatever_else_is_read() {
        assert_eq!(series(7, 1), series(7, 1));
        assert_ne!(series(7, 1), series(8, 1));
        assert_ne!(series(7, 1), series(7, 2));
        // Reading another job's leaves in between changes nothing of job 1's.
        let mut g = GenTelemetry::new(7);
        let mut mixed = Vec::new();
        for _ in 0..20 {
            let both: Vec<Target> = (0..4).map(|l| target(l, 1)).chain([target(5, 9)]).collect();
            mixed.extend(g.read(&both).into_iter().filter(|r| r.job == JobId(1)));
        }
        assert_eq!(mixed, series(7, 1));
        assert_eq!(g.label(), "simulated (seed 7)");
    }

    #[test]
    fn figures_stay_within_the_leaf_and_a_resumed_job_goes_on_where_it_was() {
        for job in 0..200 {
            for r in series(3, job) {
                let (m, u, w) = (r.mem_bytes.unwrap(), r.util_pct.unwrap(), r.gpu_power_w);
                assert!(m <= 5 << 30 && (0.0..=100.0).contains(&u), "{r:?}");
                assert!(w.is_some_and(|w| (IDLE_W..=FULL_W).contains(&w)), "{r:?}");
            }
        }
        let whole = series(3, 4);
        let mut g = GenTelemetry::new(3);
        let targets: Vec<Target> = (0..4).map(|l| target(l, 4)).collect();
        g.resume(JobId(4), 12);
        assert_eq!(g.read(&targets), whole[48..52].to_vec());
        // A half share of a whole GPU: its own figures, half those of the whole.
        let whole = Target {
            gpu_share: 1.0,
            ..target(0, 4)
        };
        let share = Target {
            whole: false,
            gpu_share: 0.5,
            ..whole.clone()
        };
        let w = GenTelemetry::new(3).read(&[whole])[0].clone();
        let h = GenTelemetry::new(3).read(&[share])[0].clone();
        assert_eq!(
            h.mem_bytes,
            Some((w.mem_bytes.unwrap() as f64 / 2.0).round() as u64)
        );
        assert_eq!(
            h.util_pct,
            Some((w.util_pct.unwrap() * 50.0).round() / 100.0)
        );
        assert_eq!(h.gpu_power_w, w.gpu_power_w);
    }
}
