//! Host memory, cores and CPU-only jobs end to end: the real flexsub against the real flexd on
//! the simulated a100 testbed (14 leaves, 32 cores, 256 GiB of RAM of which 254 GiB go to jobs),
//! as a Slurm user writes the scripts.

use flex_proto::{JobState, JobView};
use flex_tests::{bin_dir, wait_for, Daemon};
use gres_plugin::JobId;
use std::path::Path;
use std::process::Command;

const TOPOLOGY: &str = "a100-40gb-x2.toml";

fn cmd(d: &Daemon, name: &str) -> Command {
    let mut c = d.cmd(name);
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("{}:{path}", bin_dir().display()));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Submit `script` (written to `dir/name`) with extra flexsub arguments; returns its id.
fn submit(d: &Daemon, dir: &Path, name: &str, script: &str, args: &[&str]) -> JobId {
    std::fs::write(dir.join(name), script).unwrap();
    let out = cmd(d, "flexsub")
        .current_dir(dir)
        .args(["--parsable"])
        .args(args)
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "flexsub {name}: {out:?}\n{}", d.log());
    let id = text(&out.stdout);
    JobId(id.trim().split(';').next().unwrap().parse().unwrap())
}

/// A script that waits for `file` in its working directory to appear.
fn until(file: &str, directives: &str) -> String {
    format!("#!/bin/sh\n{directives}\nwhile [ ! -e {file} ]; do sleep 0.1; done\n")
}

fn reason(d: &Daemon, job: JobId) -> String {
    let out = cmd(d, "flexq")
        .args(["-h", "-j", &job.to_string(), "-o", "%r"])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_string()
}

fn alloc(v: &JobView) -> &flex_proto::AllocView {
    v.alloc.as_ref().expect("a started job has an allocation")
}

#[test]
fn jobs_whose_memory_does_not_fit_together_run_one_after_the_other() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("mem");
    let script = until("release", "#SBATCH --mem=200G -t 5:00");
    let first = submit(&d, &dir, "a.sh", &script, &[]);
    let v = d.wait_state(first, &[JobState::Running]);
    assert_eq!(alloc(&v).mem_bytes, 200 << 30);
    assert!(
        alloc(&v).leaves.is_empty(),
        "a job without a GPU request gets no leaf"
    );
    let second = submit(&d, &dir, "b.sh", &script, &[]);
    // Cores and leaves are free: only memory keeps it waiting, and flexq says so.
    wait_for("the second job's reason", || {
        (reason(&d, second) == "Resources:memory").then_some(())
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(d.job(second).unwrap().state, JobState::Pending);
    let v = d.job(second).unwrap();
    assert_eq!(v.reason.as_deref(), Some("Resources:memory"));
    // A small job still starts beside the first one.
    let small = submit(&d, &dir, "c.sh", &script, &["--mem", "1G"]);
    d.wait_state(small, &[JobState::Running]);
    std::fs::write(dir.join("release"), "").unwrap();
    let a = d.wait_finished(first);
    let b = d.wait_finished(second);
    assert_eq!(
        (a.state, b.state),
        (JobState::Completed, JobState::Completed)
    );
    assert!(
        b.start_time.unwrap() >= a.end_time.unwrap(),
        "the second started only after the first ended: {a:?} {b:?}"
    );
}

#[test]
fn a_job_larger_than_the_hosts_memory_is_refused_at_submission() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("big");
    std::fs::write(dir.join("big.sh"), "#!/bin/sh\n#SBATCH --mem=300G\ntrue\n").unwrap();
    let out = cmd(&d, "flexsub")
        .current_dir(&dir)
        .arg("big.sh")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("unsatisfiable") && err.contains("host memory") && err.contains("254.00 GiB"),
        "{err}"
    );
}

#[test]
fn a_cpu_only_array_runs_while_another_job_holds_every_leaf() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("cpu");
    let blocker = submit(
        &d,
        &dir,
        "gpu.sh",
        &until("release", "#SBATCH --gres=gpu:14 -t 5:00"),
        &[],
    );
    let v = d.wait_state(blocker, &[JobState::Running]);
    assert_eq!(alloc(&v).leaves.len(), 14);
    let array = submit(
        &d,
        &dir,
        "tok.sh",
        "#!/bin/sh\n#SBATCH --array=1-100 -c 1 --mem=100M -t 5:00\n#SBATCH -o tok-%A_%a.out\n\
         echo \"$SLURM_ARRAY_TASK_ID [$CUDA_VISIBLE_DEVICES] $FLEX_LEAVES\"\n",
        &[],
    );
    // Every task ends while the GPU job still holds every leaf.
    wait_for("the array to finish", || {
        let out = cmd(&d, "flexacct")
            .args(["-j", &array.to_string(), "-n", "-P", "-o", "State", "-X"])
            .output()
            .unwrap();
        let s = text(&out.stdout);
        (s.lines().filter(|l| *l == "COMPLETED").count() == 100).then_some(())
    });
    assert_eq!(d.job(blocker).unwrap().state, JobState::Running);
    for i in [1, 50, 100] {
        let out = std::fs::read_to_string(dir.join(format!("tok-{array}_{i}.out"))).unwrap();
        assert_eq!(
            out,
            format!("{i} [] 0\n"),
            "no GPU is visible to a CPU-only job"
        );
    }
    // `--gres=gpu:0` is a CPU-only job too; it shows no gres, as squeue shows it.
    let zero = submit(
        &d,
        &dir,
        "zero.sh",
        &until("release", "#SBATCH --gres=gpu:0 -c 3"),
        &[],
    );
    let v = d.wait_state(zero, &[JobState::Running]);
    assert!(alloc(&v).leaves.is_empty());
    assert_eq!(alloc(&v).cores.len(), 3);
    let out = cmd(&d, "flexq")
        .args(["-h", "-j", &zero.to_string(), "-o", "%b"])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout).trim(), "N/A");
    std::fs::write(dir.join("release"), "").unwrap();
    assert_eq!(d.wait_finished(blocker).state, JobState::Completed);
    assert_eq!(d.wait_finished(zero).state, JobState::Completed);
}

