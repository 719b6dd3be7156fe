//! No sbatch or srun option is unknown to Flex: the option lists of the installed Slurm's
//! `sbatch --help`/`--usage` and `srun --help`/`--usage` (Debian's slurm-wlm, given a
//! two-line configuration so that they run), each checked against flexsub's options (honoured,
//! ignored with a warning, or refused with the reason) and against the srun a job gets.
//!
//! Needs Slurm's client commands; without them the test is skipped, unless CI=true: then it
//! fails.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::Command;

/// `cmd --help` and `cmd --usage`, as Slurm prints them.
fn help(cmd: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=flex\nSlurmctldHost=localhost\n").unwrap();
    let mut text = String::new();
    for flag in ["--help", "--usage"] {
        let o = match Command::new(cmd)
            .arg(flag)
            .env("SLURM_CONF", &conf)
            .output()
        {
            Ok(o) => o,
            Err(_) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true: {cmd} must be installed (slurm-wlm)"
                );
                return None;
            }
        };
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        text.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    Some(text)
}

/// The options a help text names: `--long` words, and `-x` letters where an option list or a
/// usage line gives them (`  -a, --array`, `[-N nnodes]`).
fn options(text: &str) -> (BTreeSet<String>, BTreeSet<char>) {
    let mut long = BTreeSet::new();
    let mut short = BTreeSet::new();
    for line in text.lines() {
        let bytes: Vec<char> = line.chars().collect();
        for (i, w) in line.match_indices("--") {
            let before = line[..i].chars().last();
            if before.is_some_and(|c| !matches!(c, ' ' | '[' | ',' | '|')) {
                continue;
            }
            let name: String = line[i + w.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            if name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
                long.insert(name);
            }
        }
        for i in 0..bytes.len().saturating_sub(1) {
            let before = if i == 0 { ' ' } else { bytes[i - 1] };
            let after = bytes.get(i + 2).copied().unwrap_or(' ');
            if bytes[i] == '-'
                && bytes[i + 1].is_ascii_alphabetic()
                && matches!(before, ' ' | '[')
                && matches!(after, ',' | ' ' | ']')
                && (line.trim_start().starts_with('-') || before == '[')
            {
                short.insert(bytes[i + 1]);
            }
        }
    }
    (long, short)
}

#[test]
fn every_sbatch_option_is_honoured_ignored_or_refused_with_why() {
    let Some(text) = help("sbatch") else {
        return;
    };
    let (long, short) = options(&text);
    assert!(
        long.len() > 80,
        "sbatch's help names {} options",
        long.len()
    );
    let cmd = flexsub::commands::submit::command();
    let known_long: BTreeSet<String> = cmd
        .get_arguments()
        .flat_map(|a| {
            a.get_long_and_visible_aliases()
                .unwrap_or_default()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .map(str::to_string)
        })
        .chain(["help".to_string(), "version".to_string()])
        .collect();
    let known_short: BTreeSet<char> = cmd
        .get_arguments()
        .filter_map(|a| a.get_short())
        .chain(['h', 'V'])
        .collect();
    let unknown_long: Vec<&String> = long.difference(&known_long).collect();
    let unknown_short: Vec<&char> = short.difference(&known_short).collect();
    assert!(
        unknown_long.is_empty() && unknown_short.is_empty(),
        "sbatch options Flex does not know: {unknown_long:?} {unknown_short:?}"
    );
    // Each Slurm option Flex does not honour says why, in one line of flexsub's help.
    for o in flexsub::options::SLURM_OPTIONS {
        assert!(!o.help.trim().is_empty(), "--{} gives no reason", o.long);
    }
}

#[test]
fn every_srun_option_is_known_to_a_jobs_srun() {
    let Some(text) = help("srun") else {
        return;
    };
    let (long, _) = options(&text);
    assert!(long.len() > 80, "srun's help names {} options", long.len());
    let mut unknown = Vec::new();
    for name in &long {
        if ["help", "usage", "version"].contains(&name.as_str()) {
            continue;
        }
        // `--name=VALUE` or `--name[=VALUE]` in the help: it takes a value.
        let valued = [format!("--{name}="), format!("--{name}[=")]
            .iter()
            .any(|f| text.contains(f.as_str()));
        let word = if valued {
            format!("--{name}=1")
        } else {
            format!("--{name}")
        };
        let words: Vec<OsString> = [word, "true".into()]
            .into_iter()
            .map(OsString::from)
            .collect();
        if let Err(e) = flexsub::commands::run::srun_args(&words) {
            if e.to_string().contains("not an option Flex's srun knows") {
                unknown.push(name.clone());
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "srun options a job's srun does not know: {unknown:?}"
    );
}
