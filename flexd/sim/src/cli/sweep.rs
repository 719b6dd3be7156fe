//! `flexsim sweep`: policies × models over many traces, one table.

use super::{exec_model, hardware, parse_policy, progress_bar, with_window, HwArgs, SimArgs};
use crate::gen::{Category, KindMix};
use crate::models::ModelKind;
use crate::sweep::{self, Shape, SweepSpec};
use crate::SimError;
use clap::Args;
use flex_sched::Policy;

#[derive(Args, Debug)]
pub(super) struct SweepArgs {
    /// Traces per shape, category and kind; trace i uses seed + i.
    #[arg(long, default_value_t = 10)]
    seeds: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Shape::ALL)]
    shapes: Vec<Shape>,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Category::ALL)]
    categories: Vec<Category>,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = KindMix::ALL)]
    kinds: Vec<KindMix>,
    /// Policies (kind[:order]); the first, under fm, is the baseline of the ratios.
    #[arg(long, value_delimiter = ',', default_values = ["fifo", "backfill", "conservative", "backfill:shortest", "backfill:longest", "backfill:adaptive", "conservative:adaptive"], value_parser = parse_policy)]
    policies: Vec<Policy>,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ModelKind::Fm, ModelKind::Dm])]
    models: Vec<ModelKind>,
    /// Largest job size; 0 keeps Table 2's sizes (Static-MIG then drops jobs above 4).
    #[arg(long, default_value_t = 0)]
    max_size: u32,
    /// Offered load of the generated traces.
    #[arg(long, default_value_t = 1.0)]
    load: f64,
    #[command(flatten)]
    sim: SimArgs,
    #[command(flatten)]
    hw: HwArgs,
    /// Print JSON (the rows and every run) instead of the table.
    #[arg(long)]
    json: bool,
}

/// Run the sweep and print its table.
pub(super) fn sweep(a: SweepArgs) -> Result<(), SimError> {
    let hw = hardware(&a.hw)?;
    if a.seeds == 0 {
        return Err(SimError::Usage("seeds must be at least 1".into()));
    }
    let spec = SweepSpec {
        seeds: a.seeds,
        seed: a.seed,
        shapes: a.shapes,
        categories: a.categories,
        kinds: a.kinds,
        policies: with_window(&a.policies, a.sim.window),
        models: a.models,
        max_size: (a.max_size > 0).then_some(a.max_size),
        load: a.load,
        drain_s: a.sim.drain_s,
        exec: exec_model(&a.sim.config)?,
    };
    let total = spec.shapes.len()
        * spec.categories.len()
        * spec.kinds.len()
        * spec.seeds
        * spec.policies.len()
        * spec.models.len();
    let bar = progress_bar(total);
    let s = sweep::run(&spec, &hw, || bar.inc(1))?;
    bar.finish_and_clear();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&s).expect("sweep serializes")
        );
    } else {
        print!("{}", s.table());
    }
    Ok(())
}
