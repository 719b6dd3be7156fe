//! flexreport: usage over a period (like sreport), for people and for cron: per user and per
//! account in leaf-, GPU-equivalent-, memory- and core-hours, job counts by state, waits, and
//! host utilization. Computed from the same records as flexacct ([`crate::usage`]), with each
//! job's run clipped to the period.

use crate::commands::acct::{decimal, fetch, period, Selection};
use crate::error::{exit, Error};
use crate::usage::{self, Usage};
use crate::when;
use clap::{Parser, ValueEnum};
use flex_proto::{AcctRecord, AcctReply, JobState};
use prettytable::{format::FormatBuilder, Row, Table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

/// Report usage over a period (like sreport): per user, per account, by state, and host
/// utilization.
///
/// Usage counts only the part of each job's run inside the period, in leaf-hours (a share of
/// a whole GPU counts its fraction), GPU-equivalent hours (SM slices / 7 of each leaf: a whole
/// GPU is 1, a 3g leaf 3/7), GiB-hours of the GPU memory held and core-hours. Jobs are those
/// whose time between eligible and end overlaps the period; waits are those of the jobs that
/// started in it. Utilization is busy leaf-time over (leaves x period). Users other than root
/// see, and are counted over, only their own jobs.
///
/// Times take the forms of flexacct (2026-11-21, 2026-11-21T10:00, 10:00, now-1day, today,
/// yesterday, ...). For cron: `flexreport all -S yesterday -E today --csv` (etc/flex.crontab).
///
/// Exit codes: 0 success, 1 bad period or option value, 2 usage error, 3 flexd unreachable,
/// 4 permission denied, 5 protocol version mismatch, 6 flexd internal error.
#[derive(Debug, Parser)]
#[command(name = "flexreport", version)]
pub struct Args {
    /// Which report.
    #[arg(value_enum, default_value_t = Kind::All)]
    pub report: Kind,
    /// Start of the period.
    #[arg(
        short = 'S',
        long = "starttime",
        value_name = "TIME",
        default_value = "yesterday"
    )]
    pub start: String,
    /// End of the period.
    #[arg(
        short = 'E',
        long = "endtime",
        value_name = "TIME",
        default_value = "today"
    )]
    pub end: String,
    #[command(flatten)]
    pub select: Selection,
    /// Print CSV (RFC 4180): one header, one row per line of every report asked.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Leave out the headers (tables and CSV).
    #[arg(short = 'n', long = "noheader")]
    pub noheader: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Usage per user.
    Users,
    /// Usage per account.
    Accounts,
    /// Job counts and usage by state.
    States,
    /// Busy leaf-time over capacity, per host.
    Utilization,
    /// Every report.
    All,
}

/// One user's, account's or state's line.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Line {
    pub name: String,
    pub jobs: u64,
    #[serde(flatten)]
    pub usage: Usage,
    /// Over the jobs that started in the period; None when none did.
    pub avg_wait_s: Option<f64>,
    pub p95_wait_s: Option<u64>,
}

/// One host's utilization.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostLine {
    pub host: String,
    pub leaves: u32,
    pub capacity_leaf_hours: f64,
    pub busy_leaf_hours: f64,
    /// busy / capacity, 0 to 1.
    pub utilization: f64,
}

/// Every report over one period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub start: u64,
    pub end: u64,
    pub users: Vec<Line>,
    pub accounts: Vec<Line>,
    pub states: Vec<Line>,
    pub utilization: Vec<HostLine>,
    pub total: Line,
}

/// The jobs' lines grouped by `key`, in key order.
fn lines(
    jobs: &[AcctRecord],
    s: u64,
    e: u64,
    now: u64,
    key: impl Fn(&AcctRecord) -> String,
) -> Vec<Line> {
    let mut groups: BTreeMap<String, Vec<&AcctRecord>> = BTreeMap::new();
    for j in jobs {
        groups.entry(key(j)).or_default().push(j);
    }
    groups
        .into_iter()
        .map(|(name, js)| line(name, &js, s, e, now))
        .collect()
}

