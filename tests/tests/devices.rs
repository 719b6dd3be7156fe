//! GPU device confinement (issue 27, item 9): a job may open the device nodes of the GPU and
//! MIG instance it was given, and no other GPU's or instance's, as Slurm's ConstrainDevices.
//!
//! There is no GPU here: the simulated topology names a device root where the test makes the
//! nodes with mknod, with the numbers of a driver that is not loaded (NVIDIA's major 195 and
//! an unused major for the MIG capabilities). Opening an allowed node then fails with ENXIO
//! ("No such device or address": nothing behind it), a denied one with EPERM ("Operation not
//! permitted": the job's cgroup refused it before any driver was asked). Real jobs through the
//! real daemon try every node.
//!
//! Needs root and a devices cgroup (v1, or a BPF program on cgroup2); without them the test
//! says why and passes, except with CI=true, where it must run.

use flex_tests::{script_job, wait_for, Daemon};
use gres_plugin::JobId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// GPU 0 split into two 3g.20gb MIG instances (GPU instances 1 and 2), GPU 1 whole.
const TOPOLOGY: &str = r#"
hostname = "devices"
device_root = "root"
[[numa]]
id = 0
cores = "0-3"
[[gpu]]
index = 0
name = "NVIDIA A100-PCIE-40GB"
memory_gib = 40
numa = 0
mig = [{ profile = "3g.20gb", count = 2 }]
[[gpu]]
index = 1
name = "NVIDIA A100-PCIE-40GB"
memory_gib = 40
numa = 0
"#;

fn skip(why: &str) -> bool {
    assert!(
        std::env::var("CI").as_deref() != Ok("true")
            && std::env::var_os("FLEX_DEVICES_NS").is_none(),
        "CI=true: GPU devices must be confined here, but: {why}"
    );
    eprintln!("notice: skipped, {why}");
    true
}

fn mknod(path: &Path, major: u32, minor: u32) {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    let dev = makedev(major.into(), minor.into());
    mknod(path, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), dev)
        .unwrap_or_else(|e| panic!("mknod {}: {e}", path.display()));
}

