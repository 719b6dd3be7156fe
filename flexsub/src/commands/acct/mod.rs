//! flexacct: accounting records of finished and live jobs (like sacct), as fixed-width columns,
//! `|`-separated text, CSV or JSON. The records come from flexd's database; users other than
//! root see only their own jobs.

mod fields;

pub use fields::{
    alloc_tres, decimal, parse_format, render, req_tres, Column, Ctx, Field, Style, DEFAULT_FORMAT,
    FIELDS,
};

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use crate::usage;
use crate::when;
use clap::Parser;
use flex_proto::{AcctQuery, AcctRecord, JobState, Request, Response};
use gres_plugin::JobId;
use std::io::Write;

/// Show accounting records of jobs (like sacct): what they asked for, what they held, when
/// they waited and ran, and how they ended.
///
/// Jobs are selected when their time between becoming eligible and ending (now, while they
/// have not ended) overlaps the period from --starttime to --endtime. Users other than root
/// see only their own jobs; root sees everyone's.
///
/// Times are local (TZ, else the system's zone): YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS] (today),
/// now, now-N{seconds|minutes|hours|days|weeks} (now-1day, now-2hours, now-30minutes), today,
/// yesterday, tomorrow, midnight, noon, or seconds since the epoch.
///
/// Exit codes: 0 success, 1 bad option value or period, 2 usage error, 3 flexd unreachable,
/// 4 permission denied, 5 protocol version mismatch, 6 flexd internal error.
#[derive(Debug, Parser)]
#[command(name = "flexacct", version)]
pub struct Args {
    /// Start of the period [default: today 00:00; with --jobs and no period: the epoch].
    #[arg(short = 'S', long = "starttime", value_name = "TIME")]
    pub start: Option<String>,
    /// End of the period [default: now].
    #[arg(short = 'E', long = "endtime", value_name = "TIME")]
    pub end: Option<String>,
    #[command(flatten)]
    pub select: Selection,
    /// Only these jobs (comma-separated ids).
    #[arg(short = 'j', long = "jobs", value_delimiter = ',', value_name = "IDS")]
    pub jobs: Vec<String>,
    /// Fields to show, comma-separated, each optionally with `%WIDTH` (`%-WIDTH` aligns
    /// left); see --helpformat.
    #[arg(short = 'o', long = "format", value_name = "FIELDS")]
    pub format: Option<String>,
    /// Print the field names --format takes, and exit.
    #[arg(short = 'e', long = "helpformat")]
    pub helpformat: bool,
    /// Separate fields with `|` (or --delimiter), no padding, no trailing delimiter.
    #[arg(short = 'P', long = "parsable2")]
    pub parsable: bool,
    /// The separator of --parsable2 (implies it).
    #[arg(long, value_name = "TEXT")]
    pub delimiter: Option<String>,
    /// Print CSV (RFC 4180) with a header line.
    #[arg(long, conflicts_with_all = ["json", "parsable", "delimiter"])]
    pub csv: bool,
    /// Print the selected jobs' full records as a JSON array (--format does not apply).
    #[arg(long, conflicts_with_all = ["parsable", "delimiter"])]
    pub json: bool,
    /// Leave out the header.
    #[arg(short = 'n', long = "noheader")]
    pub noheader: bool,
    /// Every user's jobs (root; other users always see only their own).
    #[arg(short = 'a', long = "allusers")]
    pub allusers: bool,
    /// Only the jobs' allocations, not their steps (sacct's -X): accepted for scripts; Flex
    /// keeps no steps, so every row is a job's allocation already.
    #[arg(short = 'X', long = "allocations")]
    pub allocations: bool,
    /// Only jobs with these names (comma-separated).
    #[arg(long = "name", value_delimiter = ',', value_name = "NAMES")]
    pub names: Vec<String>,
    /// sacct's `--units`: accepted; sizes are shown as flexacct shows them.
    #[arg(long = "units", value_name = "UNIT", hide = true)]
    pub units: Option<String>,
    /// Only these clusters (sacct's -M): this host's cluster, `flex`, or `all`.
    #[arg(
        short = 'M',
        long = "clusters",
        value_delimiter = ',',
        value_name = "CLUSTERS"
    )]
    pub clusters: Vec<String>,
}

