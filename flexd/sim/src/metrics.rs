//! Per-run metrics (Flex-MIG §5.1) and their output as a table, JSON or CSV.
//!
//! Times are measured from the first submission. Leaf-time is counted in compute (SM) slices
//! so that the three models compare: a Flex-MIG leaf is one slice, a Dynamic- or Static-MIG
//! instance as many as its profile has.

use super::engine::RunResult;
use super::models::ModelKind;
use flex_sched::{Order, Policy, PolicyKind};
use serde::Serialize;

/// What one run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    pub model: ModelKind,
    /// The policy's name: `fifo`, `backfill/14`, `conservative/14+adaptive` ([`policy_name`]).
    pub policy: String,
    /// Backfill window (absent under FIFO, which has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    /// Jobs that ran.
    pub jobs: usize,
    /// Jobs the model can never run (e.g. above 4 slices under Static-MIG).
    pub not_run: usize,
    /// Jobs ended at their time limit.
    pub timeouts: usize,
    /// First submission to last end.
    pub makespan_s: u64,
    /// Release-aware lower bound: the largest, over submission times t, of t plus the work
    /// (need × least run) submitted at or after t ÷ capacity, and of any job's submit + least
    /// run; from the first submission, rounded up.
    pub lower_bound_s: u64,
    pub makespan_over_bound: f64,
    /// Submission to end: wait + run + drain.
    pub avg_jct_s: f64,
    /// Submission to start.
    pub avg_wait_s: f64,
    /// Execution time alone (what the paper's Figures 7a and 8a call JCT).
    pub avg_run_s: f64,
    /// Time drained (Dynamic-MIG): waiting for a reconfiguration, or suspended by one.
    pub avg_drain_s: f64,
    /// Time waited with enough free compute slices on a host but no usable placement.
    pub avg_ext_frag_s: f64,
    /// The time during which at least one job was so blocked, as a percentage of the makespan
    /// (never above 100).
    pub ext_frag_pct_of_makespan: f64,
    /// Busy slice-seconds (executing) ÷ (capacity × (last end − first start)).
    pub utilization: f64,
    pub reconfigurations: u64,
    /// reconfigurations × drain seconds.
    pub reconfig_s: u64,
    /// Job-seconds suspended by drains.
    pub suspended_job_s: u64,
    /// Simulated GPU telemetry of the run, where the topology names a source (`flexsim run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::telemetry::GpuTelemetry>,
}

impl Metrics {
    pub fn of(r: &RunResult) -> Self {
        let n = r.jobs.len();
        let mean = |f: &dyn Fn(&super::JobRecord) -> u64| {
            if n == 0 {
                0.0
            } else {
                r.jobs.iter().map(|j| f(j) as f64).sum::<f64>() / n as f64
            }
        };
        let first_submit = r.jobs.iter().map(|j| j.submit_s).min().unwrap_or(0);
        let first_start = r.jobs.iter().map(|j| j.start_s).min().unwrap_or(0);
        let last_end = r.jobs.iter().map(|j| j.end_s).max().unwrap_or(0);
        let makespan_s = last_end - first_submit;
        let lower_bound_s = lower_bound(r, first_submit);
        let busy: u128 = r
            .jobs
            .iter()
            .map(|j| j.slices as u128 * j.run_s as u128)
            .sum();
        let span = (last_end - first_start) as u128 * r.capacity as u128;
        let avg_ext_frag_s = mean(&|j| j.ext_frag_s);
        Metrics {
            model: r.model,
            policy: policy_name(&r.policy),
            window: (r.policy.kind != PolicyKind::Fifo).then_some(r.policy.window),
            jobs: n,
            not_run: r.not_run.len(),
            timeouts: r.jobs.iter().filter(|j| j.timeout).count(),
            makespan_s,
            lower_bound_s,
            makespan_over_bound: ratio(makespan_s as f64, lower_bound_s as f64),
            avg_jct_s: mean(&|j| j.jct_s()),
            avg_wait_s: mean(&|j| j.wait_s()),
            avg_run_s: mean(&|j| j.run_s),
            avg_drain_s: mean(&|j| j.drain_s),
            avg_ext_frag_s,
            ext_frag_pct_of_makespan: 100.0 * ratio(r.ext_frag_time_s as f64, makespan_s as f64),
            utilization: ratio(busy as f64, span as f64),
            reconfigurations: r.reconfigurations,
            reconfig_s: r.reconfigurations * r.drain_s,
            suspended_job_s: r.suspended_job_s,
            gpu: None,
        }
    }

