//! GPU telemetry on a simulated topology: flexd samples the fixed file
//! `tests/fixtures/telemetry/samples.csv`, the metrics endpoint shows each busy leaf's reading
//! with its job, and a finished job's summary (flexacct) and efficiency report (flexeff) are
//! what the samples say, to the byte, labelled simulated.

use flex_tests::cli::{cmd, submit, text, wait_running};
use flex_tests::metrics::{free_address, http_get};
use flex_tests::Daemon;
use gres_plugin::JobId;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/telemetry/samples.csv")
}

/// The shipped A100 testbed naming the fixed samples file.
fn topology(dir: &Path) -> PathBuf {
    let shipped = gres_plugin::topology::builtin("a100-40gb-x2.toml").expect("shipped");
    let path = dir.join("a100-sim.toml");
    let text = format!(
        "telemetry = {:?}\n{shipped}",
        samples().display().to_string()
    );
    std::fs::write(&path, text).expect("write the topology");
    path
}

/// flexacct's JSON record of `job`, once its GPU summary is in (it follows the job's end by
/// a sampling period).
fn record_with_usage(d: &Daemon, job: JobId) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cmd(d, "flexacct")
            .args(["--json", "-j", &job.to_string()])
            .output()
            .expect("run flexacct");
        let recs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
        if let Some(r) = recs.into_iter().find(|r| r["gpu_usage"].is_object()) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "no GPU summary of job {job}:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn flexeff(d: &Daemon, job: JobId) -> String {
    let out = cmd(d, "flexeff")
        .arg(job.to_string())
        .output()
        .expect("run flexeff");
    assert!(out.status.success(), "flexeff: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn a_jobs_gpu_summary_and_efficiency_are_what_the_samples_say() {
    let scratch = tempfile::tempdir().expect("temporary directory");
    let addr = free_address();
    let config = format!("telemetry_period = \"1s\"\nmetrics_listen = \"{addr}\"");
    let d = Daemon::start_with(topology(scratch.path()).to_str().unwrap(), &config);
    assert!(
        d.log().contains("GPU telemetry from simulated ("),
        "{}",
        d.log()
    );
    let dir = scratch.path();
    let four = submit(
        &d,
        dir,
        "four.sh",
        "#!/bin/sh\nsleep 6\n",
        &["--leaves", "4"],
    );
    let one = submit(
        &d,
        dir,
        "one.sh",
        "#!/bin/sh\nsleep 6\n",
        &["--leaves", "1"],
    );
    wait_running(&d, four);

    // While it runs, each of its leaves has a gauge with its job's id, labelled simulated.
    let want = format!("job=\"{four}\",source=\"simulated\"}} ");
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let (code, body) = http_get(&addr, "/metrics");
        assert_eq!(code, 200);
        let n = body
            .lines()
            .filter(|l| l.starts_with("flex_leaf_gpu_memory_bytes{") && l.contains(&want))
            .count();
        if n == 4 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no gauges of job {four}:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(30));
    };
    assert!(
        page.lines()
            .any(|l| l.starts_with("flex_leaf_gpu_utilization_percent{") && l.contains(&want)),
        "{page}"
    );

    d.wait_finished(four);
    d.wait_finished(one);
    let rec = record_with_usage(&d, four);
    let source = format!("simulated ({})", samples().display());
    assert_eq!(
        rec["gpu_usage"],
        serde_json::json!({
            "source": source,
            "samples": 4,
            "period_s": 1.0,
            "mem_max_bytes": 3u64 << 30,
            "mem_ave_bytes": 2304u64 << 20,
            "util_max_pct": 100.0,
            "util_ave_pct": 85.0,
            "energy_j": 514.3,
        })
    );
    // flexacct in Slurm's TRES spelling, with the source beside it and a note on stderr.
    let out = cmd(&d, "flexacct")
        .args(["-n", "-P", "-j", &four.to_string()])
        .args([
            "-o",
            "ConsumedEnergy,TRESUsageInMax,TRESUsageInAve,GPUTelemetry",
        ])
        .output()
        .expect("run flexacct");
    let row = text(&out.stdout);
    let (energy, row) = row.split_once('|').expect("four fields");
    assert_eq!(energy, "514");
    let (max, rest) = row.split_once('|').expect("three fields");
    assert!(
        max.ends_with("gres/gpumem=3G,gres/gpuutil=100")
            && rest.starts_with("cpu=")
            && rest.ends_with(&format!(",gres/gpumem=2.25G,gres/gpuutil=85|{source}\n")),
        "{row}"
    );
    assert!(
        text(&out.stderr).contains("flexacct: note: GPU figures of simulated topologies"),
        "{out:?}"
    );
    let eff = flexeff(&d, four);
    let gpu: Vec<&str> = eff
        .lines()
        .filter(|l| l.starts_with("GPU") || l.starts_with("  --leaves"))
        .collect();
    assert_eq!(
        gpu.join("\n"),
        format!(
            "GPU Leaves: 4 (1g.5gb), 19.00 GiB of GPU memory\n\
             GPU Telemetry: {source}, 4 samples every 1 s\n\
             GPU Utilization: mean 85%, peak 100% of one leaf (21.25% / 25.00% of the 4 held) (simulated)\n\
             GPU Memory Utilized: peak 3.00 GiB, mean 2.25 GiB (15.79% of 19.00 GiB held) (simulated)\n\
             GPU Energy: 514.3 J (0.14 Wh), its part of its GPUs' power (simulated)\n  \
             --leaves 1: it held 4 leaves; compute peaked at 1 leaf's worth (100% of one leaf) and GPU memory at 3.00 GiB, which 1 of its leaves hold (simulated)"
        ),
        "{eff}"
    );

    // A leaf whose device reports no utilisation: "not reported", and no leaf advice.
    record_with_usage(&d, one);
    let eff = flexeff(&d, one);
    assert!(
        eff.contains("\nGPU Utilization: not reported by the device\n")
            && eff.contains("\nGPU Memory Utilized: peak 6.00 GiB, mean 5.00 GiB ")
            && eff.contains("\nGPU Energy: 71.4 J (0.02 Wh), its part of its GPUs' power "),
        "{eff}"
    );
}

