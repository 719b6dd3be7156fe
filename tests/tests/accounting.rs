//! Accounting end to end: real jobs through the real flexd (completed, failed with exit 3,
//! cancelled while running, over their time limit), then the real flexacct and flexreport
//! binaries read them back. Also the visibility rule (users see only their own jobs) and the
//! metrics endpoint in the Prometheus text format.

use flex_proto::{AcctQuery, ErrorKind, JobState, Request, Response};
use flex_tests::metrics::{http_get, parse_exposition};
use flex_tests::{bin_dir, script_job, wait_for, Daemon};
use gres_plugin::JobId;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

const A100: &str = "a100-40gb-x2.toml";
const NOBODY: u32 = 65534;

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A command in UTC, with the workspace binaries on PATH.
fn cmd(d: &Daemon, name: &str) -> Command {
    let mut c = d.cmd(name);
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("{}:{path}", bin_dir().display()))
        .env("TZ", "UTC");
    c
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Seconds since the epoch of `2026-11-21T10:00:00` read as UTC.
fn utc(s: &str) -> u64 {
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().expect(s);
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) as u64
}

/// flexacct -P rows as maps from field name to value.
fn parsable(text: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text.lines();
    let names: Vec<&str> = lines.next().expect("a header").split('|').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            assert_eq!(cells.len(), names.len(), "{l}");
            names
                .iter()
                .zip(cells)
                .map(|(n, c)| (n.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

const FIELDS: &str = "JobID,JobName,User,UID,Account,State,ExitCode,Submit,Eligible,Start,End,\
                      ElapsedRaw,Timelimit,NLeaves,NCPUS,CPUs,AllocLeaves,Profiles,GPUs,NodeList,\
                      AllocTRES,ReqTRES";

/// Run the four kinds of ending; returns (completed, failed, cancelled, timeout) and the time
/// just before the first submission.
fn four_jobs(d: &Daemon) -> ([JobId; 4], u64) {
    let w = d.scratch("acct");
    let t0 = now();
    std::fs::write(
        w.join("ok.sh"),
        "#!/bin/sh\n#FLEX --leaves 2 --cpus-per-gpu 2 -t 5:00\n#SBATCH --mem=1G\nsleep 1\n",
    )
    .unwrap();
    let out = cmd(d, "flexsub")
        .current_dir(&w)
        .args(["--parsable", "-A", "proj", "-J", "fine", "ok.sh"])
        .output()
        .unwrap();
    let completed = JobId(ok(out, "flexsub").trim().parse().unwrap());
    let mut c = d.client();
    let mut spec = script_job("#!/bin/sh\nexit 3\n", &w);
    spec.name = "three".into();
    let failed = c.submit(spec).unwrap();
    let mut spec = script_job("#!/bin/sh\nsleep 300\n", &w);
    spec.name = "stopped".into();
    let cancelled = c.submit(spec).unwrap();
    let mut spec = script_job("#!/bin/sh\nsleep 300\n", &w);
    spec.name = "late".into();
    spec.request.time_limit_s = 2;
    let timeout = c.submit(spec).unwrap();
    d.wait_state(cancelled, &[JobState::Running]);
    // Let it run a few seconds so a period can cut through its run.
    std::thread::sleep(std::time::Duration::from_secs(3));
    c.cancel(vec![cancelled], None).unwrap();
    for j in [completed, failed, cancelled, timeout] {
        d.wait_finished(j);
    }
    ([completed, failed, cancelled, timeout], t0)
}

#[test]
fn flexacct_records_what_happened_and_flexreport_sums_them() {
    let d = Daemon::start(A100);
    let ([completed, failed, cancelled, timeout], t0) = four_jobs(&d);
    let period = [
        "-S".to_string(),
        (t0 - 5).to_string(),
        "-E".into(),
        "now".into(),
    ];
    let out = cmd(&d, "flexacct")
        .args(&period)
        .args(["-P", "--format", FIELDS])
        .output()
        .unwrap();
    let rows = parsable(&ok(out, "flexacct"));
    let by_id: BTreeMap<u64, &HashMap<String, String>> = rows
        .iter()
        .map(|r| (r["JobID"].parse().unwrap(), r))
        .collect();
    assert_eq!(
        by_id.keys().copied().collect::<Vec<_>>(),
        [completed.0, failed.0, cancelled.0, timeout.0]
    );
    let group = nix::unistd::Group::from_gid(nix::unistd::getegid())
        .unwrap()
        .unwrap()
        .name;
    let want = [
        (completed, "fine", "COMPLETED", "proj"),
        (failed, "three", "FAILED", group.as_str()),
        (cancelled, "stopped", "CANCELLED", group.as_str()),
        (timeout, "late", "TIMEOUT", group.as_str()),
    ];
    let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap();
    for (job, name, state, account) in want {
        let r = by_id[&job.0];
        let view = d.job(job).expect("flexd knows the job");
        assert_eq!(
            (r["JobName"].as_str(), r["State"].as_str()),
            (name, state),
            "{r:?}"
        );
        assert_eq!(r["Account"], account, "default account: the primary group");
        assert_eq!(
            (r["User"].as_str(), r["UID"].clone()),
            (me.name.as_str(), me.uid.to_string())
        );
        // The exit code and signal flexd recorded.
        assert_eq!(
            r["ExitCode"],
            format!(
                "{}:{}",
                view.exit_code.unwrap_or(0),
                view.signal.unwrap_or(0)
            )
        );
        let t = |k: &str| utc(&r[k]);
        assert!(
            t("Submit") <= t("Eligible") && t("Eligible") <= t("Start") && t("Start") <= t("End"),
            "times out of order: {r:?}"
        );
        assert_eq!(t("Start"), view.start_time.unwrap());
        assert_eq!(t("End"), view.end_time.unwrap());
        assert_eq!(r["ElapsedRaw"], (t("End") - t("Start")).to_string());
        assert_eq!(r["NodeList"], view.alloc.as_ref().unwrap().host);
        let uuids: Vec<String> = view
            .alloc
            .as_ref()
            .unwrap()
            .leaves
            .iter()
            .map(|l| l.uuid.clone())
            .collect();
        assert_eq!(r["AllocLeaves"], uuids.join(","));
        assert!(
            r["AllocTRES"].contains(&format!("cpu={}", r["NCPUS"])),
            "{r:?}"
        );
    }
    assert_eq!(by_id[&failed.0]["ExitCode"], "3:0");
    assert_eq!(by_id[&completed.0]["ExitCode"], "0:0");
    let ok_row = by_id[&completed.0];
    assert_eq!(ok_row["NLeaves"], "2");
    assert_eq!(ok_row["NCPUS"], "4");
    assert_eq!(ok_row["ReqTRES"], "cpu=4,mem=1G,node=1,gres/leaf=2");
    assert!(
        ok_row["AllocTRES"].starts_with("cpu=4,mem=1G,node=1,gres/leaf=2,"),
        "{ok_row:?}"
    );
    assert_eq!(ok_row["Timelimit"], "00:05:00");
    assert_eq!(ok_row["Profiles"].split(',').count(), 2);

    // The same rows as CSV and JSON.
    let out = cmd(&d, "flexacct")
        .args(&period)
        .args(["--csv", "--format", FIELDS])
        .output()
        .unwrap();
    let text = ok(out, "flexacct --csv");
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(
        rd.headers().unwrap().iter().collect::<Vec<_>>().join(","),
        FIELDS
    );
    let csv_rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(csv_rows.len(), 4);
    assert_eq!(&csv_rows[0][16], ok_row["AllocLeaves"].as_str());
    let out = cmd(&d, "flexacct")
        .args(&period)
        .arg("--json")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&ok(out, "flexacct --json")).unwrap();
    let arr = json.as_array().expect("an array");
    assert_eq!(arr.len(), 4);
    assert_eq!(arr[1]["exit_code"], 3);
    assert_eq!(arr[1]["state"], "FAILED");
    assert_eq!(
        arr[0]["elapsed_s"].as_u64().unwrap().to_string(),
        ok_row["ElapsedRaw"]
    );

    // flexreport over a period that starts inside the cancelled job's run: its totals are the
    // clipped sums of flexacct's rows for the same period.
    let c_start = utc(&by_id[&cancelled.0]["Start"]);
    let (s, e) = (c_start + 1, now() + 1);
    let window = ["-S".to_string(), s.to_string(), "-E".into(), e.to_string()];
    let out = cmd(&d, "flexacct")
        .args(&window)
        .args(["-P", "--format", FIELDS])
        .output()
        .unwrap();
    let rows = parsable(&ok(out, "flexacct"));
    assert!(rows.iter().any(|r| r["JobID"] == cancelled.0.to_string()));
    let mut sum = [0f64; 3];
    for r in &rows {
        let run = utc(&r["End"])
            .min(e)
            .saturating_sub(utc(&r["Start"]).max(s)) as f64
            / 3600.0;
        let slices: f64 = r["Profiles"]
            .split(',')
            .map(|p| p.split('g').next().unwrap().parse::<f64>().unwrap())
            .sum();
        sum[0] += r["NLeaves"].parse::<f64>().unwrap() * run;
        sum[1] += slices / 7.0 * run;
        sum[2] += r["NCPUS"].parse::<f64>().unwrap() * run;
    }
    assert!(sum[0] > 0.0);
    let out = cmd(&d, "flexreport")
        .arg("all")
        .args(&window)
        .arg("--csv")
        .output()
        .unwrap();
    let text = ok(out, "flexreport --csv");
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    let head: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let report: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    let total = report
        .iter()
        .find(|r| &r[col("report")] == "total")
        .unwrap();
    let f = |r: &csv::StringRecord, c: &str| r[col(c)].parse::<f64>().unwrap();
    for (i, c) in ["leaf_hours", "gpu_hours", "core_hours"]
        .into_iter()
        .enumerate()
    {
        assert!(
            (f(total, c) - sum[i]).abs() < 1e-5,
            "{c}: flexreport {} vs flexacct rows {}\n{text}",
            f(total, c),
            sum[i]
        );
    }
    assert_eq!(f(total, "jobs") as usize, rows.len());
    let states: usize = report
        .iter()
        .filter(|r| &r[col("report")] == "state")
        .map(|r| f(r, "jobs") as usize)
        .sum();
    assert_eq!(states, rows.len());
    let host = report.iter().find(|r| &r[col("report")] == "host").unwrap();
    assert_eq!(&host[col("leaves")], "14");
    let util = f(host, "utilization");
    let expect = sum[0] / (14.0 * (e - s) as f64 / 3600.0);
    assert!((util - expect).abs() < 1e-5, "{util} vs {expect}");

    // JSON parses; tables print; a bad period is refused.
    let out = cmd(&d, "flexreport")
        .args(&window)
        .arg("--json")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&ok(out, "flexreport --json")).unwrap();
    assert!((json["total"]["leaf_hours"].as_f64().unwrap() - sum[0]).abs() < 1e-9);
    let out = cmd(&d, "flexreport")
        .arg("users")
        .args(&window)
        .output()
        .unwrap();
    assert!(ok(out, "flexreport users").contains("TOTAL"));
    for bad in [
        ["-S", "now", "-E", "yesterday"],
        ["-S", "soonish", "-E", "now"],
    ] {
        let out = cmd(&d, "flexreport").args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("flexreport: "), "{err}");
    }
}