/// A character major no driver of this kernel has taken.
fn free_major() -> u32 {
    let devices = std::fs::read_to_string("/proc/devices").unwrap();
    let taken: Vec<u32> = devices
        .lines()
        .take_while(|l| !l.starts_with("Block"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    (234..=254)
        .rev()
        .find(|m| !taken.contains(m))
        .expect("a free major between 234 and 254")
}

/// The device root: the nodes of both GPUs, nvidiactl, and the MIG capabilities (config,
/// monitor, and each instance's GPU-instance and compute-instance access) with the driver's
/// mig-minors table and /proc/devices line. Returns each capability node by its table key.
fn device_root(root: &Path, caps: u32) -> BTreeMap<String, PathBuf> {
    std::fs::create_dir_all(root.join("dev/nvidia-caps")).unwrap();
    std::fs::create_dir_all(root.join("proc/driver/nvidia-caps")).unwrap();
    for (name, minor) in [("nvidia0", 0), ("nvidia1", 1), ("nvidiactl", 255)] {
        mknod(&root.join("dev").join(name), 195, minor);
    }
    let mut table = String::from("config 1\nmonitor 2\n");
    let mut n = 3;
    for g in 0..2 {
        for gi in 0..15 {
            table += &format!("gpu{g}/gi{gi}/access {n}\n");
            n += 1;
            for ci in 0..8 {
                table += &format!("gpu{g}/gi{gi}/ci{ci}/access {n}\n");
                n += 1;
            }
        }
    }
    std::fs::write(root.join("proc/driver/nvidia-caps/mig-minors"), &table).unwrap();
    std::fs::write(
        root.join("proc/devices"),
        format!("Character devices:\n195 nvidia-frontend\n{caps} nvidia-caps\n"),
    )
    .unwrap();
    let mut nodes = BTreeMap::new();
    for key in [
        "config",
        "monitor",
        "gpu0/gi1/access",
        "gpu0/gi1/ci0/access",
        "gpu0/gi2/access",
        "gpu0/gi2/ci0/access",
    ] {
        let minor: u32 = table
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")))
            .unwrap()
            .parse()
            .unwrap();
        let p = root.join(format!("dev/nvidia-caps/nvidia-cap{minor}"));
        mknod(&p, caps, minor);
        nodes.insert(key.to_string(), p);
    }
    nodes
}

/// A job that opens each of `nodes` read-write, as CUDA opens them, and some devices that
/// are no GPU's, then waits to be cancelled (so the three jobs hold three leaves at once).
fn opener(nodes: &[PathBuf]) -> String {
    let list: Vec<String> = nodes.iter().map(|p| format!("'{}'", p.display())).collect();
    format!(
        "#!/bin/sh\nfor f in {} /dev/null /dev/ptmx; do\n\
         if e=$( {{ : <> \"$f\"; }} 2>&1 ); then echo \"$f|ok\"; else echo \"$f|$e\"; fi\n\
         done\necho done\nexec sleep 600\n",
        list.join(" ")
    )
}

/// What the job's output says of each path: ENXIO, EPERM, ok, or the shell's message.
fn results(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(path, e)| {
            let r = if e.contains("No such device or address") {
                "ENXIO"
            } else if e.contains("Operation not permitted") {
                "EPERM"
            } else {
                e
            };
            (path.to_string(), r.to_string())
        })
        .collect()
}

#[test]
fn a_job_opens_only_the_gpu_and_mig_instance_it_was_given() {
    confined("jobs' devices is limited");
}

/// The name of the cgroup2 test, which reruns itself in a private mount namespace.
const V2_TEST: &str = "a_bpf_device_program_on_cgroup2_holds_the_same_wall";

/// The same through a BPF device program on cgroup2. flexd takes the v1 devices controller
/// where its hierarchy is mounted (a hybrid host), so there the test runs itself again in a
/// private mount namespace without that hierarchy, where flexd must use cgroup2.
#[test]
fn a_bpf_device_program_on_cgroup2_holds_the_same_wall() {
    let bpf = "jobs' devices is limited by a BPF device program on cgroup v2";
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let v1 = info.lines().find(|l| {
        l.split_once(" - ").is_some_and(|(_, r)| {
            r.starts_with("cgroup ") && r.split([' ', ',']).any(|o| o == "devices")
        })
    });
    let Some(v1) = v1.filter(|_| std::env::var_os("FLEX_DEVICES_NS").is_none()) else {
        return confined(bpf);
    };
    if !nix::unistd::geteuid().is_root() && skip("needs root to make device nodes") {
        return;
    }
    let mount = v1.split_whitespace().nth(4).unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("umount \"$1\" && shift && exec \"$@\"")
        .arg("sh")
        .arg(mount)
        .arg(&exe)
        .args(["--exact", V2_TEST, "--nocapture", "--test-threads=1"])
        .env("FLEX_DEVICES_NS", "1")
        .output()
        .expect("run unshare");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    if !out.status.success() && text.contains("unshare failed") {
        skip("no private mount namespace here");
        return;
    }
    assert!(
        out.status.success(),
        "in a namespace without {mount}:\n{text}"
    );
    assert!(
        text.contains("1 passed") && !text.contains("notice: skipped"),
        "{text}"
    );
}

/// Jobs through the real daemon try every node; flexd's log must say `how` it limits them.
fn confined(how: &str) {
    if !nix::unistd::geteuid().is_root() && skip("needs root to make device nodes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let caps_major = free_major();
    let caps = device_root(&tmp.path().join("root"), caps_major);
    let topology = tmp.path().join("devices.toml");
    std::fs::write(&topology, TOPOLOGY).unwrap();
    let d = Daemon::start(topology.to_str().unwrap());
    let log = d.log();
    if !log.contains(how) {
        let why = log
            .lines()
            .find(|l| {
                l.contains("jobs' devices is not limited")
                    || l.contains("jobs are held by their process group only")
            })
            .unwrap_or("flexd says nothing about devices");
        if skip(why) {
            return;
        }
    }
    assert!(
        log.contains("each job is denied the GPU devices it was not given: 2 GPU device nodes and 4 MIG capabilities"),
        "{log}"
    );
    let dev = tmp.path().join("root/dev");
    let mut nodes = vec![
        dev.join("nvidia0"),
        dev.join("nvidia1"),
        dev.join("nvidiactl"),
    ];
    nodes.extend(caps.values().cloned());

    let w = d.scratch("devices");
    let script = opener(&nodes);
    let jobs: Vec<JobId> = (0..3)
        .map(|_| d.client().submit(script_job(&script, &w)).unwrap())
        .collect();
    let outs: Vec<String> = jobs
        .iter()
        .map(|j| {
            wait_for(&format!("job {j} to try the nodes"), || {
                let out = std::fs::read_to_string(w.join(format!("flex-{j}.out"))).ok()?;
                out.contains("done\n").then_some(out)
            })
        })
        .collect();
    let leaves: Vec<_> = jobs
        .iter()
        .map(|j| d.job(*j).unwrap().alloc.unwrap().leaves[0].clone())
        .collect();
    d.client().cancel(jobs.clone(), None).unwrap();

    // The simulated leaves' GPU instances, by UUID, as flexd models them.
    let raw = gres_plugin::topology::parse(TOPOLOGY, "test").unwrap();
    let host = gres_plugin::probe::build_host(&raw).unwrap();
    let mut held: Vec<&str> = leaves.iter().map(|l| l.uuid.as_str()).collect();
    held.sort();
    held.dedup();
    assert_eq!(
        held.len(),
        3,
        "the three jobs hold the three leaves: {leaves:?}"
    );
    for ((job, out), leaf) in jobs.iter().zip(&outs).zip(&leaves) {
        let gi = host.leaf_by_uuid(&leaf.uuid).unwrap().gpu_instance;
        let mut want = BTreeMap::new();
        let mut expect = |p: &Path, allowed: bool| {
            let r = if allowed { "ENXIO" } else { "EPERM" };
            want.insert(p.display().to_string(), r.to_string());
        };
        expect(&dev.join("nvidia0"), leaf.gpu == 0);
        expect(&dev.join("nvidia1"), leaf.gpu == 1);
        expect(&dev.join("nvidiactl"), true);
        for (key, p) in &caps {
            let own = gi.is_some_and(|g| key.starts_with(&format!("gpu0/gi{g}/")));
            expect(p, own || key == "config" || key == "monitor");
        }
        want.insert("/dev/null".into(), "ok".into());
        want.insert("/dev/ptmx".into(), "ok".into());
        assert_eq!(
            results(out),
            want,
            "job {job} on GPU {} ({}, GPU instance {gi:?}):\n{out}",
            leaf.gpu,
            leaf.profile
        );
    }
}