    /// (name, value as text) in display order.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let s1 = |v: f64| format!("{v:.1}");
        let mut f = vec![
            ("model", self.model.to_string()),
            ("policy", self.policy.clone()),
            ("jobs", self.jobs.to_string()),
            ("not_run", self.not_run.to_string()),
            ("timeouts", self.timeouts.to_string()),
            ("makespan_s", self.makespan_s.to_string()),
            ("lower_bound_s", self.lower_bound_s.to_string()),
            (
                "makespan_over_bound",
                format!("{:.4}", self.makespan_over_bound),
            ),
            ("avg_jct_s", s1(self.avg_jct_s)),
            ("avg_wait_s", s1(self.avg_wait_s)),
            ("avg_run_s", s1(self.avg_run_s)),
            ("avg_drain_s", s1(self.avg_drain_s)),
            ("avg_ext_frag_s", s1(self.avg_ext_frag_s)),
            (
                "ext_frag_pct_of_makespan",
                format!("{:.2}", self.ext_frag_pct_of_makespan),
            ),
            ("utilization", format!("{:.4}", self.utilization)),
            ("reconfigurations", self.reconfigurations.to_string()),
            ("reconfig_s", self.reconfig_s.to_string()),
            ("suspended_job_s", self.suspended_job_s.to_string()),
        ];
        f.extend(self.gpu.iter().flat_map(|g| g.fields()));
        f
    }

    /// A two-column table: metric, value.
    pub fn table(&self) -> prettytable::Table {
        let mut t = prettytable::Table::new();
        t.set_format(*prettytable::format::consts::FORMAT_BOX_CHARS);
        t.set_titles(prettytable::row!["metric", "value"]);
        for (k, v) in self.fields() {
            t.add_row(prettytable::row![k, r->v]);
        }
        t
    }

    /// A CSV header and one row.
    pub fn csv(&self) -> String {
        let f = self.fields();
        let head: Vec<&str> = f.iter().map(|(k, _)| *k).collect();
        let vals: Vec<&str> = f.iter().map(|(_, v)| v.as_str()).collect();
        format!("{}\n{}\n", head.join(","), vals.join(","))
    }
}

/// The release-aware lower bound on the makespan, from the first submission: no schedule can
/// finish the work submitted at or after t before t + that work ÷ capacity, nor a job before
/// its submission plus its least run.
pub fn lower_bound(r: &RunResult, first_submit: u64) -> u64 {
    let mut by_submit: Vec<(u64, u128)> = r
        .jobs
        .iter()
        .map(|j| (j.submit_s, j.need as u128 * j.min_run_s as u128))
        .collect();
    by_submit.sort_unstable();
    let cap = r.capacity.max(1) as u128;
    let mut best = r
        .jobs
        .iter()
        .map(|j| j.submit_s + j.min_run_s - first_submit)
        .max()
        .unwrap_or(0);
    let mut rest: u128 = 0;
    for &(t, w) in by_submit.iter().rev() {
        rest += w;
        best = best.max(t - first_submit + rest.div_ceil(cap) as u64);
    }
    best
}

/// `fifo`, `backfill/14`, `conservative/0`, with `+order` unless in submission order.
pub fn policy_name(p: &Policy) -> String {
    let base = match p.kind {
        PolicyKind::Fifo => "fifo".into(),
        k => format!("{k}/{}", p.window),
    };
    match p.order {
        Order::Submit => base,
        o => format!("{base}+{o}"),
    }
}

/// a ÷ b, 0 when b is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}