#[test]
fn users_see_only_their_own_jobs() {
    let d = Daemon::start(A100);
    let w = d.scratch("private");
    let mine = d
        .client()
        .submit(script_job("#!/bin/sh\ntrue\n", &w))
        .unwrap();
    let theirs = match d.request_as(
        NOBODY,
        NOBODY,
        &Request::Submit(script_job("#!/bin/sh\ntrue\n", &w)),
    ) {
        Response::Submitted(flex_proto::SubmitReply { job, .. }) => job,
        other => panic!("{other:?}"),
    };
    d.wait_finished(mine);
    d.wait_finished(theirs);
    let all = AcctQuery {
        start: 0,
        end: now() + 10,
        ..AcctQuery::default()
    };
    let ids = |r: Response| match r {
        Response::Accounting(a) => a.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        ids(d.request_as(NOBODY, NOBODY, &Request::Accounting(all.clone()))),
        [theirs]
    );
    assert_eq!(
        ids(d.client().call(&Request::Accounting(all.clone())).unwrap()),
        [mine, theirs],
        "root sees everyone's"
    );
    let mut q = all.clone();
    q.users = vec!["root".into()];
    match d.request_as(NOBODY, NOBODY, &Request::Accounting(q)) {
        Response::Error(e) => assert_eq!(e.kind, ErrorKind::PermissionDenied),
        other => panic!("{other:?}"),
    }
    // The real command as that user: its own job only; asking for root's is exit code 4.
    let out = cmd(&d, "flexacct")
        .args(["-S", "0", "-P", "-n", "--format", "JobID,User"])
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert_eq!(
        ok(out, "flexacct as nobody").trim(),
        format!("{theirs}|nobody")
    );
    let out = cmd(&d, "flexacct")
        .args(["-S", "0", "-u", "root"])
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    // An unknown field is a usage error that lists the valid ones.
    let out = cmd(&d, "flexacct")
        .args(["--format", "JobID,Nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"Nope\"") && err.contains("AllocLeaves"),
        "{err}"
    );
}

