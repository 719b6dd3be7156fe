//! The `flexsim` command line: `run` replays a trace, `gen` writes a synthetic trace, `compare`
//! runs the paper's grid. Exit codes: 0 success, 1 an output could not be written, 2 bad input
//! (arguments, trace, topology, configuration).
//!
//! Each subcommand's arguments and body are in a module of its own; the arguments they share
//! are here.

mod compare;
mod fairness;
mod flexd_config;
mod gen;
mod run;
mod sweep;

pub use flexd_config::{flexd_policy, policy_from_flexd_toml};
pub use run::jobs_csv;

use crate::models::Hardware;
use crate::{ExecModel, SimError};
use clap::{Args, Parser, Subcommand};
use flex_sched::{Order, Policy};
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
    Run(run::RunArgs),
    /// Write one of the paper's synthetic traces.
    Gen(gen::GenArgs),
    /// Run every model and policy over generated traces and compare them.
    Compare(compare::CompareArgs),
    /// Policies x models over many seeds, categories, kinds and trace shapes: one table.
    Sweep(sweep::SweepArgs),
    /// Replay a multi-user trace (its `user` column) in FIFO order and with flexd's fair
    /// share: each user's mean wait and slowdown, and Jain's index, side by side.
    Fairness(fairness::FairnessArgs),
}

#[derive(Args, Debug)]
struct HwArgs {
    /// Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8).
    #[arg(long, default_value = "a100-40gb-x2")]
    topology: String,
    /// Copies of the topology's host.
    #[arg(long, default_value_t = 1)]
    hosts: usize,
    /// Host memory (RAM) of each host in GiB, in place of the topology's memory_gib; 0 for no
    /// limit. Only a trace's host_mem column (or ReqMem) asks for host memory.
    #[arg(long, value_name = "GIB", value_parser = parse_gib)]
    host_mem_gib: Option<u64>,
}

/// GiB as bytes: a number of 0 or more, decimals allowed, at most 1 PiB.
fn parse_gib(s: &str) -> Result<u64, String> {
    match s.trim().parse::<f64>() {
        Ok(g) if g.is_finite() && (0.0..=1024.0 * 1024.0).contains(&g) => {
            Ok((g * (1u64 << 30) as f64).ceil() as u64)
        }
        _ => Err(format!("{s:?} is not a number of GiB from 0 to 1048576")),
    }
}

#[derive(Args, Debug)]
struct SimArgs {
    /// Seconds a Dynamic-MIG reconfiguration drains its GPU (the paper measured 100-120).
    #[arg(long, default_value_t = crate::engine::DEFAULT_DRAIN_S)]
    drain_s: u64,
    /// Execution-time model overrides (see etc/flexsim.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Backfill candidates behind the head; 0 for the whole queue.
    #[arg(long, default_value_t = Policy::DEFAULT_WINDOW)]
    window: usize,
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
        Command::Run(a) => run::run(a),
        Command::Gen(a) => gen::gen(a),
        Command::Compare(a) => compare::compare(a),
        Command::Sweep(a) => sweep::sweep(a),
        Command::Fairness(a) => fairness::fairness(a),
    }
}

fn hardware(a: &HwArgs) -> Result<Hardware, SimError> {
    let hw = Hardware::load(&a.topology, a.hosts).map_err(SimError::Topology)?;
    Ok(match a.host_mem_gib {
        Some(bytes) => hw.with_host_memory(bytes),
        None => hw,
    })
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

/// The policies with the window of --window.
fn with_window(policies: &[Policy], window: usize) -> Vec<Policy> {
    policies.iter().map(|p| Policy { window, ..*p }).collect()
}

/// A progress bar of `total` runs on stderr; hidden where stderr is not a terminal.
fn progress_bar(total: usize) -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    }
}
