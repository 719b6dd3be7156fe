//! Traces in the original columns replay exactly as they always have: the output of `flexsim
//! gen`, `run`, `fairness`, `compare` and `sweep` on the checked-in trace and on generated
//! ones is compared byte for byte with files in `tests/golden/`, written by the binary before
//! traces could carry cores and host memory. The tables of docs/flexsim.md come from these
//! commands.
//!
//! `FLEXSIM_BLESS=1 cargo test -p flexsim --test unchanged` rewrites the files; a change of
//! them is a change of every published number and needs saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn checked_in_trace() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/fairness.csv")
        .display()
        .to_string()
}

fn flexsim(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_flexsim"))
        .args(args)
        .output()
        .expect("flexsim runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Compare `got` with the golden file `name` (or write it when blessing); the mismatches are
/// collected so that one run names every file that changed.
fn check(name: &str, got: &[u8], changed: &mut Vec<String>) {
    let path = golden_dir().join(name);
    if std::env::var_os("FLEXSIM_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if want != got {
        let first = want
            .split(|&c| c == b'\n')
            .zip(got.split(|&c| c == b'\n'))
            .position(|(a, b)| a != b)
            .map_or(0, |i| i + 1);
        changed.push(format!("{name} (first difference on line {first})"));
    }
}

#[test]
fn old_traces_replay_unchanged() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    let mut changed = Vec::new();

    let gen = p("gen.csv");
    flexsim(&[
        "gen",
        "--category",
        "balanced",
        "--kind",
        "mixed",
        "--seed",
        "7",
        "--out",
        &gen,
    ]);
    check(
        "gen-balanced-mixed-7.csv",
        &std::fs::read(&gen).unwrap(),
        &mut changed,
    );

    let fairness = checked_in_trace();
    for (trace, tag) in [(&gen, "gen"), (&fairness, "fairness")] {
        for model in ["fm", "dm", "sm"] {
            for policy in ["fifo", "backfill", "conservative:adaptive"] {
                let jobs = p("jobs.csv");
                let mut out = flexsim(&[
                    "run",
                    "--trace",
                    trace,
                    "--model",
                    model,
                    "--policy",
                    policy,
                    "--json",
                    "--jobs-out",
                    &jobs,
                ]);
                out.extend(std::fs::read(&jobs).unwrap());
                let policy = policy.replace(':', "-");
                check(
                    &format!("run-{tag}-{model}-{policy}.txt"),
                    &out,
                    &mut changed,
                );
            }
        }
    }

    check(
        "fairness.json",
        &flexsim(&["fairness", "--trace", &fairness, "--json"]),
        &mut changed,
    );

    let out = p("cmp");
    flexsim(&[
        "compare",
        "--traces-per-category",
        "2",
        "--kinds",
        "train,mixed",
        "--policies",
        "fifo,backfill",
        "--out-dir",
        &out,
    ]);
    for f in ["runs.csv", "ratios.csv"] {
        let got = std::fs::read(Path::new(&out).join(f)).unwrap();
        check(&format!("compare-{f}"), &got, &mut changed);
    }

    check(
        "sweep.json",
        &flexsim(&[
            "sweep",
            "--seeds",
            "1",
            "--kinds",
            "mixed",
            "--policies",
            "fifo,backfill:adaptive",
            "--json",
        ]),
        &mut changed,
    );

    assert!(changed.is_empty(), "output changed: {}", changed.join(", "));
}
