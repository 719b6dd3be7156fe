//! `flexsim compare`: every model and policy over generated traces, with charts.

use super::{
    exec_model, hardware, parse_policy, progress_bar, with_window, write_atomic, ArrivalArgs,
    HwArgs, SimArgs,
};
use crate::charts;
use crate::compare::{self, CompareSpec};
use crate::gen::{generate, Category, GenSpec, KindMix, Oversize};
use crate::models::{Hardware, ModelKind};
use crate::{SimConfig, SimError};
use clap::Args;
use flex_sched::{Order, Policy};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(super) struct CompareArgs {
    #[arg(long, default_value_t = 10)]
    traces_per_category: usize,
    /// Trace i of each category uses seed + i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Category::ALL)]
    categories: Vec<Category>,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = KindMix::ALL)]
    kinds: Vec<KindMix>,
    #[arg(long, value_delimiter = ',', default_values = ["fifo", "backfill"], value_parser = parse_policy)]
    policies: Vec<Policy>,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = ModelKind::ALL)]
    models: Vec<ModelKind>,
    /// Largest job size (the paper's Figure 7 uses 4); 0 keeps Table 2's sizes, and Static-MIG
    /// then drops out of the training traces, which have jobs above 4.
    #[arg(long, default_value_t = 4)]
    max_size: u32,
    /// What happens to jobs above --max-size: left out (drop) or made smaller (clamp).
    #[arg(long, value_enum, default_value_t = Oversize::Clamp)]
    oversize: Oversize,
    #[command(flatten)]
    arrivals: ArrivalArgs,
    #[command(flatten)]
    sim: SimArgs,
    #[command(flatten)]
    hw: HwArgs,
    /// Where the charts, compare.json, runs.csv and ratios.csv go.
    #[arg(long)]
    out_dir: PathBuf,
    /// Print the comparison as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// Run the grid, write its files into --out-dir and print the comparison.
pub(super) fn compare(a: CompareArgs) -> Result<(), SimError> {
    let hw = hardware(&a.hw)?;
    if a.traces_per_category == 0 {
        return Err(SimError::Usage(
            "traces per category must be at least 1".into(),
        ));
    }
    let spec = CompareSpec {
        traces_per_category: a.traces_per_category,
        seed: a.seed,
        categories: a.categories,
        kinds: a.kinds,
        policies: with_window(&a.policies, a.sim.window),
        models: a.models,
        max_size: (a.max_size > 0).then_some(a.max_size),
        oversize: a.oversize,
        load: a.arrivals.load,
        duration_mix: a.arrivals.duration_mix,
        drain_s: a.sim.drain_s,
        exec: exec_model(&a.sim.config)?,
    };
    std::fs::create_dir_all(&a.out_dir).map_err(|source| SimError::Write {
        path: a.out_dir.display().to_string(),
        source,
    })?;
    let total = spec.kinds.len()
        * spec.categories.len()
        * spec.traces_per_category
        * spec.policies.len()
        * spec.models.len();
    let bar = progress_bar(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs, {elapsed} ({eta} left)",
        )
        .expect("valid template"),
    );
    let c = compare::run(&spec, &hw, || bar.inc(1))?;
    bar.finish_and_clear();

    let json = serde_json::to_string_pretty(&c).expect("comparison serializes");
    write_tables(&a.out_dir, &c, &json)?;
    write_ratio_charts(&a.out_dir, &c, &spec)?;
    write_gantts(&a.out_dir, &spec, &hw)?;
    if a.json {
        println!("{json}");
    } else {
        print!("{}", c.report());
    }
    Ok(())
}

/// compare.json (the comparison as `json`), runs.csv and ratios.csv.
fn write_tables(dir: &Path, c: &compare::Comparison, json: &str) -> Result<(), SimError> {
    write_atomic(&dir.join("compare.json"), json.as_bytes())?;
    write_atomic(&dir.join("runs.csv"), runs_csv(c).as_bytes())?;
    write_atomic(&dir.join("ratios.csv"), ratios_csv(c).as_bytes())
}

/// A box plot of the ratios per kind and policy.
fn write_ratio_charts(
    dir: &Path,
    c: &compare::Comparison,
    spec: &CompareSpec,
) -> Result<(), SimError> {
    for &kind in &spec.kinds {
        for &policy in &spec.policies {
            let p = dir.join(format!("ratios-{kind}-{}.svg", policy_slug(policy)));
            write_atomic(&p, charts::ratio_boxes(c, kind, policy, &p)?.as_bytes())?;
        }
    }
    Ok(())
}

/// A Gantt chart per model of one trace under the first policy: the first kind's balanced
/// trace if the grid has that category, else its trace of the first category.
fn write_gantts(dir: &Path, spec: &CompareSpec, hw: &Hardware) -> Result<(), SimError> {
    let (Some(&kind), Some(&policy)) = (spec.kinds.first(), spec.policies.first()) else {
        return Ok(());
    };
    let category = if spec.categories.contains(&Category::Balanced) {
        Category::Balanced
    } else {
        spec.categories[0]
    };
    let trace = generate(&GenSpec {
        max_size: spec.max_size,
        oversize: spec.oversize,
        load: spec.load,
        duration_mix: spec.duration_mix,
        ..GenSpec::paper(category, kind, spec.seed, hw.total_leaves())
    })
    .map_err(SimError::Usage)?;
    let cfg = SimConfig {
        policy,
        drain_s: spec.drain_s,
        exec: spec.exec.clone(),
        record_rows: true,
        fairshare: None,
    };
    for &model in &spec.models {
        let r = hw.run(model, &trace, &cfg).map_err(SimError::Topology)?;
        let p = dir.join(format!("gantt-{model}.svg"));
        let title = format!(
            "{model}, {}, {category} {kind} trace (seed {})",
            crate::metrics::policy_name(&policy),
            spec.seed
        );
        write_atomic(&p, charts::gantt(&r, &title, &p)?.as_bytes())?;
    }
    Ok(())
}

/// `fifo`, `backfill`, `conservative-adaptive`: the kind, and the order unless submission.
fn policy_slug(p: Policy) -> String {
    match p.order {
        Order::Submit => p.kind.to_string(),
        o => format!("{}-{o}", p.kind),
    }
}

/// runs.csv: every run's metrics, after its trace's kind, category, number and seed.
fn runs_csv(c: &compare::Comparison) -> String {
    let mut s = String::new();
    for (i, r) in c.runs.iter().enumerate() {
        let f = r.metrics.fields();
        if i == 0 {
            let names: Vec<&str> = f.iter().map(|(k, _)| *k).collect();
            s += &format!("kind,category,trace,seed,{}\n", names.join(","));
        }
        let vals: Vec<&str> = f.iter().map(|(_, v)| v.as_str()).collect();
        s += &format!(
            "{},{},{},{},{}\n",
            r.kind,
            r.category,
            r.trace,
            r.seed,
            vals.join(",")
        );
    }
    s
}

/// ratios.csv: the spread of every ratio between models.
fn ratios_csv(c: &compare::Comparison) -> String {
    let mut s = String::from("kind,policy,category,pair,metric,mean,median,p25,p75,min,max,n\n");
    for r in &c.ratios {
        let x = &r.spread;
        s += &format!(
            "{},{},{},{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{}\n",
            r.kind,
            policy_slug(r.policy),
            r.category,
            r.pair,
            r.metric,
            x.mean,
            x.median,
            x.p25,
            x.p75,
            x.min,
            x.max,
            x.n
        );
    }
    s
}
