//! flexcancel: cancel jobs, or send them a signal (like scancel).

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use clap::Parser;
use flex_proto::{JobRef, Request, Response};

/// Cancel jobs, or send them a signal (like scancel). Only your own jobs, unless you are root.
#[derive(Debug, Parser)]
#[command(name = "flexcancel", version)]
pub struct Args {
    /// Send this signal (TERM, KILL, USR1, SIGUSR1, 10, ...) instead of cancelling.
    #[arg(short = 's', long = "signal", value_name = "SIGNAL", value_parser = parse_signal)]
    pub signal: Option<i32>,
    /// The jobs: `12` (a job, or every task of the array 12), `12_3` (one task), `12_[3-5]`.
    #[arg(required = true, value_name = "JOBID", value_parser = parse_job)]
    pub jobs: Vec<JobRef>,
}

fn parse_signal(s: &str) -> Result<i32, String> {
    crate::units::parse_signal(s).map_err(|e| e.to_string())
}

fn parse_job(s: &str) -> Result<JobRef, String> {
    JobRef::parse(s.trim()).map_err(|e| format!("invalid job id: {e}"))
}

/// The exit code for per-job failures: permission denied wins over other refusals.
pub fn outcome_code(errors: &[&str]) -> i32 {
    if errors.is_empty() {
        exit::OK
    } else if errors
        .iter()
        .any(|e| e.to_ascii_lowercase().contains("permission denied"))
    {
        exit::PERMISSION_DENIED
    } else {
        exit::REJECTED
    }
}

/// Run flexcancel; per-job failures go to stderr. Returns the exit code.
pub fn run(a: &Args) -> Result<i32, Error> {
    // Plain ids as before (older flexd), task references beside them.
    let (plain, tasks): (Vec<JobRef>, Vec<JobRef>) =
        a.jobs.iter().cloned().partition(|r| r.tasks.is_none());
    let req = Request::Cancel(flex_proto::CancelRequest {
        jobs: plain.into_iter().map(|r| r.job).collect(),
        signal: a.signal,
        tasks,
    });
    let outcomes = match Client::connect("flexcancel")?.call(&req)? {
        Response::Cancelled(o) => o,
        other => return Err(into_error(other)),
    };
    let mut errors = Vec::new();
    for o in &outcomes {
        if let Some(e) = &o.error {
            // flexd's messages name the job as the user wrote it (`12_3`).
            eprintln!("flexcancel: {e}");
            errors.push(e.as_str());
        }
    }
    Ok(outcome_code(&errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let a = Args::try_parse_from(["flexcancel", "-s", "USR1", "3", "4_[1-2]"]).unwrap();
        assert_eq!(a.signal, Some(libc::SIGUSR1));
        let shown: Vec<String> = a.jobs.iter().map(|r| r.to_string()).collect();
        assert_eq!(shown, ["3", "4_[1-2]"]);
        let e = Args::try_parse_from(["flexcancel", "x"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid job id: \"x\""), "{e}");
        assert!(Args::try_parse_from(["flexcancel", "-s", "NOPE", "1"]).is_err());
        assert!(Args::try_parse_from(["flexcancel"]).is_err());
    }

    #[test]
    fn permission_denied_has_its_own_code() {
        assert_eq!(outcome_code(&[]), exit::OK);
        assert_eq!(outcome_code(&["no such job"]), exit::REJECTED);
        assert_eq!(
            outcome_code(&["no such job", "permission denied: job 3 belongs to ann"]),
            exit::PERMISSION_DENIED
        );
    }
}
