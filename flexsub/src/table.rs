//! Text for people: flexq's job table and leaf map, and flexsub's `--test-only` and
//! `--estimate-only` reports. Pure functions of the protocol's views and the current time.

use crate::proto::{AllocView, HostLeaves, JobState, JobView, WouldStart};
use crate::units::{format_duration, format_size};
use gres_plugin::topology::format_cpu_list;
use gres_plugin::Request;
use prettytable::{format::FormatBuilder, Row, Table};
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

/// A timestamp (seconds since the epoch) as `2026-04-01T12:00:00Z`.
pub fn fmt_time(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// squeue-style columns: no borders, two spaces between columns, no trailing blanks.
fn render(mut t: Table, header: Option<Row>) -> String {
    t.set_format(FormatBuilder::new().padding(0, 2).build());
    if let Some(h) = header {
        t.set_titles(h);
    }
    let mut out = String::new();
    for line in t.to_string().lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Thousandths as a short decimal (`0.25`, `1`).
fn thousandths(v: u32) -> String {
    let s = format!("{:.3}", v as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What a job holds (when running) or asks for (when pending).
fn leaves_cell(j: &JobView) -> String {
    match &j.alloc {
        Some(a) if a.leaves.iter().all(|l| l.share >= 1000) => a.leaves.len().to_string(),
        Some(a) => format!("{}gpu", thousandths(a.leaves.iter().map(|l| l.share).sum())),
        None => request_summary(&j.request),
    }
}

/// A request in a few characters: `4`, `gpu=0.5`, `mem=16G`, joined by commas.
pub fn request_summary(r: &Request) -> String {
    let mut parts = Vec::new();
    if let Some(n) = r.leaves {
        parts.push(n.to_string());
    }
    if let Some(f) = r.gpus {
        parts.push(format!("gpu={f}"));
    }
    if let Some(m) = r.mem_bytes {
        parts.push(format!("mem={}", format_size(m)));
    }
    parts.join(",")
}

fn elapsed(j: &JobView, now: u64) -> u64 {
    match (j.start_time, j.end_time) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        (Some(s), None) => now.saturating_sub(s),
        _ => 0,
    }
}

/// flexq's table.
pub fn queue(jobs: &[JobView], now: u64, header: bool) -> String {
    let mut t = Table::new();
    for j in jobs {
        let start = match (j.state, j.start_time, j.estimated_start) {
            (JobState::Pending, _, Some(e)) => fmt_time(e),
            (JobState::Pending, _, None) => "N/A".to_string(),
            (_, Some(s), _) => fmt_time(s),
            _ => "N/A".to_string(),
        };
        let where_ = match (j.state, &j.alloc) {
            (JobState::Pending, _) => format!("({})", j.reason.as_deref().unwrap_or("None")),
            (_, Some(a)) => a.host.clone(),
            (_, None) => j
                .reason
                .as_ref()
                .map_or_else(String::new, |r| format!("({r})")),
        };
        t.add_row(Row::from(vec![
            j.id.to_string(),
            j.name.clone(),
            j.user.clone(),
            j.state.code().to_string(),
            format_duration(elapsed(j, now)),
            format_duration(j.request.time_limit_s),
            leaves_cell(j),
            start,
            where_,
        ]));
    }
    let h = [
        "JOBID",
        "NAME",
        "USER",
        "ST",
        "TIME",
        "TIME_LIMIT",
        "LEAVES",
        "START",
        "NODELIST(REASON)",
    ];
    render(t, header.then(|| Row::from(h.to_vec())))
}

/// flexq --leaves: every leaf, its GPU, profile, free share and holders.
pub fn leaf_map(hosts: &[HostLeaves], header: bool) -> String {
    let mut t = Table::new();
    for h in hosts {
        for l in &h.leaves {
            let jobs: Vec<String> = l.jobs.iter().map(|j| j.to_string()).collect();
            t.add_row(Row::from(vec![
                h.host.clone(),
                l.gpu.to_string(),
                l.gpu_name.clone(),
                l.numa_node.to_string(),
                l.profile.clone(),
                l.uuid.clone(),
                format!("{}%", thousandths(l.free * 100)),
                if jobs.is_empty() {
                    "-".into()
                } else {
                    jobs.join(",")
                },
            ]));
        }
    }
    let h = [
        "HOST", "GPU", "GPU_NAME", "NUMA", "PROFILE", "UUID", "FREE", "JOBS",
    ];
    render(t, header.then(|| Row::from(h.to_vec())))
}

/// One row per allocated unit, in rank order, with that rank's cores.
fn alloc_rows(a: &AllocView) -> String {
    let per = a.cores.len().checked_div(a.leaves.len()).unwrap_or(0);
    let mut t = Table::new();
    for (r, l) in a.leaves.iter().enumerate() {
        let cores = a.cores.get(r * per..(r + 1) * per).unwrap_or(&[]);
        t.add_row(Row::from(vec![
            r.to_string(),
            l.gpu.to_string(),
            l.profile.clone(),
            thousandths(l.share),
            l.uuid.clone(),
            format_cpu_list(cores),
        ]));
    }
    let h = ["RANK", "GPU", "PROFILE", "SHARE", "UUID", "CORES"];
    render(t, Some(Row::from(h.to_vec())))
}

fn gpus_of(a: &AllocView) -> String {
    let mut g: Vec<u32> = a.leaves.iter().map(|l| l.gpu).collect();
    g.sort_unstable();
    g.dedup();
    g.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn when(ws: &WouldStart, now: u64) -> String {
    let reason = ws.reason.as_deref().unwrap_or("Resources");
    match ws.estimated_start {
        Some(t) if t > now => format!(
            "at {} (in {}), waiting for {reason}",
            fmt_time(t),
            format_duration(t - now)
        ),
        Some(_) => format!("soon, waiting for {reason}"),
        None => format!("at an unknown time, waiting for {reason}"),
    }
}

/// flexsub --test-only.
pub fn would_start(ws: &WouldStart, now: u64) -> String {
    let mut out = String::new();
    match &ws.alloc {
        Some(a) => {
            let _ = writeln!(
                out,
                "flexsub: job would start now on {} using {} leaves on GPUs {}, cores {}",
                a.host,
                a.leaves.len(),
                gpus_of(a),
                format_cpu_list(&a.cores)
            );
            out.push_str(&alloc_rows(a));
        }
        None => {
            let _ = writeln!(out, "flexsub: job would start {}", when(ws, now));
        }
    }
    out
}

/// The host part of flexsub --estimate-only.
pub fn estimate_fit(ws: &WouldStart, now: u64) -> String {
    let mut out = String::new();
    match &ws.alloc {
        Some(a) if a.leaves.iter().all(|l| l.share >= 1000) => {
            let mut profiles: Vec<&str> = a.leaves.iter().map(|l| l.profile.as_str()).collect();
            profiles.sort_unstable();
            profiles.dedup();
            let _ = writeln!(
                out,
                "on {}: needs {} leaves ({}) on GPUs {}",
                a.host,
                a.leaves.len(),
                profiles.join(", "),
                gpus_of(a)
            );
        }
        Some(a) => {
            let share: u32 = a.leaves.iter().map(|l| l.share).sum();
            let _ = writeln!(
                out,
                "on {}: needs a {} share of GPU {}",
                a.host,
                thousandths(share),
                gpus_of(a)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "on this host: the job would start {}; its leaves are chosen when it starts",
                when(ws, now)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::LeafView;
    use gres_plugin::JobId;

    fn job(id: u64, state: JobState) -> JobView {
        JobView {
            id: JobId(id),
            name: "train".into(),
            user: "ann".into(),
            uid: 1000,
            account: "".into(),
            state,
            submit_time: 100,
            start_time: None,
            end_time: None,
            request: Request::leaves(4, 3600),
            alloc: None,
            reason: None,
            estimated_start: None,
            exit_code: None,
            signal: None,
        }
    }

    fn alloc() -> AllocView {
        AllocView {
            host: "a100".into(),
            leaves: (0..2)
                .map(|i| LeafView {
                    uuid: format!("MIG-{i}"),
                    profile: "1g.5gb".into(),
                    gpu: i,
                    share: 1000,
                })
                .collect(),
            cores: vec![0, 16],
        }
    }

    #[test]
    fn queue_rows() {
        let mut r = job(7, JobState::Running);
        r.start_time = Some(100);
        r.alloc = Some(alloc());
        let mut p = job(8, JobState::Pending);
        p.reason = Some("Resources".into());
        p.estimated_start = Some(3700);
        let text = queue(&[r, p], 165, true);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("JOBID  NAME"), "{text}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "7",
                "train",
                "ann",
                "R",
                "1:05",
                "1:00:00",
                "2",
                "1970-01-01T00:01:40Z",
                "a100"
            ]
        );
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(cells[6..], ["4", "1970-01-01T01:01:40Z", "(Resources)"]);
        assert_eq!(queue(&[], 0, false), "");
    }

    #[test]
    fn test_only_reports_ranks_and_cores() {
        let ws = WouldStart {
            alloc: Some(alloc()),
            estimated_start: Some(5),
            reason: None,
        };
        let text = would_start(&ws, 5);
        assert!(
            text.contains("now on a100 using 2 leaves on GPUs 0,1, cores 0,16"),
            "{text}"
        );
        assert!(text.contains("MIG-1"), "{text}");
        let waits = WouldStart {
            alloc: None,
            estimated_start: Some(65),
            reason: Some("Resources".into()),
        };
        assert!(would_start(&waits, 5).contains("(in 1:00), waiting for Resources"));
        assert!(estimate_fit(&ws, 5).contains("needs 2 leaves (1g.5gb) on GPUs 0,1"));
    }
}
