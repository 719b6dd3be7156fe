//! The command forms of docs/slurm-tools.md, run against Flex's Slurm-named commands
//! (`flex-slurm`'s links) and against a real Slurm 22.05 (the side-by-side test's private
//! one-node cluster, declared as the same simulated a100-40gb-x2 host) for the same jobs,
//! submitted in the same order on both sides, both numbering from 1000: one completed, one
//! failed, one running, one pending on it, and an array of three pending on it. Wherever a tool
//! parses what Slurm prints, the answers are compared (normalised: times and dates, this
//! machine's host name), down to the field or key; every difference left is in
//! [`accepted::ACCEPTED`] with its reason, which docs/slurm-tools.md mirrors, and an entry that
//! no longer happens fails the test too.
//!
//! sacct needs slurmdbd and a database, which the private Slurm does not run: its sacct only
//! says that accounting is disabled. For sacct's forms the test checks that this is still so
//! (so that a Slurm with accounting would be compared), that Flex's sacct succeeds, and that
//! each job Flex's sacct lists is in the state Slurm's squeue gives it.
//!
//! `FLEX_FORMATS_VERBOSE=1 cargo test -p flex-tests --test slurm_formats -- --nocapture` prints
//! every difference, accepted ones too, with both sides' text.
//!
//! Needs root, slurm-wlm and munge, as `tests/tests/slurm/`; skipped without them unless
//! CI=true.

mod accepted;
mod compare;
#[path = "../slurm/daemons.rs"]
mod daemons;
mod forms;
#[path = "../slurm/setup.rs"]
#[allow(dead_code, reason = "shared with the slurm test, which uses all of it")]
mod setup;
mod sides;
#[path = "../side_by_side/slurm.rs"]
#[allow(
    dead_code,
    reason = "shared with the side-by-side test, which uses all of it"
)]
mod slurm;

use compare::{differences, glob, shown, Difference};
use forms::{Compare, ACCOUNTS, ACT, QUERY, STAND_INS, SUBMIT};
use setup::usable;
use sides::Sides;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The placeholders of the submitted jobs, in submission order.
const JOBS: [&str; 5] = ["{done}", "{fail}", "{run}", "{pend}", "{arr}"];

/// Runs every form on both sides; every difference.
fn run_all(sides: &mut Sides) -> Vec<Difference> {
    let mut found = Vec::new();
    for (form, key) in SUBMIT.iter().zip(JOBS) {
        sides.write_scripts();
        let (s, f) = (sides.run(true, form), sides.run(false, form));
        let roles = [sides.roles(true), sides.roles(false)];
        found.extend(differences(form, &s, &f, [&roles[0], &roles[1]], &|_| None));
        for (i, a) in [s, f].into_iter().enumerate() {
            let slurm = i == 0;
            let mut id = job_id(&a.stdout);
            if id.is_none() {
                assert!(!slurm, "Slurm refused {}: {}", shown(form), a.stderr);
                let (_, stand_in) = STAND_INS
                    .iter()
                    .find(|(k, _)| *k == key)
                    .unwrap_or_else(|| panic!("Flex refused {}: {}", shown(form), a.stderr));
                let b = sides.run(slurm, stand_in);
                id = job_id(&b.stdout);
                assert!(
                    id.is_some(),
                    "Flex refused the stand-in for {}: {}",
                    shown(form),
                    b.stderr
                );
            }
            sides.words[i].push((key, id.unwrap()));
        }
    }
    sides.wait_for_jobs();
    let states = sides.states(true);
    let state = |id: &str| states.iter().find(|(i, _)| i == id).map(|(_, s)| s.clone());
    let (sr, fr) = (sides.roles(true), sides.roles(false));
    for form in QUERY.iter().chain(ACCOUNTS).chain(ACT) {
        let (s, f) = (sides.run(true, form), sides.run(false, form));
        found.extend(differences(form, &s, &f, [&sr, &fr], &state));
        if let Compare::WithoutDbd(want) = form.compare {
            let got = f.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
            let want = sides.fill(false, want);
            if got != want {
                found.push(Difference {
                    form: shown(form),
                    part: "Flex's answer".into(),
                    slurm: want,
                    flex: got,
                });
            }
        }
    }
    found
}

/// The job id sbatch printed (`Submitted batch job N`, `N`, `N;cluster`).
fn job_id(out: &str) -> Option<String> {
    out.split(|c: char| !c.is_ascii_digit())
        .rfind(|w| !w.is_empty())
        .map(str::to_string)
}

#[test]
fn slurm_named_commands_print_what_slurm_prints() {
    if !usable() {
        return;
    }
    let mut sides = Sides::start(&repo());
    let found = run_all(&mut sides);
    let verbose = std::env::var_os("FLEX_FORMATS_VERBOSE").is_some();
    let mut used = vec![0; accepted::ACCEPTED.len()];
    let mut unexplained = String::new();
    for d in &found {
        let text = format!(
            "{} / {}\n      slurm: {:?}\n      flex:  {:?}\n",
            d.form, d.part, d.slurm, d.flex
        );
        if verbose {
            eprint!("{text}");
        }
        match accepted::ACCEPTED
            .iter()
            .position(|a| glob(a.form, &d.form) && glob(a.part, &d.part))
        {
            Some(i) => used[i] += 1,
            None => unexplained.push_str(&text),
        }
    }
    let stale: Vec<String> = accepted::ACCEPTED
        .iter()
        .zip(&used)
        .filter(|(_, n)| **n == 0)
        .map(|(a, _)| format!("{} / {} ({})", a.form, a.part, a.reason))
        .collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "differences from Slurm 22.05 that are not accepted:\n{unexplained}\n\
         accepted differences that no longer happen (remove them here and in docs/slurm-tools.md):\n{}",
        stale.join("\n")
    );
}

#[test]
fn every_form_and_accepted_difference_is_documented() {
    let doc = std::fs::read_to_string(repo().join("../docs/slurm-tools.md")).unwrap();
    for form in SUBMIT.iter().chain(QUERY).chain(ACCOUNTS).chain(ACT) {
        // A `|` in a table cell is written `\|`.
        let row = format!("| `{}` |", shown(form).replace('|', "\\|"));
        let tools = format!("| {} |", form.tools);
        assert!(
            doc.lines()
                .any(|l| l.starts_with(&row) && l.ends_with(&tools)),
            "docs/slurm-tools.md lacks the row {row} ... {tools}"
        );
    }
    for a in accepted::ACCEPTED {
        let row = format!("| `{}` | `{}` | {} |", a.form, a.part, a.reason);
        assert!(
            doc.contains(&row),
            "docs/slurm-tools.md lacks the row {row}"
        );
    }
}
