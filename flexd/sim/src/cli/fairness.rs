//! `flexsim fairness`: a multi-user trace in FIFO order and with flexd's fair share.

use super::{exec_model, hardware, parse_policy, HwArgs, SimArgs};
use crate::models::ModelKind;
use crate::trace::Trace;
use crate::{SimConfig, SimError};
use clap::Args;
use flex_sched::Policy;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub(super) struct FairnessArgs {
    /// Trace CSV with a `user` column.
    #[arg(long)]
    trace: PathBuf,
    #[arg(long, value_enum, default_value_t = ModelKind::Fm)]
    model: ModelKind,
    /// fifo, backfill (EASY) or conservative, optionally with a queue order.
    #[arg(long, default_value = "backfill", value_parser = parse_policy)]
    policy: Policy,
    /// Fair-share weight (flexd.toml's priority.weight_fairshare).
    #[arg(long, default_value_t = 10000)]
    weight_fairshare: u32,
    /// Age weight (priority.weight_age; the age factor is whole after 7 days).
    #[arg(long, default_value_t = 1000)]
    weight_age: u32,
    /// Usage half-life in seconds (fairshare.half_life).
    #[arg(long, default_value_t = 7 * 86400)]
    half_life_s: u64,
    #[command(flatten)]
    sim: SimArgs,
    #[command(flatten)]
    hw: HwArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Replay the trace in FIFO order and with fair share, and print each user's side by side.
pub(super) fn fairness(a: FairnessArgs) -> Result<(), SimError> {
    use crate::fairness::{compare, FairShare};
    let hw = hardware(&a.hw)?;
    let trace = Trace::read(&a.trace)?;
    let mut cfg = SimConfig {
        policy: Policy {
            window: a.sim.window,
            ..a.policy
        },
        drain_s: a.sim.drain_s,
        exec: exec_model(&a.sim.config)?,
        record_rows: false,
        fairshare: None,
    };
    let fifo = hw.run(a.model, &trace, &cfg).map_err(SimError::Topology)?;
    let mut f = FairShare::default();
    (f.weights.fairshare, f.weights.age, f.half_life_s) =
        (a.weight_fairshare, a.weight_age, a.half_life_s);
    cfg.fairshare = Some(f);
    let fair = hw.run(a.model, &trace, &cfg).map_err(SimError::Topology)?;
    let (rows, fifo_jain, fair_jain) = compare(&trace, &fifo, &fair);
    if a.json {
        let v =
            serde_json::json!({"users": rows, "jain_fifo": fifo_jain, "jain_fairshare": fair_jain});
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("rows serialize")
        );
        return Ok(());
    }
    println!("| user | jobs | mean wait, FIFO | mean wait, fair share | slowdown, FIFO | slowdown, fair share |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} s | {:.0} s | {:.2} | {:.2} |",
            r.user, r.jobs, r.fifo_wait_s, r.fair_wait_s, r.fifo_slowdown, r.fair_slowdown
        );
    }
    println!("| Jain's index (slowdowns) | | | | {fifo_jain:.3} | {fair_jain:.3} |");
    Ok(())
}
