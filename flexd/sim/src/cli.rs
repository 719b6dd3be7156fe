//! The `flexsim` command line: `run` replays a trace, `gen` writes a synthetic trace, `compare`
//! runs the paper's grid. Exit codes: 0 success, 1 an output could not be written, 2 bad input
//! (arguments, trace, topology, configuration).

use super::charts;
use super::compare::{self, CompareSpec};
use super::gen::{generate, Category, GenSpec, KindMix, Oversize};
use super::metrics::Metrics;
use super::models::{Hardware, ModelKind};
use super::sweep::{self, Shape, SweepSpec};
use super::trace::{kind_name, Trace};
use super::{ExecModel, RunResult, SimConfig, SimError};
use clap::{Args, Parser, Subcommand};
use flex_sched::{Order, Policy, PolicyKeys};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "flexsim",
    version,
    about = "Replay job traces through Flex's scheduler core: Flex-MIG vs Dynamic-MIG vs Static-MIG"
)]
pub struct Cli {
    /// More log output (-v info, -vv debug); FLEX_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay one trace under one model and policy and print its metrics.
    Run(RunArgs),
    /// Write one of the paper's synthetic traces.
    Gen(GenArgs),
    /// Run every model and policy over generated traces and compare them.
    Compare(CompareArgs),
    /// Policies x models over many seeds, categories, kinds and trace shapes: one table.
    Sweep(SweepArgs),
    /// Replay a multi-user trace (its `user` column) in FIFO order and with flexd's fair
    /// share: each user's mean wait and slowdown, and Jain's index, side by side.
    Fairness(FairnessArgs),
}

