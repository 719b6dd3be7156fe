//! Side by side with a real Slurm 22.05: each script under `tests/side-by-side/scripts/` and
//! `tests/slurm-scripts/` is submitted unchanged with `sbatch` to a one-node Slurm and with
//! `flexsub` to the real flexd, both declaring the simulated host `etc/topologies/
//! a100-40gb-x2.toml` (32 cores on two sockets, 14 MIG leaves as 14 typed `gpu`, 254 GiB of
//! RAM to schedule, the same features); then what the jobs saw is compared, normalised:
//! whether the submission was taken, each job's end state and exit code (Slurm's job
//! completion log, which holds sacct's State and ExitCode, against flexacct), the files
//! it left (every filename pattern), and for every process the scripts start (the batch step
//! and each task of each `srun`, through the stand-ins in `tests/side-by-side/bin/`) the
//! number of them and the variables and resources each saw. The comparison is exact but for
//! [`accepted::ACCEPTED`], which docs/commands.md mirrors; an entry that no longer happens
//! fails the test too.
//!
//! What a container cannot give, and how the test stands in for it:
//! - sacct needs slurmdbd and a database; jobcomp/filetxt writes the same State and ExitCode.
//! - task/cgroup needs a cgroup tree slurmd may write to; task/affinity binds the tasks.
//! - The CPUs a process may use (its `Cpus_allowed_list`) are compared only on a machine with
//!   at least the 32 CPUs both sides declare. On a smaller one (CI has 2) neither side can
//!   bind as it allocated: Slurm's task/affinity gives up ("more resources configured than
//!   exist") and leaves every CPU, flexd folds core c onto CPU c mod n; the counts then say
//!   nothing about the allocation, which SLURM_CPUS_PER_TASK, SLURM_CPUS_ON_NODE and
//!   SLURM_JOB_CPUS_PER_NODE still compare. The accepted list was made on such a machine.
//! - Job ids: Slurm's start at 1000 (FirstJobId) and Flex's are moved there too (its
//!   database's sequence), so zero-padded names (`%5j`) have the same width.
//!
//! `FLEX_SBS_VERBOSE=1 cargo test -p flex-tests --test side_by_side -- --nocapture` prints
//! every difference, accepted ones too.
//!
//! Needs root, slurm-wlm and munge, as `tests/tests/slurm/`; skipped without them unless
//! CI=true.

mod accepted;
#[path = "../slurm/daemons.rs"]
mod daemons;
mod observe;
#[path = "../slurm/setup.rs"]
#[allow(dead_code, reason = "shared with the slurm test, which uses all of it")]
mod setup;
mod sides;
mod slurm;

use observe::{differences, glob};
use setup::usable;
use std::path::PathBuf;

/// A script to run on both sides.
pub(crate) struct Script {
    pub(crate) name: String,
    pub(crate) text: String,
    /// `--dependency=KIND:<id of this job>` for `dep.then.sh`, submitted right after it.
    pub(crate) then: Option<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The scripts, sorted by name: the corpus of real Slurm scripts and the side-by-side folder
/// (Slurm's documentation examples, one script per option, filename patterns, dependencies).
fn scripts() -> Vec<Script> {
    let mut out = Vec::new();
    for dir in ["slurm-scripts", "side-by-side/scripts"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".sh") || name.ends_with(".then.sh") {
                continue;
            }
            let then = name
                .strip_prefix("dep-")
                .and_then(|r| r.split_once('-'))
                .map(|(kind, _)| kind.to_string());
            out.push(Script {
                text: std::fs::read_to_string(&p).unwrap(),
                name,
                then,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[test]
fn jobs_see_what_they_would_see_under_slurm() {
    if !usable() {
        return;
    }
    let scripts = scripts();
    assert!(scripts.len() >= 60, "{} scripts", scripts.len());
    let seen = sides::run_both(&scripts);
    let mut used = vec![0; accepted::ACCEPTED.len()];
    // Every difference, accepted or not, on stderr (with --nocapture).
    let verbose = std::env::var_os("FLEX_SBS_VERBOSE").is_some();
    let mut unexplained = String::new();
    for (script, (slurm, flex)) in scripts.iter().zip(&seen) {
        for f in differences(slurm, flex) {
            let hit = accepted::ACCEPTED
                .iter()
                .position(|a| glob(a.scripts, &script.name) && glob(a.fact, &f.fact));
            if verbose {
                eprintln!("{}: {}\n      {}", script.name, f.fact, f.detail);
            }
            match hit {
                Some(i) => used[i] += 1,
                None => unexplained.push_str(&format!(
                    "{}: {}{}{}\n",
                    script.name,
                    f.fact,
                    if f.detail.is_empty() { "" } else { "\n      " },
                    f.detail
                )),
            }
        }
    }
    for (a, n) in accepted::ACCEPTED.iter().zip(&used) {
        eprintln!("accepted {n:3}x  {} / {}", a.scripts, a.fact);
    }
    let stale: Vec<String> = accepted::ACCEPTED
        .iter()
        .zip(&used)
        .filter(|(_, n)| **n == 0)
        .map(|(a, _)| format!("{} / {} ({})", a.scripts, a.fact, a.reason))
        .collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "differences from Slurm that are not accepted:\n{unexplained}\n\
         accepted differences that no longer happen (remove them here and in docs/commands.md):\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_accepted_differences_are_documented() {
    let doc = std::fs::read_to_string(repo().join("../docs/commands.md")).unwrap();
    let section = doc
        .split_once("## Differences from Slurm, pinned by the side-by-side test")
        .expect("docs/commands.md has the section")
        .1;
    let section = section.split("\n## ").next().unwrap();
    for a in accepted::ACCEPTED {
        let line = format!("`{}` | `{}` |", a.scripts, a.fact);
        assert!(
            section.contains(&line) && section.contains(a.reason),
            "docs/commands.md lacks the row `{line} {}`",
            a.reason
        );
    }
}
