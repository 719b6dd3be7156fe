//! flexacct: accounting records of finished and live jobs (like sacct), as fixed-width columns,
//! `|`-separated text, CSV or JSON. The records come from flexd's database; users other than
//! root see only their own jobs.

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use crate::proto::{AcctQuery, AcctRecord, JobState, Request, Response};
use crate::usage;
use crate::when;
use clap::Parser;
use gres_plugin::topology::format_cpu_list;
use gres_plugin::JobId;
use jiff::tz::TimeZone;
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
}

/// What --format shows when not given (sacct's default, with leaves and cores for its
/// partition and CPU count).
pub const DEFAULT_FORMAT: &str = "JobID,JobName,User,Account,NLeaves,NCPUS,State,ExitCode";

/// A field of --format: its name, default width and what it says.
pub struct Field {
    pub name: &'static str,
    pub width: usize,
    pub help: &'static str,
    value: fn(&AcctRecord, &Ctx) -> String,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// What values need besides the record.
pub struct Ctx {
    pub now: u64,
    pub tz: TimeZone,
}

fn time(t: Option<u64>, c: &Ctx) -> String {
    t.map_or_else(|| "Unknown".into(), |t| when::format(t, &c.tz))
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(",")
}

/// A number with at most `places` decimals, trailing zeros dropped (`4`, `0.571`).
pub fn decimal(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// What the job asked for, as TRES (`cpu=8,mem=20G,node=1,gres/leaf=4`).
pub fn req_tres(r: &AcctRecord) -> String {
    let q = &r.request;
    let mut parts = Vec::new();
    if let Some(n) = q.leaves {
        parts.push(format!("cpu={}", n * q.cores_per_leaf));
    }
    if let Some(m) = q.mem_bytes {
        parts.push(format!("mem={}", crate::units::format_size(m)));
    }
    parts.push("node=1".into());
    if let Some(n) = q.leaves {
        parts.push(format!("gres/leaf={n}"));
    }
    if let Some(g) = q.gpus {
        parts.push(format!("gres/gpu={g}"));
    }
    parts.join(",")
}

/// What the job held, as TRES (`cpu=8,mem=20G,node=1,gres/leaf=4,gres/gpu=0.571`); empty
/// when it never started.
pub fn alloc_tres(r: &AcctRecord) -> String {
    if r.leaves.is_empty() {
        return String::new();
    }
    format!(
        "cpu={},mem={},node=1,gres/leaf={},gres/gpu={}",
        r.cores.len(),
        crate::units::format_size(usage::memory_bytes(r) as u64),
        decimal(usage::leaves(r), 3),
        decimal(usage::gpu_equivalents(r), 3)
    )
}

macro_rules! field {
    ($name:literal, $width:literal, $help:literal, $f:expr) => {
        Field {
            name: $name,
            width: $width,
            help: $help,
            value: $f,
        }
    };
}

/// Every field, in --helpformat's order.
pub static FIELDS: &[Field] = &[
    field!("JobID", 12, "job id", |r, _| r.id.to_string()),
    field!("JobName", 10, "job name", |r, _| r.name.clone()),
    field!("User", 9, "user name", |r, _| r.user.clone()),
    field!("UID", 6, "user id", |r, _| r.uid.to_string()),
    field!("GID", 6, "group id of the submission", |r, _| r
        .gid
        .to_string()),
    field!(
        "Account",
        10,
        "account (--account, else the user's primary group)",
        |r, _| r.account.clone()
    ),
    field!(
        "State",
        10,
        "PENDING RUNNING COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL",
        |r, _| r.state.name().to_string()
    ),
    field!("ExitCode", 8, "exit code:signal", |r, _| format!(
        "{}:{}",
        r.exit_code.unwrap_or(0),
        r.signal.unwrap_or(0)
    )),
    field!("Reason", 20, "why it failed or was not run", |r, _| r
        .reason
        .clone()
        .unwrap_or_else(|| "None".into())),
    field!("Submit", 19, "submit time", |r, c| time(
        Some(r.submit_time),
        c
    )),
    field!("Eligible", 19, "time it could first start", |r, c| time(
        Some(r.eligible_time),
        c
    )),
    field!("Start", 19, "start time", |r, c| time(r.start_time, c)),
    field!("End", 19, "end time", |r, c| time(r.end_time, c)),
    field!("Elapsed", 10, "run time [D-]HH:MM:SS", |r, c| {
        when::format_elapsed(usage::elapsed(r, c.now))
    }),
    field!("ElapsedRaw", 10, "run time in seconds", |r, c| {
        usage::elapsed(r, c.now).to_string()
    }),
    field!("Timelimit", 10, "time limit [D-]HH:MM:SS", |r, _| {
        when::format_elapsed(r.request.time_limit_s)
    }),
    field!("TimelimitRaw", 12, "time limit in seconds", |r, _| r
        .request
        .time_limit_s
        .to_string()),
    field!("Reserved", 10, "wait from eligible to start", |r, c| {
        when::format_elapsed(usage::wait(r, c.now))
    }),
    field!("Wait", 10, "same as Reserved", |r, c| when::format_elapsed(
        usage::wait(r, c.now)
    )),
    field!("WaitRaw", 10, "wait in seconds", |r, c| usage::wait(
        r, c.now
    )
    .to_string()),
    field!("ReqTRES", 30, "requested resources", |r, _| req_tres(r)),
    field!("AllocTRES", 40, "held resources", |r, _| alloc_tres(r)),
    field!("ReqLeaves", 9, "leaves requested", |r, _| r
        .request
        .leaves
        .map_or_else(String::new, |n| n.to_string())),
    field!("ReqGPUs", 7, "GPU fraction requested", |r, _| r
        .request
        .gpus
        .map_or_else(String::new, |g| g.to_string())),
    field!("ReqMem", 8, "GPU memory requested", |r, _| r
        .request
        .mem_bytes
        .map_or_else(String::new, crate::units::format_size)),
    field!("CPUsPerLeaf", 11, "cores requested per leaf", |r, _| r
        .request
        .cores_per_leaf
        .to_string()),
    field!(
        "NLeaves",
        8,
        "leaves held (a share of a whole GPU counts its fraction)",
        |r, _| { decimal(usage::leaves(r), 3) }
    ),
    field!("NCPUS", 6, "cores held", |r, _| r.cores.len().to_string()),
    field!("NodeList", 15, "host", |r, _| r
        .host
        .clone()
        .unwrap_or_else(|| "None assigned".into())),
    field!(
        "AllocLeaves",
        40,
        "UUIDs of the leaves held, in rank order",
        |r, _| list(&r.leaves, |l| l.uuid.clone())
    ),
    field!("Profiles", 20, "profile of each leaf held", |r, _| list(
        &r.leaves,
        |l| l.profile.clone()
    )),
    field!("GPUs", 10, "GPU of each leaf held", |r, _| list(
        &r.leaves,
        |l| l.gpu.to_string()
    )),
    field!("CPUs", 15, "cores held (a CPU list)", |r, _| {
        format_cpu_list(&r.cores)
    }),
];

/// One column of the output.
#[derive(Debug)]
pub struct Column {
    pub field: &'static Field,
    pub width: usize,
    pub left: bool,
}

/// Parse --format (`JobID,User%20,JobName%-30`); names are case-insensitive.
pub fn parse_format(spec: &str) -> Result<Vec<Column>, Error> {
    let mut cols = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, Some(w)),
            None => (item, None),
        };
        let field = FIELDS
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::Input(format!(
                    "unknown field {name:?} in --format; valid fields: {}",
                    list(FIELDS, |f| f.name.to_string())
                ))
            })?;
        let (width, left) = match width {
            None => (field.width, false),
            Some(w) => {
                let left = w.starts_with('-');
                let n = w
                    .trim_start_matches('-')
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0);
                let n = n.ok_or_else(|| {
                    Error::Input(format!(
                        "invalid width {w:?} of field {name} in --format: expected a number \
                         of at least 1"
                    ))
                })?;
                (n, left)
            }
        };
        cols.push(Column { field, width, left });
    }
    if cols.is_empty() {
        return Err(Error::Input("--format names no field".into()));
    }
    Ok(cols)
}