#[test]
fn metrics_answer_in_the_prometheus_text_format() {
    let addr = flex_tests::metrics::free_address();
    let d = Daemon::start_with(A100, &format!("metrics_listen = \"{addr}\""));
    let w = d.scratch("m");
    let mut c = d.client();
    // Every leaf each: the second waits for the first, so scheduling passes run.
    let mut spec = script_job("#!/bin/sh\nsleep 1\n", &w);
    spec.request.leaves = Some(14);
    let good = c.submit(spec).unwrap();
    let mut spec = script_job("#!/bin/sh\nexit 3\n", &w);
    spec.request.leaves = Some(14);
    let bad = c.submit(spec).unwrap();
    d.wait_finished(good);
    d.wait_finished(bad);
    let samples = wait_for("both ends counted", || {
        let (code, body) = http_get(&addr, "/metrics");
        assert_eq!(code, 200);
        let s = parse_exposition(&body);
        (s["flex_jobs_completed_total{state=\"FAILED\"}"] == 1.0).then_some(s)
    });
    assert_eq!(
        samples["flex_jobs_completed_total{state=\"COMPLETED\"}"],
        1.0
    );
    assert_eq!(samples["flex_jobs_started_total"], 2.0);
    assert_eq!(samples["flex_jobs{state=\"COMPLETED\"}"], 1.0);
    let leaves: f64 = samples
        .iter()
        .filter(|(k, _)| k.starts_with("flex_leaves{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(leaves, 14.0, "busy + free over both GPUs");
    for gpu in ["0", "1"] {
        for state in ["busy", "free"] {
            let label = format!("gpu=\"{gpu}\",state=\"{state}\"}}");
            assert!(
                samples
                    .keys()
                    .any(|k| k.starts_with("flex_leaves{") && k.ends_with(&label)),
                "no {label} sample"
            );
        }
    }
    // Buckets are cumulative and +Inf equals the count.
    let mut bounds: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(k, _)| k.starts_with("flex_sched_pass_seconds_bucket"))
        .map(|(k, v)| {
            let le = k.split("le=\"").nth(1).unwrap().trim_end_matches("\"}");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, *v)
        })
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(bounds.last().unwrap().0, f64::INFINITY);
    let buckets: Vec<f64> = bounds.into_iter().map(|(_, v)| v).collect();
    assert!(buckets.len() > 2);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    assert_eq!(
        *buckets.last().unwrap(),
        samples["flex_sched_pass_seconds_count"]
    );
    assert!(samples["flex_sched_pass_seconds_count"] >= 1.0);
    assert_eq!(http_get(&addr, "/").0, 404);
}

#[test]
fn records_outlive_the_queue_view_and_restarts() {
    let mut d = Daemon::start_with(A100, "keep_finished = \"1s\"");
    let w = d.scratch("gone");
    let job = d
        .client()
        .submit(script_job("#!/bin/sh\nexit 7\n", &w))
        .unwrap();
    d.wait_finished(job);
    wait_for("the job to leave flexq's view", || {
        d.job(job).is_none().then_some(())
    });
    let row = |d: &Daemon| {
        let out = cmd(d, "flexacct")
            .args([
                "-j",
                &job.to_string(),
                "-P",
                "-n",
                "--format",
                "JobID,State,ExitCode",
            ])
            .output()
            .unwrap();
        ok(out, "flexacct -j")
    };
    assert_eq!(row(&d), format!("{job}|FAILED|7:0\n"));
    d.restart();
    assert_eq!(row(&d), format!("{job}|FAILED|7:0\n"), "after a restart");
}