#[test]
fn exclusive_waits_for_an_empty_host_and_holds_it() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("excl");
    let busy = submit(
        &d,
        &dir,
        "busy.sh",
        &until("release-busy", "#SBATCH -c 2"),
        &[],
    );
    d.wait_state(busy, &[JobState::Running]);
    let whole = submit(
        &d,
        &dir,
        "whole.sh",
        &until("release-whole", "#SBATCH --exclusive -t 5:00"),
        &[],
    );
    wait_for("the exclusive job's reason", || {
        reason(&d, whole).starts_with("Resources").then_some(())
    });
    assert_eq!(d.job(whole).unwrap().state, JobState::Pending);
    std::fs::write(dir.join("release-busy"), "").unwrap();
    let v = d.wait_state(whole, &[JobState::Running]);
    let a = alloc(&v);
    assert_eq!((a.leaves.len(), a.cores.len()), (14, 32));
    assert_eq!(a.mem_bytes, 254 << 30);
    // While it runs nothing else does, not even a one-core job.
    let small = submit(&d, &dir, "small.sh", "#!/bin/sh\ntrue\n", &[]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(d.job(small).unwrap().state, JobState::Pending);
    std::fs::write(dir.join("release-whole"), "").unwrap();
    assert_eq!(d.wait_finished(whole).state, JobState::Completed);
    assert_eq!(d.wait_finished(small).state, JobState::Completed);
}

#[test]
fn default_memory_per_core_comes_from_flexd_toml() {
    let d = Daemon::start_with(TOPOLOGY, "default_mem_per_cpu = \"1 GiB\"");
    let dir = d.scratch("def");
    let job = submit(
        &d,
        &dir,
        "j.sh",
        &until("release", "#SBATCH -n 2 -c 2"),
        &[],
    );
    let v = d.wait_state(job, &[JobState::Running]);
    assert_eq!(alloc(&v).cores.len(), 4);
    assert_eq!(alloc(&v).mem_bytes, 4 << 30, "1 GiB for each of 4 cores");
    std::fs::write(dir.join("release"), "").unwrap();
    d.wait_finished(job);
    let out = cmd(&d, "flexacct")
        .args([
            "-j",
            &job.to_string(),
            "-n",
            "-P",
            "-X",
            "-o",
            "ReqMem,AllocTRES",
        ])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout).trim(),
        "4G|cpu=4,mem=4G,node=1",
        "{out:?}"
    );
}

#[test]
fn show_config_gives_the_resource_keys_the_host_and_the_limits() {
    let d = Daemon::start_with(TOPOLOGY, "job_pids_max = 500\nreserved_memory = \"6 GiB\"");
    let out = cmd(&d, "flexcontrol")
        .args(["show", "config"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let shown = text(&out.stdout);
    let value = |key: &str| -> String {
        shown
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(" = ")?;
                (k.trim_end() == key).then(|| v.to_string())
            })
            .unwrap_or_else(|| panic!("no {key} in\n{shown}"))
    };
    assert_eq!(value("job_pids_max"), "500");
    assert_eq!(value("default_mem_per_cpu"), "auto");
    assert_eq!(value("reserved_memory"), (6u64 << 30).to_string());
    assert_eq!(
        value("host a100-testbed"),
        "14 leaves on 2 GPUs, 32 cores, 256.0 GiB of RAM (250.0 GiB for jobs)"
    );
    // Each job limit says where it is enforced, or why not.
    let limits: Vec<&str> = shown.lines().filter(|l| l.starts_with("cgroup")).collect();
    assert!(!limits.is_empty(), "{shown}");
    // `show job` still needs its jobs.
    let out = cmd(&d, "flexcontrol")
        .args(["show", "job"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("JOBID"), "{out:?}");
}

#[test]
fn the_job_sees_its_memory_as_sbatch_exports_it() {
    let d = Daemon::start_with(TOPOLOGY, "default_mem_per_cpu = \"1 GiB\"");
    let dir = d.scratch("env");
    let script = "#!/bin/sh\necho \"$FLEX_MEM ${SLURM_MEM_PER_NODE:-} ${SLURM_MEM_PER_CPU:-}\"\n";
    for (args, want) in [
        (&["--mem", "3G"][..], "3072 3072 "),
        (&["--mem-per-cpu", "512M", "-c", "4"][..], "2048  512"),
        // flexd's default_mem_per_cpu, as Slurm's DefMemPerCPU: per core.
        (&["-c", "2"][..], "2048  1024"),
    ] {
        let job = submit(
            &d,
            &dir,
            "m.sh",
            script,
            &[args, &["-o", "m-%j.out"]].concat(),
        );
        assert_eq!(d.wait_finished(job).state, JobState::Completed);
        let out = std::fs::read_to_string(dir.join(format!("m-{job}.out"))).unwrap();
        assert_eq!(out.trim_end_matches('\n'), want, "{args:?}");
    }
}
