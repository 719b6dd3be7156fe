//! Simulated GPU telemetry in `flexsim run`: a topology naming a seed or a samples file gets
//! per-job GPU usage and the run's figures, labelled simulated; a seed gives the same bytes
//! every time and another seed others; the samples file gives the job the summary flexd gives
//! it (tests/tests/telemetry.rs pins the same figures through the daemon).

use std::path::{Path, PathBuf};
use std::process::Command;

fn flexsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flexsim"))
        .args(args)
        .output()
        .expect("flexsim runs")
}

/// The shipped A100 testbed with `line` (a telemetry source) in front.
fn topology(dir: &Path, name: &str, line: &str) -> PathBuf {
    let shipped = gres_plugin::topology::builtin("a100-40gb-x2.toml").expect("shipped");
    let path = dir.join(name);
    std::fs::write(&path, format!("{line}\n{shipped}")).expect("write the topology");
    path
}

/// Ten jobs of 1-4 leaves, a few minutes each.
const TRACE: &str = "job_id,submit_s,leaves,duration_s,kind\n\
    1,0,4,600,train\n2,0,1,300,infer\n3,10,2,900,train\n4,20,1,1200,train\n5,30,3,450,train\n\
    6,60,1,240,infer\n7,90,4,1800,train\n8,120,2,600,train\n9,150,1,20,infer\n10,200,2,700,train\n";

/// `flexsim run --json` and `--jobs-out` of the trace on a topology: (stdout, jobs CSV).
fn run(dir: &Path, topo: &Path, extra: &[&str]) -> (String, String) {
    let trace = dir.join("t.csv");
    std::fs::write(&trace, TRACE).expect("write the trace");
    let jobs = dir.join("jobs.csv");
    let mut args = vec![
        "run",
        "--trace",
        trace.to_str().unwrap(),
        "--topology",
        topo.to_str().unwrap(),
        "--jobs-out",
        jobs.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = flexsim(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(jobs).expect("jobs CSV"),
    )
}

#[test]
fn a_seed_gives_the_same_labelled_figures_every_time_and_another_seed_others() {
    let dir = tempfile::tempdir().unwrap();
    let seven = topology(dir.path(), "s7.toml", "telemetry_seed = 7");
    let eight = topology(dir.path(), "s8.toml", "telemetry_seed = 8");
    let a = run(dir.path(), &seven, &["--json"]);
    assert_eq!(a, run(dir.path(), &seven, &["--json"]));
    let b = run(dir.path(), &eight, &["--json"]);
    assert_ne!(a.0, b.0);
    assert_ne!(a.1, b.1);

    let m: serde_json::Value = serde_json::from_str(&a.0).unwrap();
    let gpu = &m["gpu"];
    assert_eq!(gpu["source"], "simulated (seed 7)");
    assert_eq!(gpu["period_s"], 30);
    // Job 9 runs 20 s, less than a period: no sample, no summary.
    assert_eq!(gpu["jobs_sampled"], 9);
    let util = gpu["mean_leaf_util_pct"].as_f64().unwrap();
    assert!(util > 0.0 && util <= 100.0, "{gpu}");
    assert!(gpu["energy_kwh"].as_f64().unwrap() > 0.0, "{gpu}");

    // Every sampled job's row carries its figures and the label; the count of right-size
    // notes is the count of rows with one.
    let mut lines = a.1.lines();
    let head = lines.next().unwrap();
    assert!(head.ends_with(",right_size_leaves,gpu_telemetry"), "{head}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 10);
    let noted = rows.iter().filter(|r| !r[17].is_empty()).count();
    assert_eq!(gpu["right_size_jobs"], noted);
    for r in &rows {
        let sampled = r[0] != "9";
        assert_eq!(r[18] == "simulated (seed 7)", sampled, "{r:?}");
        assert_eq!(!r[12].is_empty(), sampled, "{r:?}");
        if let Ok(n) = r[17].parse::<u32>() {
            assert!(n < r[2].parse::<u32>().unwrap(), "{r:?}");
        }
    }

    // The table says where its GPU rows come from.
    let (table, _) = run(dir.path(), &seven, &[]);
    assert!(
        table.contains("gpu_telemetry") && table.contains("simulated (seed 7)"),
        "{table}"
    );
}

#[test]
fn a_samples_file_gives_a_job_the_summary_flexd_gives_it() {
    let dir = tempfile::tempdir().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/telemetry/samples.csv")
        .canonicalize()
        .expect("the samples fixture");
    let topo = topology(
        dir.path(),
        "file.toml",
        &format!("telemetry = {:?}", samples.display().to_string()),
    );
    let (_, jobs) = run(dir.path(), &topo, &["--telemetry-period-s", "1"]);
    // Job 1 (4 leaves) takes the fixture's four samples of each 1g.5gb leaf, as flexd's test
    // job does: peak 3 GiB, mean 2.25 GiB, 100% / 85%, 514.3 J, and the note to ask for 1 leaf.
    let row = jobs.lines().find(|l| l.starts_with("1,")).unwrap();
    let gpu: Vec<&str> = row.split(',').skip(12).collect();
    assert_eq!(
        gpu,
        [
            "3072.0",
            "2304.0",
            "100",
            "85",
            "514.3",
            "1",
            &format!("simulated ({})", samples.display())
        ],
        "{jobs}"
    );
}

#[test]
fn other_models_are_not_sampled_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let seven = topology(dir.path(), "s7.toml", "telemetry_seed = 7");
    let trace = dir.path().join("t.csv");
    std::fs::write(&trace, TRACE).unwrap();
    let out = flexsim(&[
        "run",
        "--trace",
        trace.to_str().unwrap(),
        "--topology",
        seven.to_str().unwrap(),
        "--model",
        "dm",
        "--json",
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Flex-MIG (fm) runs only"), "{stderr}");
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(m.get("gpu").is_none(), "{m}");
    // Two sources in one topology are refused, naming both keys.
    let both = topology(
        dir.path(),
        "both.toml",
        "telemetry = \"x.csv\"\ntelemetry_seed = 7",
    );
    let out = flexsim(&[
        "run",
        "--trace",
        trace.to_str().unwrap(),
        "--topology",
        both.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("telemetry_seed"), "{stderr}");
}