#[derive(Args, Debug)]
struct FairnessArgs {
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

#[derive(Args, Debug)]
struct SweepArgs {
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

#[derive(Args, Debug)]
struct HwArgs {
    /// Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8).
    #[arg(long, default_value = "a100-40gb-x2")]
    topology: String,
    /// Copies of the topology's host.
    #[arg(long, default_value_t = 1)]
    hosts: usize,
}

#[derive(Args, Debug)]
struct SimArgs {
    /// Seconds a Dynamic-MIG reconfiguration drains its GPU (the paper measured 100-120).
    #[arg(long, default_value_t = super::engine::DEFAULT_DRAIN_S)]
    drain_s: u64,
    /// Execution-time model overrides (see etc/flexsim.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Backfill candidates behind the head; 0 for the whole queue.
    #[arg(long, default_value_t = Policy::DEFAULT_WINDOW)]
    window: usize,
}

#[derive(Args, Debug)]
struct RunPolicyArgs {
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
struct RunArgs {
    /// Trace CSV: job_id,submit_s,leaves,duration_s,kind[,mem_gb][,time_limit_s].
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
    /// Also write every job's times (CSV).
    #[arg(long)]
    jobs_out: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct GenArgs {
    #[arg(long, value_enum)]
    category: Category,
    #[arg(long, value_enum)]
    kind: KindMix,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    out: PathBuf,
    /// Number of jobs (default: the paper's, Table 2 doubled).
    #[arg(long)]
    jobs: Option<usize>,
    /// Largest job size (the paper's Figure 7 uses 4).
    #[arg(long)]
    max_size: Option<u32>,
    /// What happens to jobs above --max-size: left out (drop) or made smaller (clamp).
    #[arg(long, value_enum, default_value_t = Oversize::Clamp)]
    oversize: Oversize,
    #[command(flatten)]
    arrivals: ArrivalArgs,
    #[command(flatten)]
    hw: HwArgs,
}

#[derive(Args, Debug)]
struct ArrivalArgs {
    /// Offered load: 1.0 submits work as fast as perfectly packed leaves run it.
    #[arg(long, default_value_t = 1.0)]
    load: f64,
    /// Weights of short:medium:long durations.
    #[arg(long, default_value = "1:1:1", value_parser = parse_mix)]
    duration_mix: [f64; 3],
}

#[derive(Args, Debug)]
struct CompareArgs {
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

/// `kind[:order]`, e.g. `backfill`, `conservative:adaptive`; the window comes from --window.
pub fn parse_policy(s: &str) -> Result<Policy, String> {
    let (kind, order) = s.split_once(':').unwrap_or((s, "submit"));
    Ok(Policy {
        kind: kind.parse()?,
        order: order.parse::<Order>()?,
        ..Policy::fifo()
    })
}

fn parse_mix(s: &str) -> Result<[f64; 3], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("{s:?} is not three weights such as 1:1:1");
    if parts.len() != 3 {
        return Err(bad());
    }
    let mut out = [0.0; 3];
    for (o, p) in out.iter_mut().zip(parts) {
        *o = p.trim().parse().map_err(|_| bad())?;
    }
    Ok(out)
}

/// Parse the arguments, run, and return the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match dispatch(cli.command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("flexsim: {e}");
            e.exit_code()
        }
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("FLEX_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

fn dispatch(cmd: Command) -> Result<(), SimError> {
    match cmd {
        Command::Run(a) => run(a),
        Command::Gen(a) => gen(a),
        Command::Compare(a) => compare(a),
        Command::Sweep(a) => sweep(a),
        Command::Fairness(a) => fairness(a),
    }
}

fn hardware(a: &HwArgs) -> Result<Hardware, SimError> {
    Hardware::load(&a.topology, a.hosts).map_err(SimError::Topology)
}

fn exec_model(config: &Option<PathBuf>) -> Result<ExecModel, SimError> {
    match config {
        None => Ok(ExecModel::default()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| SimError::Config(format!("cannot read {}: {e}", p.display())))?;
            ExecModel::from_toml(&text, &p.display().to_string()).map_err(SimError::Config)
        }
    }
}

/// The policy a flexd.toml gives flexd: its policy keys over the compiled-in etc/flexd.toml,
/// through the core's [`PolicyKeys`], as flexd reads them.
pub fn flexd_policy(path: &Path) -> Result<Policy, SimError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SimError::Config(format!("cannot read {}: {e}", path.display())))?;
    policy_from_flexd_toml(&text, &path.display().to_string()).map_err(SimError::Config)
}

/// flexd's own defaults, for the keys a site file leaves out.
const FLEXD_DEFAULTS: &str = include_str!("../../../etc/flexd.toml");

/// [`flexd_policy`] on a file's text; `origin` names it in errors.
pub fn policy_from_flexd_toml(text: &str, origin: &str) -> Result<Policy, String> {
    let parse = |t: &str, o: &str| {
        t.parse::<toml::Table>()
            .map_err(|e| format!("{o}: {}", e.to_string().trim_end()))
    };
    let defaults = parse(FLEXD_DEFAULTS, "etc/flexd.toml")?;
    let file = parse(text, origin)?;
    let get = |k: &str| file.get(k).or_else(|| defaults.get(k));
    let string = |k: &'static str| match get(k) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(format!("{origin}: {k} = {v}: must be a string")),
    };
    let int = |k: &'static str| match get(k) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) => Ok(Some(*i)),
        Some(v) => Err(format!("{origin}: {k} = {v}: must be an integer")),
    };
    PolicyKeys {
        policy: string("policy")?,
        backfill_window: int("backfill_window")?,
        queue_order: string("queue_order")?,
        aging_pct: int("aging_pct")?,
    }
    .policy()
    .map_err(|(k, why)| format!("{origin}: {k}: {why}"))
}

/// Write a file whole or not at all: into a temporary beside it, then renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SimError> {
    let err = |source| SimError::Write {
        path: path.display().to_string(),
        source,
    };
    let name = path
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

