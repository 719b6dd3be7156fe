//! flexq: the queue (like squeue) and the host's leaf map.

use crate::client::{into_error, Client};
use crate::error::Error;
use crate::format::{self, Format};
use crate::table;
use crate::when;
use clap::Parser;
use flex_proto::{ArrayRows, JobState, QueueFilter, Request, Response};
use gres_plugin::JobId;
use std::io::Write;

/// Show queued and running jobs (like squeue), or the host's leaves.
#[derive(Debug, Parser)]
#[command(name = "flexq", version, disable_help_flag = true)]
pub struct Args {
    /// Only these users' jobs (comma-separated names).
    #[arg(
        short = 'u',
        long = "user",
        value_delimiter = ',',
        value_name = "USERS"
    )]
    pub users: Vec<String>,
    /// Only jobs in these states: names or squeue codes (PD,R,CD,F,CA,TO,NF,OOM), or "all".
    #[arg(
        short = 't',
        long = "states",
        value_delimiter = ',',
        value_name = "STATES"
    )]
    pub states: Vec<String>,
    /// Only these jobs (comma-separated ids; an array's id names all its tasks).
    #[arg(short = 'j', long = "jobs", value_delimiter = ',', value_name = "IDS")]
    pub jobs: Vec<String>,
    /// Every task of an array on its own row (by default an array's pending tasks share one
    /// row, `12_[4-15%2]`, as in squeue).
    #[arg(short = 'r', long = "array")]
    pub array: bool,
    /// Only your own jobs.
    #[arg(long)]
    pub me: bool,
    /// Only jobs with these names (comma-separated).
    #[arg(
        short = 'n',
        long = "name",
        value_delimiter = ',',
        value_name = "NAMES"
    )]
    pub names: Vec<String>,
    /// squeue's format: `%[.][size]type` fields, e.g. "%.18i %.8j %.2t %.10M %R" (see
    /// docs/commands.md for the fields).
    #[arg(short = 'o', long = "format", value_name = "FORMAT")]
    pub format: Option<String>,
    /// squeue's long format: comma-separated `name[:[.][size]]`, e.g. "JobID,Name:30,State".
    #[arg(short = 'O', long = "Format", value_name = "FIELDS")]
    pub format_long: Option<String>,
    /// squeue's long listing (STATE in full, TIME_LIMIT).
    #[arg(short = 'l', long = "long")]
    pub long: bool,
    /// Pending jobs with their expected start times.
    #[arg(long)]
    pub start: bool,
    /// Print JSON (an array of jobs, or of hosts with --leaves).
    #[arg(long)]
    pub json: bool,
    /// Leave out the header line.
    #[arg(short = 'h', long = "noheader")]
    pub noheader: bool,
    /// Show every leaf of the host: its GPU, profile, free share and the job holding it.
    #[arg(long)]
    pub leaves: bool,
    /// Only jobs in these partitions (squeue's -p): a Flex host's one partition is `flex`.
    #[arg(
        short = 'p',
        long = "partition",
        value_delimiter = ',',
        value_name = "PARTITIONS"
    )]
    pub partitions: Vec<String>,
    /// Only these clusters (squeue's -M): this host's cluster, `flex`, or `all`.
    #[arg(
        short = 'M',
        long = "clusters",
        value_delimiter = ',',
        value_name = "CLUSTERS"
    )]
    pub clusters: Vec<String>,
    /// Accepted for squeue's scripts: every partition is shown already (`-a/--all`), sizes are
    /// not converted (`--noconvert`), and only the state is needed (`--only-job-state`).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    #[arg(long = "noconvert", hide = true)]
    pub noconvert: bool,
    #[arg(long = "only-job-state", hide = true)]
    pub only_job_state: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// The daemon's filter from the options; finished jobs are shown when a finished state is asked.
pub fn filter(a: &Args) -> Result<QueueFilter, Error> {
    let mut f = QueueFilter {
        users: a.users.iter().filter(|u| !u.is_empty()).cloned().collect(),
        arrays: Some(if a.array {
            ArrayRows::Expand
        } else {
            ArrayRows::Collapse
        }),
        ..QueueFilter::default()
    };
    if a.me {
        f.users.push(nix::unistd::getuid().to_string());
    }
    for s in &a.states {
        if s.eq_ignore_ascii_case("all") {
            f.states = JobState::ALL.to_vec();
            continue;
        }
        let st = JobState::parse(s).ok_or_else(|| {
            let names: Vec<&str> = JobState::ALL.iter().map(|s| s.name()).collect();
            Error::Input(format!(
                "invalid state {s:?}: expected one of {} (or their codes), or all",
                names.join(", ")
            ))
        })?;
        if !f.states.contains(&st) {
            f.states.push(st);
        }
    }
    if a.start && f.states.is_empty() {
        f.states.push(JobState::Pending);
    }
    f.include_finished = f.states.iter().any(|s| s.is_finished());
    for j in &a.jobs {
        // `12_3` selects the array 12 (flexq shows its tasks).
        let id = j
            .trim()
            .split('_')
            .next()
            .unwrap_or_default()
            .parse::<u64>()
            .map_err(|_| Error::Input(format!("invalid job id {j:?}: expected a number")))?;
        f.jobs.push(JobId(id));
    }
    Ok(f)
}

