//! What an accounting record used, for flexacct's columns and flexreport's sums. Pure
//! functions of a record and the clock, so both commands count the same way.
//!
//! A unit counts by its share: a MIG leaf or a whole GPU held alone counts 1, a quarter of a
//! whole GPU 0.25. GPU equivalents are SM slices ÷ 7 × share (a whole GPU = 1, a 3g leaf =
//! 3/7); memory is the unit's memory × share; cores count one each.

use flex_proto::{AcctRecord, JobState};

/// SM slices of a whole GPU.
pub const GPU_SLICES: f64 = 7.0;

/// Leaves held, each counted by its share.
pub fn leaves(r: &AcctRecord) -> f64 {
    r.leaves.iter().map(|l| l.share as f64 / 1000.0).sum()
}

/// GPU equivalents held.
pub fn gpu_equivalents(r: &AcctRecord) -> f64 {
    r.leaves
        .iter()
        .map(|l| l.sm_slices as f64 / GPU_SLICES * l.share as f64 / 1000.0)
        .sum()
}

/// GPU memory held, in bytes (units whose memory was not recorded count 0).
pub fn memory_bytes(r: &AcctRecord) -> f64 {
    r.leaves
        .iter()
        .map(|l| l.memory_bytes.unwrap_or(0) as f64 * l.share as f64 / 1000.0)
        .sum()
}

pub fn cores(r: &AcctRecord) -> f64 {
    r.cores.len() as f64
}

/// When it stopped running: its end, or `now` while it runs (None if it never started).
fn run_end(r: &AcctRecord, now: u64) -> Option<u64> {
    r.start_time?;
    Some(r.end_time.unwrap_or(now))
}

/// Seconds it ran (so far).
pub fn elapsed(r: &AcctRecord, now: u64) -> u64 {
    match (r.start_time, run_end(r, now)) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        _ => 0,
    }
}

/// Seconds between eligible and start; for a job that never started, until it ended (or
/// until `now` while it waits).
pub fn wait(r: &AcctRecord, now: u64) -> u64 {
    let until = match (r.start_time, r.end_time) {
        (Some(s), _) => s,
        (None, Some(e)) => e,
        (None, None) if r.state == JobState::Pending => now,
        (None, None) => r.eligible_time,
    };
    until.saturating_sub(r.eligible_time)
}

/// Seconds of its run inside [`start`, `end`).
pub fn run_within(r: &AcctRecord, start: u64, end: u64, now: u64) -> u64 {
    match (r.start_time, run_end(r, now)) {
        (Some(s), Some(e)) => e.min(end).saturating_sub(s.max(start)),
        _ => 0,
    }
}

/// Usage over a period, in hours of each resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    pub leaf_hours: f64,
    pub gpu_hours: f64,
    pub mem_gib_hours: f64,
    pub core_hours: f64,
    /// Leaf-hours of the jobs whose GPU utilisation flexd's telemetry reported, and the
    /// leaves' worth of them that was busy (mean utilisation × hours): their ratio is how busy
    /// those leaves were.
    pub gpu_sampled_leaf_hours: f64,
    pub gpu_busy_leaf_hours: f64,
    /// GPU energy in kWh, each job's in the part of its run inside the period.
    pub gpu_energy_kwh: f64,
    /// Whether any of the GPU figures came from simulated telemetry.
    pub gpu_simulated: bool,
}

impl Usage {
    /// What `r` used inside [`start`, `end`).
    pub fn of(r: &AcctRecord, start: u64, end: u64, now: u64) -> Usage {
        let within = run_within(r, start, end, now);
        let h = within as f64 / 3600.0;
        let mut u = Usage {
            leaf_hours: leaves(r) * h,
            gpu_hours: gpu_equivalents(r) * h,
            mem_gib_hours: memory_bytes(r) / (1u64 << 30) as f64 * h,
            core_hours: cores(r) * h,
            ..Usage::default()
        };
        if let Some(g) = &r.gpu_usage {
            if let Some(util) = g.util_ave_pct {
                u.gpu_sampled_leaf_hours = leaves(r) * h;
                u.gpu_busy_leaf_hours = util / 100.0 * h;
            }
            let run = elapsed(r, now);
            if let (Some(j), true) = (g.energy_j, run > 0) {
                u.gpu_energy_kwh = j * within as f64 / run as f64 / 3.6e6;
            }
            u.gpu_simulated = g.simulated();
        }
        u
    }

    pub fn add(&mut self, o: &Usage) {
        self.leaf_hours += o.leaf_hours;
        self.gpu_hours += o.gpu_hours;
        self.mem_gib_hours += o.mem_gib_hours;
        self.core_hours += o.core_hours;
        self.gpu_sampled_leaf_hours += o.gpu_sampled_leaf_hours;
        self.gpu_busy_leaf_hours += o.gpu_busy_leaf_hours;
        self.gpu_energy_kwh += o.gpu_energy_kwh;
        self.gpu_simulated |= o.gpu_simulated;
    }

    /// How busy the leaves whose utilisation was reported were, 0 to 1 (None: none was).
    pub fn gpu_busy(&self) -> Option<f64> {
        (self.gpu_sampled_leaf_hours > 0.0)
            .then(|| self.gpu_busy_leaf_hours / self.gpu_sampled_leaf_hours)
    }
}