fn line(name: String, jobs: &[&AcctRecord], s: u64, e: u64, now: u64) -> Line {
    let mut usage = Usage::default();
    for j in jobs {
        usage.add(&Usage::of(j, s, e, now));
    }
    let mut waits: Vec<u64> = jobs
        .iter()
        .filter(|j| j.start_time.is_some_and(|t| t >= s && t < e))
        .map(|j| usage::wait(j, now))
        .collect();
    waits.sort_unstable();
    Line {
        name,
        jobs: jobs.len() as u64,
        usage,
        avg_wait_s: (!waits.is_empty())
            .then(|| waits.iter().sum::<u64>() as f64 / waits.len() as f64),
        p95_wait_s: p95(&waits),
    }
}

/// The 95th percentile by the nearest-rank method (`sorted` ascending).
pub fn p95(sorted: &[u64]) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (0.95 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Build every report over [`s`, `e`) from flexd's reply.
pub fn build(reply: &AcctReply, s: u64, e: u64) -> Report {
    let now = reply.now;
    let jobs = &reply.jobs;
    let hours = (e - s) as f64 / 3600.0;
    let utilization = reply
        .hosts
        .iter()
        .map(|h| {
            let busy: f64 = jobs
                .iter()
                .filter(|j| j.host.as_deref() == Some(h.host.as_str()))
                .map(|j| Usage::of(j, s, e, now).leaf_hours)
                .sum();
            let capacity = h.leaves as f64 * hours;
            HostLine {
                host: h.host.clone(),
                leaves: h.leaves,
                capacity_leaf_hours: capacity,
                busy_leaf_hours: busy,
                utilization: if capacity > 0.0 { busy / capacity } else { 0.0 },
            }
        })
        .collect();
    let mut states = lines(jobs, s, e, now, |j| j.state.name().to_string());
    states.sort_by_key(|l| JobState::parse(&l.name));
    let all: Vec<&AcctRecord> = jobs.iter().collect();
    Report {
        start: s,
        end: e,
        users: lines(jobs, s, e, now, |j| j.user.clone()),
        accounts: lines(jobs, s, e, now, |j| j.account.clone()),
        states,
        utilization,
        total: line("TOTAL".into(), &all, s, e, now),
    }
}

const CSV_HEADER: [&str; 18] = [
    "period_start",
    "period_end",
    "report",
    "name",
    "jobs",
    "leaf_hours",
    "gpu_hours",
    "mem_gib_hours",
    "core_hours",
    "avg_wait_s",
    "p95_wait_s",
    "leaves",
    "capacity_leaf_hours",
    "utilization",
    "gpu_sampled_leaf_hours",
    "gpu_busy_leaf_hours",
    "gpu_energy_kwh",
    "gpu_simulated",
];

fn num(v: f64) -> String {
    decimal(v, 6)
}

fn usage_cells(l: &Line) -> Vec<String> {
    vec![
        l.jobs.to_string(),
        num(l.usage.leaf_hours),
        num(l.usage.gpu_hours),
        num(l.usage.mem_gib_hours),
        num(l.usage.core_hours),
        l.avg_wait_s.map_or_else(String::new, |w| decimal(w, 1)),
        l.p95_wait_s.map_or_else(String::new, |w| w.to_string()),
    ]
}

/// The sections `kind` asks for, in order.
fn sections(kind: Kind) -> [bool; 4] {
    let all = kind == Kind::All;
    [
        all || kind == Kind::Users,
        all || kind == Kind::Accounts,
        all || kind == Kind::States,
        all || kind == Kind::Utilization,
    ]
}

/// CSV: one header, then `report,name,...` rows (users, accounts, the total, states, hosts).
pub fn csv(r: &Report, kind: Kind, tz: &jiff::tz::TimeZone, header: bool) -> Result<String, Error> {
    let fail = |e: csv::Error| Error::Input(format!("cannot write CSV: {e}"));
    let mut w = csv::Writer::from_writer(Vec::new());
    if header {
        w.write_record(CSV_HEADER).map_err(fail)?;
    }
    let period = [when::format(r.start, tz), when::format(r.end, tz)];
    let [users, accounts, states, util] = sections(kind);
    let mut usage_rows: Vec<(&str, &Line)> = Vec::new();
    if users {
        usage_rows.extend(r.users.iter().map(|l| ("user", l)));
    }
    if accounts {
        usage_rows.extend(r.accounts.iter().map(|l| ("account", l)));
    }
    if users || accounts {
        usage_rows.push(("total", &r.total));
    }
    if states {
        usage_rows.extend(r.states.iter().map(|l| ("state", l)));
    }
    for (report, l) in usage_rows {
        let mut row: Vec<String> = period.to_vec();
        row.extend([report.to_string(), l.name.clone()]);
        row.extend(usage_cells(l));
        row.extend([String::new(), String::new(), String::new()]);
        row.extend([
            num(l.usage.gpu_sampled_leaf_hours),
            num(l.usage.gpu_busy_leaf_hours),
            num(l.usage.gpu_energy_kwh),
            l.usage.gpu_simulated.to_string(),
        ]);
        w.write_record(&row).map_err(fail)?;
    }
    if util {
        for h in &r.utilization {
            let mut row: Vec<String> = period.to_vec();
            row.extend(["host".to_string(), h.host.clone(), String::new()]);
            row.extend([num(h.busy_leaf_hours)]);
            row.extend(std::iter::repeat_n(String::new(), 5));
            row.extend([
                h.leaves.to_string(),
                num(h.capacity_leaf_hours),
                num(h.utilization),
            ]);
            row.extend(std::iter::repeat_n(String::new(), 4));
            w.write_record(&row).map_err(fail)?;
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::Input(format!("cannot write CSV: {e}")))?;
    Ok(String::from_utf8(bytes).expect("the cells are UTF-8"))
}

fn table(header: &[&str], rows: Vec<Vec<String>>, with_header: bool) -> String {
    let mut t = Table::new();
    t.set_format(FormatBuilder::new().padding(0, 2).build());
    if with_header {
        t.set_titles(Row::from(header.to_vec()));
    }
    for r in rows {
        t.add_row(Row::from(r));
    }
    let mut out = String::new();
    for l in t.to_string().lines() {
        out.push_str(l.trim_end());
        out.push('\n');
    }
    out
}

/// Tables for people: one titled table per report.
pub fn text(r: &Report, kind: Kind, tz: &jiff::tz::TimeZone, header: bool) -> String {
    let period = format!(
        "{} - {}",
        when::format(r.start, tz),
        when::format(r.end, tz)
    );
    let mut out = String::new();
    let mut section = |title: &str, h: &[&str], body: Vec<Vec<String>>| {
        if !out.is_empty() {
            out.push('\n');
        }
        if header {
            out.push_str(&format!("{title}, {period}\n"));
        }
        out.push_str(&table(h, body, header));
    };
    let usage = |first| {
        let mut h = USAGE_HEADER;
        h[0] = first;
        h
    };
    let [users, accounts, states, util] = sections(kind);
    if users {
        let body = usage_rows(&r.users, Some(&r.total));
        section("Usage by user", &usage("USER"), body);
    }
    if accounts {
        let body = usage_rows(&r.accounts, Some(&r.total));
        section("Usage by account", &usage("ACCOUNT"), body);
    }
    if states {
        section(
            "Jobs by state",
            &usage("STATE"),
            usage_rows(&r.states, None),
        );
    }
    if util {
        section("Host utilization", &UTIL_HEADER, utilization_rows(r));
    }
    if (users || accounts || states) && r.total.usage.gpu_simulated {
        out.push_str("GPU-BUSY and GPU-KWH include simulated telemetry (simulated topologies).\n");
    }
    out
}

const USAGE_HEADER: [&str; 10] = [
    "",
    "JOBS",
    "LEAF-H",
    "GPU-H",
    "MEM-GIB-H",
    "CORE-H",
    "AVG-WAIT",
    "P95-WAIT",
    "GPU-BUSY",
    "GPU-KWH",
];

const UTIL_HEADER: [&str; 5] = [
    "HOST",
    "LEAVES",
    "BUSY-LEAF-H",
    "CAPACITY-LEAF-H",
    "UTILIZATION",
];

/// One usage row per line, then the total when given.
fn usage_rows(ls: &[Line], total: Option<&Line>) -> Vec<Vec<String>> {
    let wait =
        |w: Option<f64>| w.map_or_else(|| "-".into(), |w| when::format_elapsed(w.round() as u64));
    ls.iter()
        .chain(total)
        .map(|l| {
            vec![
                l.name.clone(),
                l.jobs.to_string(),
                decimal(l.usage.leaf_hours, 2),
                decimal(l.usage.gpu_hours, 2),
                decimal(l.usage.mem_gib_hours, 2),
                decimal(l.usage.core_hours, 2),
                wait(l.avg_wait_s),
                wait(l.p95_wait_s.map(|w| w as f64)),
                l.usage
                    .gpu_busy()
                    .map_or_else(|| "-".into(), |b| format!("{}%", decimal(b * 100.0, 2))),
                decimal(l.usage.gpu_energy_kwh, 3),
            ]
        })
        .collect()
}

fn utilization_rows(r: &Report) -> Vec<Vec<String>> {
    r.utilization
        .iter()
        .map(|h| {
            vec![
                h.host.clone(),
                h.leaves.to_string(),
                decimal(h.busy_leaf_hours, 2),
                decimal(h.capacity_leaf_hours, 2),
                format!("{}%", decimal(h.utilization * 100.0, 2)),
            ]
        })
        .collect()
}

/// Run flexreport; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let now = when::local_now();
    let (s, e) = period(Some(&a.start), Some(&a.end), "", "", &now)?;
    if e == s {
        return Err(Error::Input(format!(
            "invalid period: it starts and ends at {}",
            when::format(s, now.time_zone())
        )));
    }
    let q = a.select.query(s, e, Vec::new())?;
    let reply = fetch(q, "flexreport")?;
    let report = build(&reply, s, e);
    let tz = now.time_zone();
    let text = if a.json {
        serde_json::to_string_pretty(&report).expect("reports serialize") + "\n"
    } else if a.csv {
        csv(&report, a.report, tz, !a.noheader)?
    } else {
        text(&report, a.report, tz, !a.noheader)
    };
    out.write_all(text.as_bytes()).map_err(Error::output)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::tests::record;
    use flex_proto::{AcctHost, AcctLeaf};

    fn leaf(share: u32, sm: u32) -> AcctLeaf {
        AcctLeaf {
            uuid: "MIG-x".into(),
            profile: "1g.5gb".into(),
            gpu: 0,
            share,
            sm_slices: sm,
            memory_bytes: Some(1 << 30),
        }
    }

    fn reply() -> AcctReply {
        // ana: 2 leaves 3600..10800 (wait 3500); bo: 1 leaf 7200..now=14400 (running).
        let mut a = record(Some(3600), Some(10_800), vec![leaf(1000, 1), leaf(1000, 1)]);
        a.account = "phys".into();
        let mut b = record(Some(7200), None, vec![leaf(1000, 7)]);
        b.user = "bo".into();
        b.account = "chem".into();
        let mut c = record(None, None, vec![]);
        c.user = "bo".into();
        c.account = "chem".into();
        AcctReply {
            now: 14_400,
            hosts: vec![AcctHost {
                host: "h".into(),
                gpus: 2,
                leaves: 14,
                cores: 32,
            }],
            jobs: vec![a, b, c],
            more: false,
        }
    }

    #[test]
    fn usage_is_clipped_and_summed() {
        // Period [7200, 14400): ana's last hour, bo's two hours.
        let r = build(&reply(), 7200, 14_400);
        let names: Vec<&str> = r.users.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["ana", "bo"]);
        assert!((r.users[0].usage.leaf_hours - 2.0).abs() < 1e-9);
        assert!((r.users[1].usage.leaf_hours - 2.0).abs() < 1e-9);
        assert!((r.users[1].usage.gpu_hours - 2.0).abs() < 1e-9);
        assert!((r.total.usage.leaf_hours - 4.0).abs() < 1e-9);
        assert!((r.total.usage.core_hours - 12.0).abs() < 1e-9);
        assert_eq!(r.users[1].jobs, 2);
        // Only bo's running job started in the period.
        assert_eq!(r.total.avg_wait_s, Some(7100.0));
        assert_eq!(r.users[0].avg_wait_s, None);
        let states: Vec<(&str, u64)> = r.states.iter().map(|l| (l.name.as_str(), l.jobs)).collect();
        assert_eq!(states, [("PENDING", 1), ("RUNNING", 1), ("COMPLETED", 1)]);
        let u = &r.utilization[0];
        assert!((u.capacity_leaf_hours - 28.0).abs() < 1e-9);
        assert!((u.utilization - 4.0 / 28.0).abs() < 1e-9);
    }

    #[test]
    fn p95_is_nearest_rank() {
        assert_eq!(p95(&[]), None);
        assert_eq!(p95(&[5]), Some(5));
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(p95(&v), Some(19));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(p95(&v), Some(95));
    }

    #[test]
    fn csv_has_one_header_and_a_row_per_line() {
        let r = build(&reply(), 7200, 14_400);
        let text = csv(&r, Kind::All, &jiff::tz::TimeZone::UTC, true).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(rd.headers().unwrap().len(), CSV_HEADER.len());
        let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        let kinds: Vec<&str> = rows.iter().map(|r| &r[2]).collect();
        assert_eq!(
            kinds,
            ["user", "user", "account", "account", "total", "state", "state", "state", "host"]
        );
        assert_eq!(&rows[0][0], "1970-01-01T02:00:00");
        assert_eq!(&rows[4][5], "4");
        assert_eq!(&rows[8][13], decimal(4.0 / 28.0, 6));
        let only = csv(&r, Kind::Utilization, &jiff::tz::TimeZone::UTC, false).unwrap();
        assert_eq!(only.lines().count(), 1);
    }

    #[test]
    fn tables_have_titles_and_totals() {
        let r = build(&reply(), 7200, 14_400);
        let t = text(&r, Kind::All, &jiff::tz::TimeZone::UTC, true);
        assert!(
            t.contains("Usage by user, 1970-01-01T02:00:00 - 1970-01-01T04:00:00"),
            "{t}"
        );
        assert!(t.lines().any(|l| l.starts_with("TOTAL")), "{t}");
        assert!(t.contains("Host utilization"), "{t}");
        assert!(t.contains("14.29%"), "{t}");
    }

    /// ana's job ran 2 h, half of it in the period, its two leaves half a leaf busy on
    /// average, 7200 J in all: the period's share is 1 h of 2 leaves, a quarter busy, 1 Wh.
    #[test]
    fn gpu_busy_and_energy_count_the_part_of_each_run_in_the_period() {
        let mut rep = reply();
        rep.jobs[0].gpu_usage = Some(flex_proto::GpuUsage {
            source: "nvml".into(),
            samples: 240,
            period_s: 30.0,
            mem_max_bytes: None,
            mem_ave_bytes: None,
            util_max_pct: Some(90.0),
            util_ave_pct: Some(50.0),
            energy_j: Some(7200.0),
        });
        let r = build(&rep, 7200, 14_400);
        let ana = &r.users[0].usage;
        assert_eq!(
            (ana.gpu_sampled_leaf_hours, ana.gpu_busy_leaf_hours),
            (2.0, 0.5)
        );
        assert!((ana.gpu_energy_kwh - 0.001).abs() < 1e-12, "{ana:?}");
        assert_eq!(r.users[1].usage.gpu_busy(), None);
        let t = text(&r, Kind::Users, &jiff::tz::TimeZone::UTC, true);
        let ana_row = t.lines().find(|l| l.starts_with("ana")).unwrap();
        let cells: Vec<&str> = ana_row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 2..], ["25%", "0.001"], "{t}");
        assert!(!t.contains("simulated"), "{t}");
        rep.jobs[0].gpu_usage.as_mut().unwrap().source = "simulated (s.csv)".into();
        let t = text(
            &build(&rep, 7200, 14_400),
            Kind::Users,
            &jiff::tz::TimeZone::UTC,
            true,
        );
        assert!(
            t.ends_with("include simulated telemetry (simulated topologies).\n"),
            "{t}"
        );
    }
}
