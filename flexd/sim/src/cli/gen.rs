//! `flexsim gen`: one of the paper's synthetic traces.

use super::{hardware, write_atomic, ArrivalArgs, HwArgs};
use crate::gen::{generate, Category, GenSpec, KindMix, Oversize};
use crate::SimError;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub(super) struct GenArgs {
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

/// Generate the trace and write it to --out.
pub(super) fn gen(a: GenArgs) -> Result<(), SimError> {
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