/// Run flexq; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let w = Error::output;
    if a.leaves {
        let hosts = match Client::connect("flexq")?.call(&Request::LeafMap)? {
            Response::LeafMap(h) => h,
            other => return Err(into_error(other)),
        };
        if a.json {
            let text = serde_json::to_string_pretty(&hosts).expect("protocol types serialize");
            writeln!(out, "{text}").map_err(w)?;
        } else {
            write!(out, "{}", table::leaf_map(&hosts, !a.noheader)).map_err(w)?;
        }
        return Ok(crate::error::exit::OK);
    }
    for p in &a.partitions {
        if !p.is_empty() && p != format::PARTITION {
            return Err(Error::Input(format!(
                "invalid partition {p:?}: this host's one partition is {}",
                format::PARTITION
            )));
        }
    }
    crate::options::check_clusters(&a.clusters.join(",")).map_err(Error::Input)?;
    let mut f = filter(a)?;
    let format = match (&a.format, &a.format_long) {
        (Some(o), _) => Some(Format::short(o)),
        (None, Some(o)) => Some(Format::long(o)),
        (None, None) if a.start => Some(Format::short(format::START)),
        (None, None) if a.long => Some(Format::short(format::LONG)),
        (None, None) => None,
    }
    .transpose()
    .map_err(Error::Input)?;
    let mut client = Client::connect("flexq")?;
    let named = |name: &str| a.names.is_empty() || a.names.iter().any(|n| n == name);
    if let Some(format) = format {
        f.details = format.needs_details();
        let now = when::local_now();
        let (secs, tz) = (when::secs(&now), now.time_zone().clone());
        let mut text = String::new();
        if !a.noheader {
            text.push_str(&format.header());
            text.push('\n');
        }
        let mut jobs = client.queue(f)?;
        jobs.retain(|j| named(&j.name));
        jobs.sort_by(slurm_order);
        for j in &jobs {
            text.push_str(&format.row(j, secs, &tz));
            text.push('\n');
        }
        out.write_all(text.as_bytes()).map_err(w)?;
    } else if a.json {
        let mut jobs = client.queue(f)?;
        jobs.retain(|j| named(&j.name));
        let text = serde_json::to_string_pretty(&jobs).expect("protocol types serialize");
        writeln!(out, "{text}").map_err(w)?;
    } else {
        let mut t = table::QueueTable::new(!a.noheader);
        client.queue_rows(f, |row| {
            if named(&row.name) {
                t.push(&row)
            }
        })?;
        t.write_to(out).and_then(|()| out.flush()).map_err(w)?;
    }
    Ok(crate::error::exit::OK)
}

/// squeue's default order (`-S P,t,-p`): by partition (a Flex host has one), by the state's
/// compact code as text (CD, F, PD, R), then the highest priority first; ties by id.
fn slurm_order(a: &flex_proto::JobView, b: &flex_proto::JobView) -> std::cmp::Ordering {
    (a.state.code().cmp(b.state.code()))
        .then(b.priority.cmp(&a.priority))
        .then(a.id.cmp(&b.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_from_options() {
        let a = Args::try_parse_from(["flexq", "-u", "ann,bob", "-t", "pd,RUNNING", "-j", "3,4"])
            .unwrap();
        let f = filter(&a).unwrap();
        assert_eq!(f.users, ["ann", "bob"]);
        assert_eq!(f.states, [JobState::Pending, JobState::Running]);
        assert_eq!(f.jobs, [JobId(3), JobId(4)]);
        assert!(!f.include_finished);
        let f = filter(&Args::try_parse_from(["flexq", "-t", "all", "-h"]).unwrap()).unwrap();
        assert!(f.include_finished && f.states.len() == JobState::ALL.len());
        let e = filter(&Args::try_parse_from(["flexq", "-t", "done"]).unwrap()).unwrap_err();
        assert!(e.to_string().contains("\"done\""));
        let e = filter(&Args::try_parse_from(["flexq", "-j", "x"]).unwrap()).unwrap_err();
        assert!(e.to_string().contains("\"x\""));
    }
}
