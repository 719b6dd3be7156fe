//! Prometheus metrics in the text exposition format (version 0.0.4): counters and the
//! scheduling-pass histogram kept as the daemon works ([`Metrics`]), gauges read from the
//! state when scraped ([`Snapshot`]). Served by `server::http` when `metrics_listen` is set.

use crate::state::{Effect, State};
use crate::store::writer::Op;
use crate::telemetry::LeafGauge;
use flex_proto::JobState;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the scheduling-pass histogram's buckets: 50 µs to 2.5 s.
pub(crate) const PASS_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5,
];

/// What flexd counts since it started.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    started: AtomicU64,
    /// By `JobState::ALL` index.
    ended: [AtomicU64; JobState::ALL.len()],
    /// Passes that took at most `PASS_BUCKETS[i]` and more than the bound before it.
    pass_buckets: [AtomicU64; PASS_BUCKETS.len()],
    pass_count: AtomicU64,
    pass_sum_ns: AtomicU64,
}

fn state_index(s: JobState) -> usize {
    JobState::ALL
        .iter()
        .position(|x| *x == s)
        .expect("every state is in ALL")
}

impl Metrics {
    /// Count what a state change means: a start, or an end in its final state.
    pub(crate) fn effect(&self, e: &Effect) {
        match e {
            Effect::Start(..) | Effect::Launch(_) => {
                self.started.fetch_add(1, Ordering::Relaxed);
            }
            Effect::End(Op::End(end)) | Effect::Write(Op::End(end)) => {
                self.ended[state_index(end.to)].fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Record one scheduling pass.
    pub(crate) fn sched_pass(&self, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = PASS_BUCKETS.iter().position(|b| secs <= *b) {
            self.pass_buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.pass_count.fetch_add(1, Ordering::Relaxed);
        self.pass_sum_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The exposition text: the snapshot's gauges, then the counters and the histogram.
    pub(crate) fn render(&self, snap: &Snapshot) -> String {
        let mut out = String::new();
        let o = &mut out;
        header(
            o,
            "flex_jobs",
            "gauge",
            "Jobs flexd holds, by state (finished ones for keep_finished after their end).",
        );
        for (state, n) in &snap.jobs {
            let _ = writeln!(o, "flex_jobs{{state=\"{state}\"}} {n}");
        }
        header(
            o,
            "flex_leaves",
            "gauge",
            "Leaves of each GPU that jobs hold (busy) or not (free); a shared whole GPU counts \
             the fraction held.",
        );
        for g in &snap.gpus {
            for (state, v) in [("busy", g.busy), ("free", g.free)] {
                let _ = writeln!(
                    o,
                    "flex_leaves{{host=\"{}\",gpu=\"{}\",state=\"{state}\"}} {}",
                    escape(&g.host),
                    g.gpu,
                    number(v)
                );
            }
        }
        header(
            o,
            "flex_cores",
            "gauge",
            "Cores of each host that jobs hold (busy) or not (free).",
        );
        for h in &snap.hosts {
            for (state, v) in [("busy", h.cores_busy), ("free", h.cores_free)] {
                let _ = writeln!(
                    o,
                    "flex_cores{{host=\"{}\",state=\"{state}\"}} {v}",
                    escape(&h.host)
                );
            }
        }
        header(
            o,
            "flex_memory_bytes",
            "gauge",
            "Host memory jobs may be given (RAM less reserved_memory) that they hold (busy) or \
             not (free); absent where the host's RAM is unknown.",
        );
        for h in &snap.hosts {
            if let Some((busy, free)) = h.memory {
                for (state, v) in [("busy", busy), ("free", free)] {
                    let _ = writeln!(
                        o,
                        "flex_memory_bytes{{host=\"{}\",state=\"{state}\"}} {v}",
                        escape(&h.host)
                    );
                }
            }
        }
        header(
            o,
            "flex_jobs_started_total",
            "counter",
            "Jobs started since flexd started.",
        );
        let _ = writeln!(
            o,
            "flex_jobs_started_total {}",
            self.started.load(Ordering::Relaxed)
        );
        header(
            o,
            "flex_jobs_completed_total",
            "counter",
            "Jobs that ended since flexd started, by final state.",
        );
        for s in JobState::ALL.into_iter().filter(|s| s.is_finished()) {
            let n = self.ended[state_index(s)].load(Ordering::Relaxed);
            let _ = writeln!(o, "flex_jobs_completed_total{{state=\"{s}\"}} {n}");
        }
        self.render_passes(o);
        out
    }

    /// The scheduling passes' histogram.
    fn render_passes(&self, o: &mut String) {
        header(
            o,
            "flex_sched_pass_seconds",
            "histogram",
            "Duration of flexd's scheduling passes.",
        );
        // A pass recorded while this reads may be in a bucket but not yet in the count: the
        // count is at least the buckets' sum, so +Inf stays the largest.
        let mut cumulative = 0;
        let counts: Vec<u64> = self
            .pass_buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let count = self
            .pass_count
            .load(Ordering::Relaxed)
            .max(counts.iter().sum());
        for (bound, n) in PASS_BUCKETS.iter().zip(counts) {
            cumulative += n;
            let _ = writeln!(
                o,
                "flex_sched_pass_seconds_bucket{{le=\"{}\"}} {cumulative}",
                number(*bound)
            );
        }
        let _ = writeln!(o, "flex_sched_pass_seconds_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.pass_sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(o, "flex_sched_pass_seconds_sum {}", number(sum));
        let _ = writeln!(o, "flex_sched_pass_seconds_count {count}");
    }
}

/// The latest GPU telemetry of each leaf a job holds, with the job's id; a figure the leaf
/// did not report is left out. `source` is `nvml`, `simulated (FILE)` or `simulated (seed
/// N)`; the `source` label says `nvml` or `simulated`.
pub(crate) fn render_telemetry(o: &mut String, source: &str, gauges: &[LeafGauge]) {
    let short = if source.starts_with("simulated") {
        "simulated"
    } else {
        source
    };
    let labels = |g: &LeafGauge| {
        format!(
            "leaf=\"{}\",uuid=\"{}\",gpu=\"{}\",job=\"{}\",source=\"{}\"",
            g.leaf,
            escape(&g.uuid),
            g.gpu,
            g.job,
            escape(short)
        )
    };
    header(
        o,
        "flex_leaf_gpu_memory_bytes",
        "gauge",
        "GPU memory in use on each leaf a job holds, at the latest telemetry sample.",
    );
    for g in gauges {
        if let Some(m) = g.mem_bytes {
            let _ = writeln!(o, "flex_leaf_gpu_memory_bytes{{{}}} {m}", labels(g));
        }
    }
    header(
        o,
        "flex_leaf_gpu_utilization_percent",
        "gauge",
        "Utilisation of each leaf a job holds, at the latest telemetry sample, where the \
         device reports one.",
    );
    for g in gauges {
        if let Some(u) = g.util_pct {
            let _ = writeln!(
                o,
                "flex_leaf_gpu_utilization_percent{{{}}} {}",
                labels(g),
                number(u)
            );
        }
    }
}

/// The size of flexd's state directory: bounded by the queue's quotas and by `keep_finished`,
/// after which finished jobs' scripts and environments are deleted.
pub(crate) fn render_state_dir(o: &mut String, bytes: u64) {
    header(
        o,
        "flex_state_dir_bytes",
        "gauge",
        "Bytes of the files in flexd's state directory: the database with its journal, run \
         and status files.",
    );
    let _ = writeln!(o, "flex_state_dir_bytes {bytes}");
}

/// The bytes of the files below `dir` (symbolic links are not followed); what cannot be read
/// counts 0.
pub(crate) fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
}

/// A sample value: integers without a fraction, others in Rust's shortest form.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One GPU's leaves.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GpuLeaves {
    pub host: String,
    pub gpu: u32,
    pub busy: f64,
    pub free: f64,
}

/// One host's cores and schedulable memory.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HostUse {
    pub host: String,
    pub cores_busy: u64,
    pub cores_free: u64,
    /// Bytes held and free; None when the host's RAM is unknown.
    pub memory: Option<(u64, u64)>,
}

/// The gauges, read from the state under its lock.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Snapshot {
    pub jobs: Vec<(JobState, u64)>,
    pub gpus: Vec<GpuLeaves>,
    pub hosts: Vec<HostUse>,
}

impl Snapshot {
    pub(crate) fn of(st: &State) -> Snapshot {
        let mut jobs = [0u64; JobState::ALL.len()];
        for j in st.jobs() {
            jobs[state_index(j.row.state)] += 1;
        }
        let mut gpus = Vec::new();
        let mut hosts = Vec::new();
        for (hid, h) in st.cluster.hosts() {
            let free = u64::from(st.cluster.cores_free(hid));
            let (total, mem_free) = st.cluster.memory(hid);
            hosts.push(HostUse {
                host: h.hostname.clone(),
                cores_busy: h.cores.len() as u64 - free,
                cores_free: free,
                memory: total.map(|t| (t - mem_free, mem_free)),
            });
            for g in &h.gpus {
                let mut free = 0u64;
                let mut n = 0u64;
                for l in h.leaves.iter().filter(|l| l.gpu == g.index) {
                    free += u64::from(st.cluster.leaf_free(hid, l.id));
                    n += 1000;
                }
                gpus.push(GpuLeaves {
                    host: h.hostname.clone(),
                    gpu: g.index.0,
                    busy: (n - free) as f64 / 1000.0,
                    free: free as f64 / 1000.0,
                });
            }
        }
        Snapshot {
            jobs: JobState::ALL.into_iter().zip(jobs).collect(),
            gpus,
            hosts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::writer::End;
    use gres_plugin::JobId;

    fn end(to: JobState) -> Effect {
        Effect::End(Op::End(End {
            job: JobId(1),
            from: JobState::Running,
            to,
            time: 0,
            exit_code: None,
            signal: None,
            reason: None,
            cancelled_by: None,
            charge: Vec::new(),
            max_rss: None,
            cpu_usec: None,
        }))
    }

    #[test]
    fn counters_histogram_and_labels() {
        let m = Metrics::default();
        m.effect(&end(JobState::Completed));
        m.effect(&end(JobState::Timeout));
        m.effect(&end(JobState::Timeout));
        m.effect(&end(JobState::OutOfMemory));
        m.effect(&Effect::Write(Op::Barrier));
        m.sched_pass(Duration::from_micros(30));
        m.sched_pass(Duration::from_millis(3));
        m.sched_pass(Duration::from_secs(10));
        let snap = Snapshot {
            jobs: vec![(JobState::Pending, 2)],
            gpus: vec![GpuLeaves {
                host: "a\"b".into(),
                gpu: 1,
                busy: 0.5,
                free: 6.5,
            }],
            hosts: vec![HostUse {
                host: "h".into(),
                cores_busy: 3,
                cores_free: 29,
                memory: Some((1 << 30, 3 << 30)),
            }],
        };
        let text = m.render(&snap);
        for line in [
            "flex_jobs{state=\"PENDING\"} 2",
            "flex_leaves{host=\"a\\\"b\",gpu=\"1\",state=\"busy\"} 0.5",
            "flex_leaves{host=\"a\\\"b\",gpu=\"1\",state=\"free\"} 6.5",
            "flex_jobs_started_total 0",
            "flex_jobs_completed_total{state=\"TIMEOUT\"} 2",
            "flex_jobs_completed_total{state=\"COMPLETED\"} 1",
            "flex_jobs_completed_total{state=\"OUT_OF_MEMORY\"} 1",
            "flex_sched_pass_seconds_bucket{le=\"0.00005\"} 1",
            "flex_sched_pass_seconds_bucket{le=\"0.0025\"} 1",
            "flex_sched_pass_seconds_bucket{le=\"0.005\"} 2",
            "flex_sched_pass_seconds_bucket{le=\"2.5\"} 2",
            "flex_sched_pass_seconds_bucket{le=\"+Inf\"} 3",
            "flex_sched_pass_seconds_count 3",
            "# TYPE flex_sched_pass_seconds histogram",
            "flex_cores{host=\"h\",state=\"busy\"} 3",
            "flex_cores{host=\"h\",state=\"free\"} 29",
            "flex_memory_bytes{host=\"h\",state=\"busy\"} 1073741824",
            "flex_memory_bytes{host=\"h\",state=\"free\"} 3221225472",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
