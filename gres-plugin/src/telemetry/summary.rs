//! A job's GPU usage as telemetry samples build it: [`GpuTotals`], the running totals each
//! sample of the job's leaves adds to (flexd keeps them per running job and stores them, so a
//! restart goes on from them; flexsim builds them from simulated samples), the [`GpuUsage`]
//! summary they make (flexd keeps it with the job's record; `flex_proto` carries it to the
//! commands), and [`leaves_needed`], the fewest leaves a summary says the job needed.

use super::Reading;
use serde::{Deserialize, Serialize};

/// A job's GPU use as flexd sampled it (per leaf, summed over the job's leaves at each
/// sample). A figure the hardware did not report is None ("not reported"), never a guess.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuUsage {
    /// Where the samples came from: `nvml`, or for a simulated topology `simulated (FILE)`
    /// (its samples file) or `simulated (seed N)` (its generator).
    pub source: String,
    /// Samples taken while the job ran in which any of its leaves reported something.
    pub samples: u32,
    /// Seconds between samples.
    pub period_s: f64,
    /// GPU memory in use on the job's leaves together, in bytes: the peak and the mean of the
    /// samples that reported it.
    pub mem_max_bytes: Option<u64>,
    pub mem_ave_bytes: Option<u64>,
    /// Utilisation in percent of one leaf, summed over the job's leaves (a 4-leaf job with
    /// every leaf busy is 400): the peak and the mean of the samples that reported it.
    pub util_max_pct: Option<f64>,
    pub util_ave_pct: Option<f64>,
    /// Energy in joules: at each sample, the power of each of its GPUs times the part of that
    /// GPU it held (SM slices / 7 × share), times the period. None when no GPU reported power
    /// (and in summaries written before energy was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
}

impl GpuUsage {
    /// Whether the samples came from a simulated topology, not the hardware.
    pub fn simulated(&self) -> bool {
        self.source.starts_with("simulated")
    }
}

/// One job's running totals. A sample counts (for `samples`, and for a figure) when at least
/// one of the job's leaves reported something (that figure); the job's value at a sample is
/// the sum over the leaves that did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuTotals {
    /// When the run these totals are of started (a requeued job's next run starts new ones).
    #[serde(default)]
    pub run_start: Option<u64>,
    /// Samples taken of the job's leaves, whether or not they reported anything (a series per
    /// job, as the simulated sources read, goes on from here after a restart).
    pub ticks: u32,
    samples: u32,
    mem_n: u32,
    // Sums and floats are strings in JSON, read back exactly: a sum of bytes may pass 2^53,
    // and serde_json's float parsing may miss the last bit, so that a restarted flexd's
    // means would differ from one that ran throughout.
    #[serde(with = "text")]
    mem_sum: u128,
    mem_max: u64,
    util_n: u32,
    #[serde(with = "text")]
    util_sum: f64,
    #[serde(with = "text")]
    util_max: f64,
    /// Joules so far, when any sample reported power.
    #[serde(with = "opt_text")]
    energy_j: Option<f64>,
}

/// A value as its exact decimal text (Rust's shortest round-trip form for floats).
mod text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::fmt::Display;
    use std::str::FromStr;

    pub fn serialize<T: Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }
    pub fn deserialize<'de, T: FromStr, D: Deserializer<'de>>(d: D) -> Result<T, D::Error>
    where
        T::Err: Display,
    {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e| serde::de::Error::custom(format!("{s:?}: {e}")))
    }
}

/// [`text`] for a value that may be absent.
mod opt_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_some(&v.to_string()),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| {
                s.parse()
                    .map_err(|e| serde::de::Error::custom(format!("{s:?}: {e}")))
            })
            .transpose()
    }
}

impl GpuTotals {
    /// No samples yet of the run that started at `run_start`.
    pub fn of_run(run_start: Option<u64>) -> Self {
        GpuTotals {
            run_start,
            ..GpuTotals::default()
        }
    }

    /// Add one sample of the job's leaves (`readings`, with the part of its GPU each is),
    /// `period_s` after the one before.
    pub fn add<'a>(
        &mut self,
        readings: impl IntoIterator<Item = (&'a Reading, f64)>,
        period_s: f64,
    ) {
        self.ticks += 1;
        let (mut mem, mut util): (Option<u64>, Option<f64>) = (None, None);
        let mut powered = false;
        for (r, gpu_share) in readings {
            if let Some(w) = r.gpu_power_w {
                *self.energy_j.get_or_insert(0.0) += w * gpu_share * period_s;
                powered = true;
            }
            if let Some(m) = r.mem_bytes {
                mem = Some(mem.unwrap_or(0) + m);
            }
            if let Some(u) = r.util_pct {
                util = Some(util.unwrap_or(0.0) + u);
            }
        }
        if mem.is_some() || util.is_some() || powered {
            self.samples += 1;
        }
        if let Some(m) = mem {
            self.mem_n += 1;
            self.mem_sum += m as u128;
            self.mem_max = self.mem_max.max(m);
        }
        if let Some(u) = util {
            self.util_n += 1;
            self.util_sum += u;
            self.util_max = self.util_max.max(u);
        }
    }