/// The users, accounts and states flexacct and flexreport select records by.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Selection {
    /// Only these users' jobs (comma-separated names or uids).
    #[arg(
        short = 'u',
        long = "user",
        alias = "uid",
        value_delimiter = ',',
        value_name = "USERS"
    )]
    pub users: Vec<String>,
    /// Only these accounts' jobs (comma-separated).
    #[arg(
        short = 'A',
        long = "accounts",
        alias = "account",
        value_delimiter = ',',
        value_name = "ACCOUNTS"
    )]
    pub accounts: Vec<String>,
    /// Only jobs now in these states: names or codes (PD,R,CD,F,CA,TO,NF), comma-separated.
    #[arg(
        short = 's',
        long = "state",
        value_delimiter = ',',
        value_name = "STATES"
    )]
    pub states: Vec<String>,
}

impl Selection {
    /// The accounting query for this selection over a period.
    pub fn query(&self, start: u64, end: u64, jobs: Vec<JobId>) -> Result<AcctQuery, Error> {
        let given = |v: &[String]| v.iter().filter(|x| !x.is_empty()).cloned().collect();
        Ok(AcctQuery {
            start,
            end,
            users: given(&self.users),
            accounts: given(&self.accounts),
            states: parse_states(&self.states)?,
            jobs,
            after: None,
        })
    }
}

/// A record with what flexacct computes from it, for --json.
#[derive(serde::Serialize)]
struct JsonRecord<'a> {
    #[serde(flatten)]
    record: &'a AcctRecord,
    elapsed_s: u64,
    wait_s: u64,
    leaves_held: f64,
    gpu_equivalents: f64,
}

/// Parse the state list (names or codes).
pub fn parse_states(list: &[String]) -> Result<Vec<JobState>, Error> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            JobState::parse(s.trim()).ok_or_else(|| {
                Error::Input(format!(
                    "invalid state {s:?}: expected one of {} (or their codes)",
                    list_names()
                ))
            })
        })
        .collect()
}

fn list_names() -> String {
    JobState::ALL.map(|s| s.name()).join(", ")
}

/// Parse job ids.
pub fn parse_jobs(list: &[String]) -> Result<Vec<JobId>, Error> {
    list.iter()
        .map(|j| {
            // A step (`12.batch`, `12.0`) is its job: a Flex job's one row stands for its steps.
            let j = j.trim();
            j.split_once('.')
                .map_or(j, |(job, _)| job)
                .parse::<u64>()
                .map(JobId)
                .map_err(|_| Error::Input(format!("invalid job id {j:?}: expected a number")))
        })
        .collect()
}

/// The period from -S/-E (defaults given), checked: seconds since the epoch.
pub fn period(
    start: Option<&str>,
    end: Option<&str>,
    default_start: &str,
    default_end: &str,
    now: &jiff::Zoned,
) -> Result<(u64, u64), Error> {
    let parse = |opt: &str, s: &str| {
        when::parse(s, now)
            .map(|z| when::secs(&z))
            .map_err(|e| Error::Input(format!("{opt}: {e}")))
    };
    let s = parse("-S/--starttime", start.unwrap_or(default_start))?;
    let e = parse("-E/--endtime", end.unwrap_or(default_end))?;
    if e < s {
        return Err(Error::Input(format!(
            "invalid period: it ends ({}) before it starts ({})",
            when::format(e, now.time_zone()),
            when::format(s, now.time_zone())
        )));
    }
    Ok((s, e))
}

/// Ask flexd for the records.
pub fn fetch(q: AcctQuery, client: &str) -> Result<flex_proto::AcctReply, Error> {
    fetch_from(&mut Client::connect(client)?, q)
}

/// Ask for every page of records on one connection.
pub fn fetch_from(c: &mut Client, mut q: AcctQuery) -> Result<flex_proto::AcctReply, Error> {
    let mut all: Option<flex_proto::AcctReply> = None;
    loop {
        let page = match c.call(&Request::Accounting(q.clone()))? {
            Response::Accounting(r) => r,
            other => return Err(into_error(other)),
        };
        let next = page.jobs.last().map(|j| j.id).filter(|_| page.more);
        match &mut all {
            None => all = Some(page),
            Some(a) => a.jobs.extend(page.jobs),
        }
        match next {
            Some(id) => q.after = Some(id),
            None => break,
        }
    }
    let mut reply = all.expect("the loop ends after a page");
    reply.more = false;
    Ok(reply)
}

