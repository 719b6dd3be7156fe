//! flexcontrol: hold, release, requeue and update jobs, and show them (like scontrol).

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use crate::when;
use clap::{Parser, Subcommand};
use flex_proto::{ControlAction, ControlRequest, JobRef, JobView, Request, Response};
use std::fmt::Write as _;
use std::io::Write;

/// Hold, release, requeue and update jobs, or show them (like scontrol). Only your own jobs,
/// unless you are root.
#[derive(Debug, Parser)]
#[command(name = "flexcontrol", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Keep pending jobs from starting (JobHeldUser; JobHeldAdmin when root holds them).
    Hold {
        #[arg(required = true, value_name = "JOBID", value_parser = parse_job)]
        jobs: Vec<JobRef>,
    },
    /// Let held jobs start again (a job root held only root may release).
    Release {
        #[arg(required = true, value_name = "JOBID", value_parser = parse_job)]
        jobs: Vec<JobRef>,
    },
    /// Put running or finished jobs back in the queue, under the same id (a running one is
    /// ended first, with flexd's kill grace).
    Requeue {
        #[arg(required = true, value_name = "JOBID", value_parser = parse_job)]
        jobs: Vec<JobRef>,
    },
    /// Like requeue, and hold the jobs.
    Requeuehold {
        #[arg(required = true, value_name = "JOBID", value_parser = parse_job)]
        jobs: Vec<JobRef>,
    },
    /// Change a pending job: TimeLimit=TIME (only root raises it), JobName=NAME (also while
    /// it runs), Priority=N and Nice=N (root).
    Update {
        /// The job: `12`, `JobId=12`, `12_3`.
        #[arg(value_name = "JOBID")]
        job: String,
        /// KEY=VALUE pairs.
        #[arg(required = true, value_name = "KEY=VALUE")]
        changes: Vec<String>,
    },
    /// Show jobs in full, scontrol's KEY=VALUE layout; flexd's configuration, the host's
    /// resources and where job limits are enforced (`show config`); or the host as Slurm's
    /// one partition, `flex` (`show partition`).
    Show {
        /// What to show: `job`, `config` or `partition`.
        #[arg(value_parser = ["job", "config", "partition"], value_name = "ENTITY")]
        entity: String,
        /// The jobs (for `job`).
        #[arg(value_name = "JOBID", value_parser = parse_job)]
        jobs: Vec<JobRef>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Each job or partition on one line (scontrol's `-o`).
        #[arg(short = 'o', long)]
        oneliner: bool,
    },
}

fn parse_job(s: &str) -> Result<JobRef, String> {
    let s = s.trim();
    let s = s
        .strip_prefix("JobId=")
        .or_else(|| s.strip_prefix("jobid="))
        .unwrap_or(s);
    JobRef::parse(s).map_err(|e| format!("invalid job id: {e}"))
}

/// `KEY=VALUE` pairs as sent: TimeLimit in seconds (Slurm's forms accepted here).
pub fn changes(pairs: &[String]) -> Result<Vec<(String, String)>, Error> {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("{p:?} is not KEY=VALUE")))?;
            let v = if k.eq_ignore_ascii_case("timelimit") {
                crate::units::parse_time(v)
                    .map_err(|e| Error::Input(e.to_string()))?
                    .to_string()
            } else {
                v.to_string()
            };
            Ok((k.to_string(), v))
        })
        .collect()
}

/// Run flexcontrol; per-job failures go to stderr. Returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let (action, jobs) = match &a.command {
        Cmd::Hold { jobs } => (ControlAction::Hold, jobs.clone()),
        Cmd::Release { jobs } => (ControlAction::Release, jobs.clone()),
        Cmd::Requeue { jobs } => (ControlAction::Requeue { hold: false }, jobs.clone()),
        Cmd::Requeuehold { jobs } => (ControlAction::Requeue { hold: true }, jobs.clone()),
        Cmd::Update { job, changes: c } => (
            ControlAction::Update(changes(c)?),
            vec![parse_job(job).map_err(Error::Usage)?],
        ),
        Cmd::Show { entity, .. } if entity == "config" => {
            return show_config(a, out);
        }
        Cmd::Show {
            entity, oneliner, ..
        } if entity == "partition" => {
            let p = super::host::gather(&mut Client::connect("flexcontrol")?)?;
            out.write_all(p.show(*oneliner).as_bytes())
                .map_err(Error::output)?;
            return Ok(exit::OK);
        }
        Cmd::Show { jobs, .. } if jobs.is_empty() => {
            return Err(Error::Usage("show job: give at least one JOBID".into()));
        }
        Cmd::Show { jobs, .. } => (ControlAction::Show, jobs.clone()),
    };
    let req = Request::Control(ControlRequest { action, jobs });
    let w = Error::output;
    match Client::connect("flexcontrol")?.call(&req)? {
        Response::Controlled(outcomes) => {
            let errors: Vec<&str> = outcomes.iter().filter_map(|o| o.error.as_deref()).collect();
            for e in &errors {
                eprintln!("flexcontrol: {e}");
            }
            Ok(super::cancel::outcome_code(&errors))
        }
        Response::Queue(page) => {
            let json = matches!(a.command, Cmd::Show { json: true, .. });
            let text = if json {
                serde_json::to_string_pretty(&page.jobs).expect("protocol types serialize") + "\n"
            } else {
                let tz = when::local_now().time_zone().clone();
                let one = matches!(a.command, Cmd::Show { oneliner: true, .. });
                page.jobs
                    .iter()
                    .map(|j| match show_job(j, &tz) {
                        t if one => t.replace("\n   ", " ") + "\n",
                        t => t + "\n",
                    })
                    .collect()
            };
            out.write_all(text.as_bytes()).map_err(w)?;
            Ok(exit::OK)
        }
        other => Err(into_error(other)),
    }
}