/// A topology naming a seed: flexd samples the generator, and the job's summary is what the
/// generator's series for that job and its leaves makes (computed here through the same
/// library, for as many samples as flexd took), labelled `simulated (seed 7)` in flexacct,
/// flexeff and the metrics endpoint.
#[test]
fn a_seeded_topology_gives_the_generators_figures_labelled_simulated() {
    use gres_plugin::telemetry::{gen::GenTelemetry, Target, Telemetry};
    let scratch = tempfile::tempdir().expect("temporary directory");
    let shipped = gres_plugin::topology::builtin("a100-40gb-x2.toml").expect("shipped");
    let topo = scratch.path().join("a100-gen.toml");
    std::fs::write(&topo, format!("telemetry_seed = 7\n{shipped}")).expect("write");
    let addr = free_address();
    let config = format!("telemetry_period = \"1s\"\nmetrics_listen = \"{addr}\"");
    let d = Daemon::start_with(topo.to_str().unwrap(), &config);
    let job = submit(
        &d,
        scratch.path(),
        "two.sh",
        "#!/bin/sh\nsleep 4\n",
        &["--leaves", "2"],
    );
    wait_running(&d, job);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !http_get(&addr, "/metrics")
        .1
        .contains(&format!("job=\"{job}\",source=\"simulated\"}}"))
    {
        assert!(Instant::now() < deadline, "no simulated gauge of job {job}");
        std::thread::sleep(Duration::from_millis(30));
    }
    d.wait_finished(job);
    let rec = record_with_usage(&d, job);
    let usage: flex_proto::GpuUsage =
        serde_json::from_value(rec["gpu_usage"].clone()).expect("a summary");
    assert_eq!(usage.source, "simulated (seed 7)");

    // The same series through the library: the job's leaves, as many samples as it took.
    let host = flexd_host(&topo);
    let targets: Vec<Target> = rec["leaves"]
        .as_array()
        .expect("leaves")
        .iter()
        .map(|l| {
            let leaf = host
                .leaves
                .iter()
                .find(|x| x.uuid == l["uuid"].as_str().expect("a UUID"))
                .expect("the leaf is the topology's");
            let gpu = host.gpus.iter().find(|g| g.index == leaf.gpu).unwrap();
            Target {
                leaf: leaf.id,
                uuid: leaf.uuid.clone(),
                job,
                whole: true,
                gpu_uuid: gpu.uuid.clone(),
                gpu_share: leaf.sm_slices as f64 / 7.0,
                gpu_instance: leaf.gpu_instance,
                leaf_mem_bytes: leaf.memory_bytes,
                pids: Vec::new(),
            }
        })
        .collect();
    assert_eq!(targets.len(), 2, "{rec}");
    let mut gen = GenTelemetry::new(7);
    let mut totals = gres_plugin::telemetry::summary::GpuTotals::default();
    for _ in 0..usage.samples {
        let r = gen.read(&targets);
        totals.add(r.iter().zip(&targets).map(|(r, t)| (r, t.gpu_share)), 1.0);
    }
    assert_eq!(totals.summary("simulated (seed 7)", 1.0), Some(usage));

    let out = cmd(&d, "flexacct")
        .args(["-n", "-P", "-j", &job.to_string()])
        .args(["-o", "TRESUsageInMax,GPUTelemetry"])
        .output()
        .expect("run flexacct");
    assert!(
        text(&out.stdout).ends_with("|simulated (seed 7)\n"),
        "{out:?}"
    );
    assert!(text(&out.stderr).contains("simulated telemetry"), "{out:?}");
    let eff = flexeff(&d, job);
    assert!(
        eff.contains("GPU Telemetry: simulated (seed 7), ")
            && eff.contains("(simulated)\nGPU Memory Utilized:"),
        "{eff}"
    );
}