/// What its latest run used, as sacct's `TRESUsageInMax` (`max`) or `TRESUsageInAve`:
/// `cpu=00:06:00,mem=1.50G,gres/gpumem=3G,gres/gpuutil=100`. `cpu` is its CPU time, `mem` its
/// peak resident memory (one task: its peak is also its mean), `gres/gpumem` the GPU memory in
/// use on its leaves together and `gres/gpuutil` their utilisation in percent of one leaf,
/// summed over its leaves, from flexd's telemetry; a figure not measured or not reported is
/// left out.
pub fn tres_usage(r: &AcctRecord, max: bool) -> String {
    let mut parts = Vec::new();
    if let Some(us) = r.cpu_usec {
        let secs = (us as f64 / 1e6).round() as u64;
        parts.push(format!("cpu={}", crate::when::format_elapsed(secs)));
    }
    if let Some(b) = r.max_rss {
        parts.push(format!("mem={}", crate::units::format_size(b)));
    }
    if let Some(g) = &r.gpu_usage {
        let (mem, util) = if max {
            (g.mem_max_bytes, g.util_max_pct)
        } else {
            (g.mem_ave_bytes, g.util_ave_pct)
        };
        if let Some(m) = mem {
            parts.push(format!("gres/gpumem={}", crate::units::format_size(m)));
        }
        if let Some(u) = util {
            parts.push(format!("gres/gpuutil={}", u.round()));
        }
    }
    parts.join(",")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flex_proto::AcctLeaf;
    use gres_plugin::{JobId, Request};

    pub(crate) fn record(
        start: Option<u64>,
        end: Option<u64>,
        leaves: Vec<AcctLeaf>,
    ) -> AcctRecord {
        AcctRecord {
            id: JobId(1),
            name: "j".into(),
            user: "ana".into(),
            uid: 1000,
            gid: 1000,
            account: "phys".into(),
            state: if end.is_some() {
                JobState::Completed
            } else if start.is_some() {
                JobState::Running
            } else {
                JobState::Pending
            },
            submit_time: 100,
            eligible_time: 100,
            start_time: start,
            end_time: end,
            exit_code: end.map(|_| 0),
            signal: None,
            reason: None,
            request: Request::leaves(2, 3600),
            host: start.map(|_| "h".into()),
            leaves,
            cores: if start.is_some() {
                vec![0, 1, 2, 3]
            } else {
                Vec::new()
            },
            mem_bytes: 0,
            array: None,
            restarts: 0,
            max_rss: None,
            cpu_usec: None,
            gpu_usage: None,
            comment: None,
        }
    }

    fn leaf(profile: &str, sm: u32, share: u32, mem: u64) -> AcctLeaf {
        AcctLeaf {
            uuid: format!("MIG-{profile}"),
            profile: profile.into(),
            gpu: 0,
            share,
            sm_slices: sm,
            memory_bytes: Some(mem),
        }
    }

    #[test]
    fn shares_slices_and_clipping() {
        let r = record(
            Some(3700),
            Some(3700 + 7200),
            vec![
                leaf("1g.5gb", 1, 1000, 5 << 30),
                leaf("3g.20gb", 3, 1000, 20 << 30),
                leaf("gpu", 7, 250, 40 << 30),
            ],
        );
        assert!((leaves(&r) - 2.25).abs() < 1e-12);
        assert!((gpu_equivalents(&r) - (4.0 / 7.0 + 0.25)).abs() < 1e-12);
        assert_eq!(memory_bytes(&r), (35u64 << 30) as f64);
        assert_eq!((elapsed(&r, 0), wait(&r, 0)), (7200, 3600));
        // The last hour of its two falls in [7300, 20000).
        let u = Usage::of(&r, 7300, 20000, 0);
        assert!((u.leaf_hours - 2.25).abs() < 1e-12);
        assert!((u.core_hours - 4.0).abs() < 1e-12);
        assert!((u.mem_gib_hours - 35.0).abs() < 1e-12);
        assert_eq!(Usage::of(&r, 20000, 30000, 0), Usage::default());
        // Running: until now.
        let running = record(Some(1000), None, vec![leaf("1g.5gb", 1, 1000, 0)]);
        assert_eq!(elapsed(&running, 4600), 3600);
        assert_eq!(run_within(&running, 0, 2000, 4600), 1000);
        let pending = record(None, None, vec![]);
        assert_eq!((elapsed(&pending, 500), wait(&pending, 500)), (0, 400));
    }

    #[test]
    fn tres_usage_spells_what_the_run_used_and_leaves_out_what_is_not_known() {
        let mut r = record(Some(200), Some(800), Vec::new());
        assert_eq!(tres_usage(&r, true), "");
        r.cpu_usec = Some(359_600_000);
        r.max_rss = Some(3 << 29);
        r.gpu_usage = Some(flex_proto::GpuUsage {
            source: "nvml".into(),
            samples: 12,
            period_s: 30.0,
            mem_max_bytes: Some(3 << 30),
            mem_ave_bytes: Some(5 << 29),
            util_max_pct: Some(99.6),
            util_ave_pct: None,
            energy_j: None,
        });
        assert_eq!(
            tres_usage(&r, true),
            "cpu=00:06:00,mem=1.50G,gres/gpumem=3G,gres/gpuutil=100"
        );
        assert_eq!(
            tres_usage(&r, false),
            "cpu=00:06:00,mem=1.50G,gres/gpumem=2.50G"
        );
    }
}