fn fairness(a: FairnessArgs) -> Result<(), SimError> {
    use super::fairness::{compare, FairShare};
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

fn run(a: RunArgs) -> Result<(), SimError> {
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
        record_rows: a.gantt.is_some(),
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
    if let Some(p) = &a.jobs_out {
        write_atomic(p, jobs_csv(&r).as_bytes())?;
    }
    if let Some(p) = &a.gantt {
        let title = format!(
            "{} {}, {}",
            a.model,
            super::metrics::policy_name(&cfg.policy),
            a.trace.display()
        );
        write_atomic(p, charts::gantt(&r, &title, p)?.as_bytes())?;
    }
    let m = Metrics::of(&r);
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

/// Every job's times, one row each.
pub fn jobs_csv(r: &RunResult) -> String {
    let mut s = String::from(
        "job_id,kind,leaves,submit_s,start_s,end_s,wait_s,run_s,drain_s,jct_s,ext_frag_s,slices\n",
    );
    for j in &r.jobs {
        s += &format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}\n",
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
    }
    s
}

fn gen(a: GenArgs) -> Result<(), SimError> {
    let hw = hardware(&a.hw)?;
    let spec = GenSpec {
        jobs: a.jobs,
        max_size: a.max_size,
        oversize: a.oversize,
        load: a.arrivals.load,
        duration_mix: a.arrivals.duration_mix,
        ..GenSpec::paper(a.category, a.kind, a.seed, hw.total_leaves())
    };
    let trace = generate(&spec).map_err(SimError::Usage)?;
    let mut buf = Vec::new();
    trace.write(&mut buf).map_err(|source| SimError::Write {
        path: a.out.display().to_string(),
        source,
    })?;
    write_atomic(&a.out, &buf)
}

fn compare(a: CompareArgs) -> Result<(), SimError> {
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
        policies: a
            .policies
            .iter()
            .map(|p| Policy {
                window: a.sim.window,
                ..*p
            })
            .collect(),
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
    let bar = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs, {elapsed} ({eta} left)",
        )
        .expect("valid template"),
    );
    let c = compare::run(&spec, &hw, || bar.inc(1))?;
    bar.finish_and_clear();

    let out = |name: &str| a.out_dir.join(name);
    let json = serde_json::to_string_pretty(&c).expect("comparison serializes");
    write_atomic(&out("compare.json"), json.as_bytes())?;
    write_atomic(&out("runs.csv"), runs_csv(&c).as_bytes())?;
    write_atomic(&out("ratios.csv"), ratios_csv(&c).as_bytes())?;
    for &kind in &spec.kinds {
        for &policy in &spec.policies {
            let p = out(&format!("ratios-{kind}-{}.svg", policy_slug(policy)));
            write_atomic(&p, charts::ratio_boxes(&c, kind, policy, &p)?.as_bytes())?;
        }
    }
    // A Gantt chart per model of one trace: the first balanced one if there is one.
    if let (Some(&kind), Some(&policy)) = (spec.kinds.first(), spec.policies.first()) {
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
            let p = out(&format!("gantt-{model}.svg"));
            let title = format!(
                "{model}, {}, {category} {kind} trace (seed {})",
                super::metrics::policy_name(&policy),
                spec.seed
            );
            write_atomic(&p, charts::gantt(&r, &title, &p)?.as_bytes())?;
        }
    }
    if a.json {
        println!("{json}");
    } else {
        print!("{}", c.report());
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

fn sweep(a: SweepArgs) -> Result<(), SimError> {
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
        policies: a
            .policies
            .iter()
            .map(|p| Policy {
                window: a.sim.window,
                ..*p
            })
            .collect(),
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
    let bar = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use flex_sched::PolicyKind;

    /// flexd's compiled-in defaults and a site file give the policies flexd's config tests
    /// assert for the same text (flexd/src/config.rs): both go through the core's PolicyKeys.
    #[test]
    fn flexd_config_gives_flexds_policy() {
        let shipped = Policy {
            order: flex_sched::Order::Adaptive,
            ..Policy::backfill(14)
        };
        assert_eq!(policy_from_flexd_toml("", "f").unwrap(), shipped);
        let file = "policy = \"conservative\"\nbackfill_window = 0\nqueue_order = \"adaptive\"\naging_pct = 50\n";
        assert_eq!(
            policy_from_flexd_toml(file, "f").unwrap(),
            Policy {
                kind: PolicyKind::Conservative,
                window: 0,
                order: Order::Adaptive,
                aging_pct: 50,
            }
        );
        // flexd's other keys are not errors here
        assert!(
            policy_from_flexd_toml("nccl_mode = \"none\"\n[limits]\nmax_directives = 3", "f")
                .is_ok()
        );
        let e = policy_from_flexd_toml("backfill_window = -1", "site.toml").unwrap_err();
        assert_eq!(
            e,
            "site.toml: backfill_window: -1 must be between 0 and 1000000"
        );
        assert!(policy_from_flexd_toml("policy = 3", "f")
            .unwrap_err()
            .contains("must be a string"));
        assert_eq!(
            parse_policy("backfill:shortest").unwrap(),
            Policy::backfill(14).ordered(Order::Shortest)
        );
        assert!(parse_policy("lottery").is_err());
    }
}
