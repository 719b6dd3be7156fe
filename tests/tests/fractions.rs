//! Fractions of whole GPUs and memory requests end to end: the real flexsub against the real
//! flexd, on the simulated p4-x4 topology (four whole Tesla P4s, GPUs 0+1 and 2+3 under one PCIe
//! switch each) and on the a100 testbed.

use flex_proto::{JobState, JobView};
use flex_tests::{bin_dir, Daemon};
use gres_plugin::JobId;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn cmd(d: &Daemon, name: &str) -> Command {
    let mut c = d.cmd(name);
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("{}:{path}", bin_dir().display()));
    c
}

/// Submit a job that records its environment into `env-<job>` in `dir`, then waits for
/// `release` to appear (so jobs overlap); returns its id.
fn submit(d: &Daemon, dir: &Path, args: &[&str]) -> JobId {
    let out = cmd(d, "flexsub")
        .current_dir(dir)
        .args(args)
        .args([
            "--parsable",
            "--time",
            "5:00",
            "--wrap",
            "env > env-$FLEX_JOB_ID; while [ ! -e release ]; do sleep 0.1; done",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "flexsub {args:?}: {out:?}");
    JobId(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap())
}

fn env_of(dir: &Path, job: JobId) -> BTreeMap<String, String> {
    let path = dir.join(format!("env-{job}"));
    for _ in 0..300 {
        if let Ok(t) = std::fs::read_to_string(&path) {
            if t.contains("FLEX_JOB_ID") {
                return t
                    .lines()
                    .filter_map(|l| l.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("job {job} wrote no environment");
}

fn uuids(v: &JobView) -> Vec<(String, u32)> {
    let a = v.alloc.as_ref().expect("a running job has an allocation");
    a.leaves.iter().map(|l| (l.uuid.clone(), l.share)).collect()
}

#[test]
fn fractions_share_one_whole_gpu_and_the_environment_says_so() {
    let d = Daemon::start("p4-x4.toml");
    let dir = d.scratch("frac");
    let jobs: Vec<JobId> = ["0.5", "0.4", "0.1"]
        .iter()
        .map(|f| submit(&d, &dir, &["--gpu-fraction", f]))
        .collect();
    let views: Vec<JobView> = jobs
        .iter()
        .map(|j| d.wait_state(*j, &[JobState::Running]))
        .collect();
    let got: Vec<(String, u32)> = views.iter().flat_map(uuids).collect();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|(u, _)| *u == got[0].0), "one GPU: {got:?}");
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), [500, 400, 100]);
    let env = env_of(&dir, jobs[0]);
    assert_eq!(env["CUDA_VISIBLE_DEVICES"], got[0].0);
    assert_eq!(env["FLEX_GPU_FRACTION"], "0.500");
    assert_eq!(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
    assert!(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"].starts_with("0="));
    // the GPU is full: a fourth fraction opens another GPU
    let fourth = submit(&d, &dir, &["--gpu-fraction", "0.2"]);
    let v = d.wait_state(fourth, &[JobState::Running]);
    assert_ne!(uuids(&v)[0].0, got[0].0);
    std::fs::write(dir.join("release"), "").unwrap();
    for j in jobs.iter().chain([&fourth]) {
        assert_eq!(d.wait_finished(*j).state, JobState::Completed);
    }
}

#[test]
fn a_non_integer_fraction_above_one_is_refused() {
    let d = Daemon::start("p4-x4.toml");
    let dir = d.scratch("big");
    let out = cmd(&d, "flexsub")
        .current_dir(&dir)
        .args(["--gpu-fraction", "1.5", "--wrap", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1.5"), "{err}");
}

#[test]
fn a_memory_request_gets_the_smallest_set_of_leaves() {
    let d = Daemon::start("a100-40gb-x2.toml");
    let dir = d.scratch("mem");
    let job = submit(&d, &dir, &["--gpu-mem", "12G"]);
    let v = d.wait_state(job, &[JobState::Running]);
    let mut profiles: Vec<String> = v
        .alloc
        .as_ref()
        .unwrap()
        .leaves
        .iter()
        .map(|l| l.profile.clone())
        .collect();
    profiles.sort();
    assert_eq!(profiles, ["1g.10gb", "1g.5gb"]);
    assert_eq!(env_of(&dir, job)["FLEX_LEAVES"], "2");
    std::fs::write(dir.join("release"), "").unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
}

#[test]
fn a_model_directory_sizes_the_request() {
    let d = Daemon::start("a100-40gb-x2.toml");
    let dir = d.scratch("model");
    let model = dir.join("gpt2");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(
        model.join("config.json"),
        r#"{"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12,
            "n_head": 12, "n_positions": 1024, "torch_dtype": "float32"}"#,
    )
    .unwrap();
    // estimate only: a breakdown and the host's answer, nothing queued
    let out = cmd(&d, "flexsub")
        .current_dir(&dir)
        .args(["--model", "gpt2", "--batch-size", "8", "--seq-len", "1024"])
        .args(["--train", "--estimate-only", "--wrap", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("124"),
        "parameter count in the breakdown: {text}"
    );
    // submitted: the estimate travels as a memory request
    let job = submit(
        &d,
        &dir,
        &[
            "--model",
            "gpt2",
            "--batch-size",
            "1",
            "--seq-len",
            "128",
            "--infer",
        ],
    );
    let v = d.wait_state(job, &[JobState::Running]);
    assert!(v.request.mem_bytes.is_some_and(|m| m > 124_000_000 * 4));
    std::fs::write(dir.join("release"), "").unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    // an unreadable model is a clear error and queues nothing
    let out = cmd(&d, "flexsub")
        .current_dir(&dir)
        .args([
            "--model",
            "nowhere",
            "--batch-size",
            "1",
            "--seq-len",
            "8",
            "--infer",
        ])
        .args(["--wrap", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere"));
}