/// Run flexacct; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let w = Error::output;
    if a.helpformat {
        for f in FIELDS {
            writeln!(out, "{:<13}{}", f.name, f.help).map_err(w)?;
        }
        return Ok(exit::OK);
    }
    crate::options::check_clusters(&a.clusters.join(",")).map_err(Error::Input)?;
    let cols = parse_format(a.format.as_deref().unwrap_or(DEFAULT_FORMAT))?;
    let now = when::local_now();
    // With jobs named and no period, show them whenever they ran (as sacct does).
    let default_start = if a.jobs.is_empty() || a.start.is_some() || a.end.is_some() {
        "today"
    } else {
        "0"
    };
    let (start, end) = period(
        a.start.as_deref(),
        a.end.as_deref(),
        default_start,
        "now",
        &now,
    )?;
    let q = a.select.query(start, end, parse_jobs(&a.jobs)?)?;
    let mut reply = fetch(q, "flexacct")?;
    if !a.names.is_empty() {
        reply.jobs.retain(|r| a.names.contains(&r.name));
    }
    if a.json {
        let recs: Vec<JsonRecord> = reply
            .jobs
            .iter()
            .map(|r| JsonRecord {
                record: r,
                elapsed_s: usage::elapsed(r, reply.now),
                wait_s: usage::wait(r, reply.now),
                leaves_held: usage::leaves(r),
                gpu_equivalents: usage::gpu_equivalents(r),
            })
            .collect();
        let text = serde_json::to_string_pretty(&recs).expect("records serialize");
        writeln!(out, "{text}").map_err(w)?;
        return Ok(exit::OK);
    }
    let style = if a.csv {
        Style::Csv
    } else if a.parsable || a.delimiter.is_some() {
        Style::Parsable(a.delimiter.clone().unwrap_or_else(|| "|".into()))
    } else {
        Style::Columns
    };
    let ctx = Ctx {
        now: reply.now,
        tz: now.time_zone().clone(),
    };
    let usage_shown = cols.iter().any(|c| c.field.name.starts_with("TRESUsage"));
    let simulated = |r: &AcctRecord| r.gpu_usage.as_ref().is_some_and(|g| g.simulated());
    if usage_shown && reply.jobs.iter().any(simulated) {
        eprintln!(
            "flexacct: note: GPU figures of simulated topologies come from simulated telemetry \
             (the GPUTelemetry field says which)"
        );
    }
    let text = render(&cols, &reply.jobs, &ctx, &style, !a.noheader)?;
    out.write_all(text.as_bytes()).map_err(w)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::fields::tests::rec;
    use super::*;

    #[test]
    fn periods_and_filters() {
        let now: jiff::Zoned = "2026-11-21T10:30:00[UTC]".parse().unwrap();
        let (s, e) = period(Some("2026-11-20"), None, "today", "now", &now).unwrap();
        assert_eq!(e - s, 34 * 3600 + 1800);
        let e = period(Some("now"), Some("yesterday"), "today", "now", &now)
            .unwrap_err()
            .to_string();
        assert!(e.contains("before it starts"), "{e}");
        let e = period(Some("someday"), None, "today", "now", &now)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("-S/--starttime: invalid time \"someday\""),
            "{e}"
        );
        assert_eq!(
            parse_states(&["cd".into(), "TIMEOUT".into()]).unwrap(),
            [JobState::Completed, JobState::Timeout]
        );
        assert!(parse_states(&["done".into()]).is_err());
        assert!(parse_jobs(&["x".into()]).is_err());
    }

    #[test]
    fn every_page_is_fetched() {
        use flex_proto::{self as proto, AcctReply};
        let (_dir, path, server) = crate::client::stand_in(Some(proto::PROTOCOL_VERSION), |s| {
            let mut afters = Vec::new();
            for (ids, more) in [(vec![1, 2], true), (vec![5], false)] {
                let q = match proto::read_frame::<Request>(s, 1 << 20).unwrap() {
                    Request::Accounting(q) => q,
                    other => panic!("{other:?}"),
                };
                afters.push(q.after);
                let jobs = ids
                    .into_iter()
                    .map(|i| {
                        let mut r = rec();
                        r.id = JobId(i);
                        r
                    })
                    .collect();
                let page = AcctReply {
                    now: 1,
                    hosts: vec![],
                    jobs,
                    more,
                };
                proto::write_frame(s, &Response::Accounting(page)).unwrap();
            }
            afters
        });
        let mut c = Client::connect_to(&path, "flexacct").unwrap();
        let reply = fetch_from(&mut c, AcctQuery::default()).unwrap();
        let ids: Vec<u64> = reply.jobs.iter().map(|j| j.id.0).collect();
        assert_eq!(ids, [1, 2, 5]);
        assert!(!reply.more);
        assert_eq!(server.join().unwrap(), [None, Some(JobId(2))]);
    }
}
