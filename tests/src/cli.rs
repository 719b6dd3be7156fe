//! Running the user commands from a test as a user would: from a directory, with the
//! workspace binaries on PATH, reading what they print. Shared by `commands.rs` and
//! `commands_slurm.rs`.

use crate::{bin_dir, Daemon};
use flex_proto::{JobState, JobView};
use gres_plugin::JobId;
use std::path::Path;
use std::process::Command;

/// A command with the workspace binaries first on PATH, so job scripts find flexrun (the job's
/// environment is the submitter's).
pub fn cmd(d: &Daemon, name: &str) -> Command {
    let mut c = d.cmd(name);
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("{}:{path}", bin_dir().display()));
    c
}

/// What a command printed, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Submit `script` (written into `dir` as `name`) from `dir` with `args`; returns the job id.
pub fn submit(d: &Daemon, dir: &Path, name: &str, script: &str, args: &[&str]) -> JobId {
    std::fs::write(dir.join(name), script).unwrap();
    let out = cmd(d, "flexsub")
        .current_dir(dir)
        .args(args)
        .arg("--parsable")
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "flexsub failed: {out:?}\n{}", d.log());
    JobId(
        text(&out.stdout)
            .trim()
            .parse()
            .expect("flexsub --parsable prints the id"),
    )
}

/// `flexq --json ARGS`, parsed.
pub fn flexq_json(d: &Daemon, args: &[&str]) -> Vec<JobView> {
    let out = cmd(d, "flexq").arg("--json").args(args).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("flexq --json is an array of JobView")
}

/// Wait until `job` runs; returns its view then.
pub fn wait_running(d: &Daemon, job: JobId) -> JobView {
    d.wait_state(job, &[JobState::Running])
}