/// Fit a value into a column as sacct does: padded, or cut with a `+` at the end.
fn fit(v: &str, width: usize, left: bool) -> String {
    let n = v.chars().count();
    if n > width {
        let mut s: String = v.chars().take(width.saturating_sub(1)).collect();
        s.push('+');
        s
    } else if left {
        format!("{v:<width$}")
    } else {
        format!("{v:>width$}")
    }
}

/// How to print the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    Columns,
    Parsable(String),
    Csv,
}

/// The rows in `style`.
pub fn render(
    cols: &[Column],
    recs: &[AcctRecord],
    ctx: &Ctx,
    style: &Style,
    header: bool,
) -> Result<String, Error> {
    let rows: Vec<Vec<String>> = recs
        .iter()
        .map(|r| cols.iter().map(|c| (c.field.value)(r, ctx)).collect())
        .collect();
    let names = cols.iter().map(|c| c.field.name.to_string());
    match style {
        Style::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            let fail = |e: csv::Error| Error::Input(format!("cannot write CSV: {e}"));
            if header {
                w.write_record(names).map_err(fail)?;
            }
            for r in &rows {
                w.write_record(r).map_err(fail)?;
            }
            let bytes = w
                .into_inner()
                .map_err(|e| Error::Input(format!("cannot write CSV: {e}")))?;
            Ok(String::from_utf8(bytes).expect("the fields are UTF-8"))
        }
        Style::Parsable(d) => {
            let mut out = String::new();
            let mut line = |cells: Vec<String>| {
                out.push_str(&cells.join(d));
                out.push('\n');
            };
            if header {
                line(names.collect());
            }
            rows.into_iter().for_each(line);
            Ok(out)
        }
        Style::Columns => {
            let mut out = String::new();
            let mut line = |cells: Vec<String>| {
                let cells: Vec<String> = cells
                    .iter()
                    .zip(cols)
                    .map(|(v, c)| fit(v, c.width, c.left))
                    .collect();
                out.push_str(cells.join(" ").trim_end());
                out.push('\n');
            };
            if header {
                line(names.collect());
                line(cols.iter().map(|c| "-".repeat(c.width)).collect());
            }
            rows.into_iter().for_each(line);
            Ok(out)
        }
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
            j.trim()
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
pub fn fetch(q: AcctQuery, client: &str) -> Result<crate::proto::AcctReply, Error> {
    fetch_from(&mut Client::connect(client)?, q)
}

/// Ask for every page of records on one connection.
pub fn fetch_from(c: &mut Client, mut q: AcctQuery) -> Result<crate::proto::AcctReply, Error> {
    let mut all: Option<crate::proto::AcctReply> = None;
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
    let w = |e: std::io::Error| Error::Input(format!("cannot write the output: {e}"));
    if a.helpformat {
        for f in FIELDS {
            writeln!(out, "{:<13}{}", f.name, f.help).map_err(w)?;
        }
        return Ok(exit::OK);
    }
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
    let q = AcctQuery {
        start,
        end,
        users: a.users.iter().filter(|u| !u.is_empty()).cloned().collect(),
        accounts: a
            .accounts
            .iter()
            .filter(|u| !u.is_empty())
            .cloned()
            .collect(),
        states: parse_states(&a.states)?,
        jobs: parse_jobs(&a.jobs)?,
        after: None,
    };
    let reply = fetch(q, "flexacct")?;
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
    let text = render(&cols, &reply.jobs, &ctx, &style, !a.noheader)?;
    out.write_all(text.as_bytes()).map_err(w)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::AcctLeaf;
    use crate::usage::tests::record;

    fn ctx() -> Ctx {
        Ctx {
            now: 20_000,
            tz: TimeZone::UTC,
        }
    }

    fn rec() -> AcctRecord {
        let mut r = record(
            Some(3700),
            Some(3700 + 90_061),
            (0..2)
                .map(|i| AcctLeaf {
                    uuid: format!("MIG-{i}"),
                    profile: "1g.5gb".into(),
                    gpu: i,
                    share: 1000,
                    sm_slices: 1,
                    memory_bytes: Some(5 << 30),
                })
                .collect(),
        );
        r.state = JobState::Failed;
        r.exit_code = Some(3);
        r
    }

    #[test]
    fn fields_say_what_happened() {
        let cols = parse_format(
            "jobid,State,ExitCode,Submit,Start,End,Elapsed,Reserved,AllocTRES,ReqTRES,\
             AllocLeaves,Profiles,GPUs,CPUs,NodeList,Timelimit",
        )
        .unwrap();
        let out = render(&cols, &[rec()], &ctx(), &Style::Parsable("|".into()), true).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "JobID|State|ExitCode|Submit|Start|End|Elapsed|Reserved|AllocTRES|ReqTRES|\
             AllocLeaves|Profiles|GPUs|CPUs|NodeList|Timelimit"
        );
        assert_eq!(
            lines[1],
            "1|FAILED|3:0|1970-01-01T00:01:40|1970-01-01T01:01:40|1970-01-02T02:02:41|\
             1-01:01:01|01:00:00|cpu=4,mem=10G,node=1,gres/leaf=2,gres/gpu=0.286|\
             cpu=2,node=1,gres/leaf=2|MIG-0,MIG-1|1g.5gb,1g.5gb|0,1|0-3|h|01:00:00"
        );
        let pending = record(None, None, vec![]);
        let out = render(
            &cols,
            &[pending],
            &ctx(),
            &Style::Parsable(";".into()),
            false,
        )
        .unwrap();
        assert_eq!(
            out,
            "1;PENDING;0:0;1970-01-01T00:01:40;Unknown;Unknown;00:00:00;05:31:40;;\
             cpu=2,node=1,gres/leaf=2;;;;;None assigned;01:00:00\n"
        );
    }

    #[test]
    fn columns_are_padded_and_cut_like_sacct() {
        let cols = parse_format("JobID%4,JobName%-6,State%5").unwrap();
        let mut r = rec();
        r.name = "a-long-name".into();
        let out = render(&cols, &[r], &ctx(), &Style::Columns, true).unwrap();
        // Headers are cut too, as sacct cuts them.
        assert_eq!(
            out,
            "Job+ JobNa+ State\n---- ------ -----\n   1 a-lon+ FAIL+\n"
        );
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let cols = parse_format("JobID,JobName,AllocLeaves").unwrap();
        let mut r = rec();
        r.name = "say \"hi\", twice".into();
        let out = render(&cols, &[r], &ctx(), &Style::Csv, true).unwrap();
        let mut rd = csv::Reader::from_reader(out.as_bytes());
        let headers = rd.headers().unwrap().clone();
        assert_eq!(
            headers.iter().collect::<Vec<_>>(),
            ["JobID", "JobName", "AllocLeaves"]
        );
        let row = rd.records().next().unwrap().unwrap();
        assert_eq!(&row[1], "say \"hi\", twice");
        assert_eq!(&row[2], "MIG-0,MIG-1");
    }

    #[test]
    fn bad_formats_list_the_valid_fields() {
        let e = parse_format("JobID,Bogus").unwrap_err().to_string();
        assert!(e.contains("\"Bogus\"") && e.contains("AllocTRES"), "{e}");
        let e = parse_format("JobID%x").unwrap_err().to_string();
        assert!(e.contains("\"x\""), "{e}");
        assert!(parse_format(" , ").is_err());
        assert!(parse_format(DEFAULT_FORMAT).is_ok());
    }

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
        use crate::proto::{self, AcctReply, Hello};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _: Hello = proto::read_frame(&mut s, 1 << 20).unwrap();
            proto::write_frame(
                &mut s,
                &Response::Hello {
                    version: proto::PROTOCOL_VERSION,
                    server: "flexd".into(),
                },
            )
            .unwrap();
            let mut afters = Vec::new();
            for (ids, more) in [(vec![1, 2], true), (vec![5], false)] {
                let q = match proto::read_frame::<Request>(&mut s, 1 << 20).unwrap() {
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
                proto::write_frame(&mut s, &Response::Accounting(page)).unwrap();
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