/// `show config`: one `KEY = VALUE` line each, as `scontrol show config` prints them (or JSON
/// pairs with `--json`).
fn show_config(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    match Client::connect("flexcontrol")?.call(&Request::Config)? {
        Response::Config(pairs) => {
            let text = if matches!(a.command, Cmd::Show { json: true, .. }) {
                serde_json::to_string_pretty(&pairs).expect("protocol types serialize") + "\n"
            } else {
                let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
                pairs
                    .iter()
                    .map(|(k, v)| format!("{k:<width$} = {v}\n"))
                    .collect()
            };
            out.write_all(text.as_bytes()).map_err(Error::output)?;
            Ok(exit::OK)
        }
        other => Err(into_error(other)),
    }
}

/// One job as `scontrol show job` lays it out.
pub fn show_job(j: &JobView, tz: &jiff::tz::TimeZone) -> String {
    let t = |s: Option<u64>| s.map_or("Unknown".to_string(), |s| when::format(s, tz));
    let mut o = String::new();
    let _ = write!(o, "JobId={} ", j.id);
    if let Some(a) = j.array {
        let _ = write!(o, "ArrayJobId={} ArrayTaskId={} ", a.job, a.index);
    }
    let safe = flex_proto::text::escape_controls;
    let _ = writeln!(o, "JobName={}", safe(&j.name));
    let _ = writeln!(
        o,
        "   UserId={}({}) Account={} Priority={} Nice={}",
        j.user, j.uid, j.account, j.priority, j.nice
    );
    let _ = writeln!(
        o,
        "   JobState={} Reason={} Dependency={}",
        j.state,
        j.reason.as_deref().unwrap_or("None"),
        j.dependency
            .as_ref()
            .map_or("(null)".to_string(), |d| d.to_string())
    );
    let _ = writeln!(
        o,
        "   Requeue={} Restarts={} ExitCode={}",
        u8::from(j.requeue),
        j.restarts,
        j.state.exit_code_text(j.exit_code, j.signal)
    );
    let _ = writeln!(
        o,
        "   SubmitTime={} StartTime={} EndTime={}",
        t(Some(j.submit_time)),
        t(j.start_time.or(j.estimated_start)),
        t(j.end_time)
    );
    let _ = writeln!(
        o,
        "   TimeLimit={} TRES={}",
        when::format_elapsed(j.request.time_limit_s),
        flex_proto::units_text(&[], &j.request)
    );
    let node = j.alloc.as_ref().map_or("(null)", |a| a.host.as_str());
    let _ = write!(o, "   NodeList={node}");
    if let Some(d) = &j.details {
        let command = d.command.as_deref().map_or("(null)".into(), safe);
        let _ = write!(o, "\n   Command={command}");
        let _ = write!(o, "\n   WorkDir={}", safe(&d.workdir.display().to_string()));
    }
    if let Some(c) = &j.comment {
        let _ = write!(o, "\n   Comment={}", safe(c));
    }
    if let Some(d) = &j.details {
        let path = |stderr| {
            safe(&shown_path(j, &crate::format::output_pattern(j, d, stderr))).into_owned()
        };
        let _ = write!(o, "\n   StdErr={}", path(true));
        let _ = write!(o, "\n   StdIn=/dev/null");
        let _ = write!(o, "\n   StdOut={}", path(false));
    }
    o
}

/// An output pattern as `scontrol show job` shows it: Slurm 22.05 (`_fname_format` in
/// job_info.c) fills in only `%A %a %j %u %x` there, and leaves the other letters as given.
fn shown_path(j: &JobView, pattern: &str) -> String {
    let (array_job, index) = j
        .array
        .map_or((j.id.0, flex_proto::fname::NO_ARRAY_INDEX), |a| {
            (a.job.0, a.index)
        });
    pattern
        .replace("%A", &array_job.to_string())
        .replace("%a", &index.to_string())
        .replace("%j", &j.id.0.to_string())
        .replace("%u", &j.user)
        .replace("%x", &j.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let a = Args::try_parse_from(["flexcontrol", "hold", "12", "13_[1-2]"]).unwrap();
        assert!(matches!(a.command, Cmd::Hold { ref jobs } if jobs.len() == 2));
        let a = Args::try_parse_from(["flexcontrol", "update", "JobId=12", "TimeLimit=10"]);
        let Cmd::Update { job, changes: c } = a.unwrap().command else {
            panic!("update")
        };
        assert_eq!(parse_job(&job).unwrap().job.0, 12);
        assert_eq!(changes(&c).unwrap(), [("TimeLimit".into(), "600".into())]);
        assert!(changes(&["TimeLimit".into()]).is_err());
        assert!(Args::try_parse_from(["flexcontrol", "show", "node", "1"]).is_err());
        assert!(Args::try_parse_from(["flexcontrol", "release"]).is_err());
    }
}