/// The host model flexd builds from a topology file.
fn flexd_host(topo: &Path) -> gres_plugin::HostModel {
    let text = std::fs::read_to_string(topo).expect("read the topology");
    let raw = gres_plugin::topology::parse(&text, "test").expect("parse");
    gres_plugin::probe::build_host(&raw).expect("build")
}

/// A share of a whole GPU (`--gpu-fraction`) on the p4-x4 topology, whose samples file gives
/// each GPU's own figures and, in its sixth and seventh fields, what the job's own processes
/// use (NVML's per-process figures): the job's summary is its own figures, never the GPU's,
/// and its energy half the GPU's power.
#[test]
fn a_share_of_a_whole_gpu_reports_its_own_processes_figures() {
    let scratch = tempfile::tempdir().expect("temporary directory");
    let mut samples =
        String::from("# sample,leaf,mem_mib,util_pct,power_w,share_mem_mib,share_util_pct\n");
    for leaf in 0..4 {
        for n in 0..4 {
            samples += &format!("{n},{leaf},7000,95,50,{},{}\n", 512 * (n + 1), 10 * (n + 1));
        }
    }
    let file = scratch.path().join("p4-samples.csv");
    std::fs::write(&file, samples).expect("write the samples");
    let shipped = gres_plugin::topology::builtin("p4-x4.toml").expect("shipped");
    let topo = scratch.path().join("p4-sim.toml");
    let line = format!("telemetry = {:?}", file.display().to_string());
    std::fs::write(&topo, format!("{line}\n{shipped}")).expect("write the topology");
    let d = Daemon::start_with(topo.to_str().unwrap(), "telemetry_period = \"1s\"");
    let job = submit(
        &d,
        scratch.path(),
        "half.sh",
        "#!/bin/sh\nsleep 6\n",
        &["--gpu-fraction", "0.5"],
    );
    d.wait_finished(job);
    let rec = record_with_usage(&d, job);
    assert_eq!(
        rec["gpu_usage"],
        serde_json::json!({
            "source": format!("simulated ({})", file.display()),
            "samples": 4,
            "period_s": 1.0,
            "mem_max_bytes": 2048u64 << 20,
            "mem_ave_bytes": 1280u64 << 20,
            "util_max_pct": 40.0,
            "util_ave_pct": 25.0,
            // 50 W × half the GPU × 1 s × 4 samples
            "energy_j": 100.0,
        }),
        "{rec}"
    );
    let eff = flexeff(&d, job);
    assert!(
        eff.contains("\nGPU Memory Utilized: peak 2.00 GiB, mean 1.25 GiB "),
        "{eff}"
    );
    // 40% of the GPU's compute at its peak fits in 0.4 of it.
    assert!(
        eff.contains(
            "--gpu-fraction 0.4: it held 0.5 of the GPU; peak GPU utilisation 40% and peak GPU \
             memory 2.00 GiB of the GPU's "
        ),
        "{eff}"
    );
}
