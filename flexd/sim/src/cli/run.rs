//! `flexsim run`: one trace under one model and policy.

use super::{exec_model, flexd_policy, hardware, parse_policy, write_atomic, HwArgs, SimArgs};
use crate::charts;
use crate::metrics::Metrics;
use crate::models::ModelKind;
use crate::telemetry;
use crate::trace::{kind_name, Trace};
use crate::{RunResult, SimConfig, SimError};
use clap::Args;
use flex_sched::Policy;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub(super) struct RunPolicyArgs {
    /// fifo, backfill (EASY) or conservative, optionally with a queue order:
    /// backfill:shortest, conservative:adaptive (orders: submit, shortest, longest, adaptive).
    #[arg(long, default_value = "backfill", value_parser = parse_policy)]
    policy: Policy,
    /// Replay the policy, window, queue order and aging that this flexd.toml gives flexd
    /// (its other keys are flexd's and ignored here); overrides --policy and --window.
    #[arg(long, conflicts_with = "policy")]
    flexd_config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(super) struct RunArgs {
    /// Trace CSV: job_id,submit_s,leaves,duration_s,kind and optional columns (mem_gb,
    /// time_limit_s, after, user, cpus, host_mem; see docs/flexsim.md).
    #[arg(long)]
    trace: PathBuf,
    #[arg(long, value_enum, default_value_t = ModelKind::Fm)]
    model: ModelKind,
    #[command(flatten)]
    pol: RunPolicyArgs,
    #[command(flatten)]
    sim: SimArgs,
    #[command(flatten)]
    hw: HwArgs,
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV (a header and one row) instead of a table.
    #[arg(long)]
    csv: bool,
    /// Also write a Gantt chart of the run (SVG).
    #[arg(long)]
    gantt: Option<PathBuf>,
    /// Also write every job's times (CSV), and its simulated GPU usage where the topology
    /// names a telemetry source.
    #[arg(long)]
    jobs_out: Option<PathBuf>,
    /// Seconds between simulated GPU telemetry samples of a job (where the topology names a
    /// samples file or telemetry_seed), as flexd.toml's telemetry_period.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    telemetry_period_s: u64,
}

/// Replay the trace, write the files asked for and print the run's metrics.
pub(super) fn run(a: RunArgs) -> Result<(), SimError> {
    let hw = hardware(&a.hw)?;
    let exec = exec_model(&a.sim.config)?;
    let trace = Trace::read(&a.trace)?;
    let policy = match &a.pol.flexd_config {
        Some(p) => flexd_policy(p)?,
        None => Policy {
            window: a.sim.window,
            ..a.pol.policy
        },
    };
    let cfg = SimConfig {
        policy,
        drain_s: a.sim.drain_s,
        exec,
        // The leaves each job held, for the simulated telemetry.
        record_rows: a.gantt.is_some() || (hw.telemetry.is_some() && a.model == ModelKind::Fm),
        fairshare: None,
    };
    let r = hw.run(a.model, &trace, &cfg).map_err(SimError::Topology)?;
    if !r.not_run.is_empty() {
        let shown: Vec<String> = r
            .not_run
            .iter()
            .take(5)
            .map(|n| format!("job {}: {}", n.id, n.reason))
            .collect();
        eprintln!(
            "flexsim: {} of {} jobs can never run under {}: {}{}",
            r.not_run.len(),
            trace.jobs.len(),
            a.model,
            shown.join("; "),
            if r.not_run.len() > 5 { "; ..." } else { "" }
        );
    }
    let gpu = match &hw.telemetry {
        Some(_) if a.model != ModelKind::Fm => {
            eprintln!(
                "flexsim: the topology's simulated GPU telemetry samples Flex-MIG (fm) runs only"
            );
            None
        }
        Some(source) => Some(
            telemetry::sample(&r, &hw, source, a.telemetry_period_s).map_err(SimError::Topology)?,
        ),
        None => None,
    };
    if let Some(p) = &a.jobs_out {
        let per_job = gpu.as_ref().map(|(jobs, _)| jobs.as_slice());
        write_atomic(p, jobs_csv(&r, per_job).as_bytes())?;
    }
    if let Some(p) = &a.gantt {
        let title = format!(
            "{} {}, {}",
            a.model,
            crate::metrics::policy_name(&cfg.policy),
            a.trace.display()
        );
        write_atomic(p, charts::gantt(&r, &title, p)?.as_bytes())?;
    }
    let mut m = Metrics::of(&r);
    m.gpu = gpu.map(|(_, summary)| summary);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&m).expect("metrics serialize")
        );
    } else if a.csv {
        print!("{}", m.csv());
    } else {
        print!("{}", m.table());
    }
    Ok(())
}

/// Every job's times, one row each, and its simulated GPU usage (`gpu`, in the run's job
/// order) where there is any.
pub fn jobs_csv(r: &RunResult, gpu: Option<&[telemetry::JobGpu]>) -> String {
    let mut s = String::from(
        "job_id,kind,leaves,submit_s,start_s,end_s,wait_s,run_s,drain_s,jct_s,ext_frag_s,slices",
    );
    if gpu.is_some() {
        s += ",";
        s += telemetry::JOB_COLUMNS;
    }
    s += "\n";
    for (i, j) in r.jobs.iter().enumerate() {
        s += &format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            j.id,
            kind_name(j.kind),
            j.leaves,
            j.submit_s,
            j.start_s,
            j.end_s,
            j.wait_s(),
            j.run_s,
            j.drain_s,
            j.jct_s(),
            j.ext_frag_s,
            j.slices
        );
        if let Some(g) = gpu {
            s += ",";
            s += &telemetry::job_fields(&g[i]);
        }
        s += "\n";
    }
    s
}