    /// The job's summary; None when no sample reported anything.
    pub fn summary(&self, source: &str, period_s: f64) -> Option<GpuUsage> {
        if self.mem_n == 0 && self.util_n == 0 && self.energy_j.is_none() {
            return None;
        }
        // Means rounded to whole bytes, utilisation to hundredths of a percent (a sum of
        // leaves' figures carries float noise), so that a summary reads the same wherever it
        // is computed.
        let mem_ave = (self.mem_n > 0)
            .then(|| ((self.mem_sum + self.mem_n as u128 / 2) / self.mem_n as u128) as u64);
        let util_ave =
            (self.util_n > 0).then(|| (self.util_sum / self.util_n as f64 * 100.0).round() / 100.0);
        Some(GpuUsage {
            source: source.to_string(),
            samples: self.samples,
            period_s,
            mem_max_bytes: (self.mem_n > 0).then_some(self.mem_max),
            mem_ave_bytes: mem_ave,
            util_max_pct: (self.util_n > 0).then_some((self.util_max * 100.0).round() / 100.0),
            util_ave_pct: util_ave,
            energy_j: self.energy_j.map(|j| (j * 10.0).round() / 10.0),
        })
    }
}

/// The fewest of a job's leaves (their memory sizes, bytes) that hold both its peak compute
/// (a leaf's worth per 100% of utilisation) and its peak GPU memory (largest leaves first);
/// None when the summary lacks either peak ("not reported": no advice from a guess).
pub fn leaves_needed(g: &GpuUsage, sizes: &[u64]) -> Option<usize> {
    let (util, mem) = (g.util_max_pct?, g.mem_max_bytes?);
    let compute = (util / 100.0).ceil().max(1.0) as usize;
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut held = 0u64;
    let memory = sizes
        .iter()
        .position(|s| {
            held += s;
            held >= mem
        })
        .map_or(sizes.len(), |i| i + 1);
    Some(compute.max(memory))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, LeafId};

    fn reading(mem: Option<u64>, util: Option<f64>, w: Option<f64>) -> Reading {
        Reading {
            leaf: LeafId(0),
            job: JobId(1),
            mem_bytes: mem,
            util_pct: util,
            gpu_power_w: w,
        }
    }

    #[test]
    fn a_job_whose_leaves_report_nothing_has_no_summary() {
        let mut t = GpuTotals::default();
        t.add([(&reading(None, None, None), 1.0)], 1.0);
        assert_eq!(t.summary("nvml", 1.0), None);
        assert_eq!(t.ticks, 1);
        // Memory without utilisation or power: those are not reported, never 0.
        t.add([(&reading(Some(10), None, None), 1.0)], 1.0);
        let s = t.summary("nvml", 1.0).unwrap();
        assert_eq!(
            (s.mem_max_bytes, s.util_max_pct, s.util_ave_pct, s.energy_j),
            (Some(10), None, None, None)
        );
        assert_eq!(s.samples, 1);
        // A half share of a whole GPU: half its GPU's power, and nothing else of its own.
        let mut share = GpuTotals::default();
        share.add([(&reading(None, None, Some(400.0)), 0.5)], 2.0);
        let s = share.summary("nvml", 2.0).unwrap();
        assert_eq!(
            (s.samples, s.mem_max_bytes, s.energy_j),
            (1, None, Some(400.0))
        );
    }

    #[test]
    fn totals_read_back_as_written() {
        let mut t = GpuTotals::default();
        t.add(
            [(&reading(Some(u64::MAX), Some(33.3), Some(250.0)), 0.25)],
            30.0,
        );
        t.add([(&reading(Some(u64::MAX), Some(66.6), None), 0.25)], 30.0);
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<GpuTotals>(&text).unwrap(), t);
    }

    #[test]
    fn leaves_needed_holds_both_peaks() {
        let g = |util: Option<f64>, mem: Option<u64>| GpuUsage {
            source: "nvml".into(),
            samples: 1,
            period_s: 1.0,
            mem_max_bytes: mem,
            mem_ave_bytes: mem,
            util_max_pct: util,
            util_ave_pct: util,
            energy_j: None,
        };
        let gib = 1u64 << 30;
        let four = [5 * gib, 5 * gib, 10 * gib, 5 * gib];
        assert_eq!(
            leaves_needed(&g(Some(100.0), Some(3 * gib)), &four),
            Some(1)
        );
        assert_eq!(
            leaves_needed(&g(Some(100.0), Some(12 * gib)), &four),
            Some(2)
        );
        assert_eq!(leaves_needed(&g(Some(250.0), Some(gib)), &four), Some(3));
        assert_eq!(leaves_needed(&g(None, Some(gib)), &four), None);
    }
}
