//! GPU device confinement: the numbers found below a device root laid out as the driver lays
//! out `/dev` and `/proc`, what a job is denied, and, as root, the kernel itself refusing a
//! denied node through a v1 devices cgroup and through a BPF program on cgroup2. The nodes
//! are made with mknod with the numbers of a driver that is not loaded: opening an allowed one
//! fails with ENXIO (no driver behind it), a denied one with EPERM (the cgroup's wall).

use super::devices::{mig_minor, Dev, GpuDevices};
use super::*;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Two A100s: GPU 0 split into two 3g.20gb instances (GPU instances 1 and 2, compute
/// instance 0 each), GPU 1 whole.
const TOPOLOGY: &str = r#"
hostname = "devices"
[[numa]]
id = 0
cores = "0-3"
[[gpu]]
index = 0
name = "NVIDIA A100-PCIE-40GB"
memory_gib = 40
numa = 0
pci_bus_id = "00000000:3B:00.0"
mig = [{ profile = "3g.20gb", count = 2 }]
[[gpu]]
index = 1
name = "NVIDIA A100-PCIE-40GB"
memory_gib = 40
numa = 0
pci_bus_id = "00000000:AF:00.0"
"#;

fn host() -> gres_plugin::HostModel {
    let raw = gres_plugin::topology::parse(TOPOLOGY, "test").unwrap();
    gres_plugin::probe::build_host(&raw).unwrap()
}

/// The driver's mig-minors table for GPU minors `0..gpus`: config 1, monitor 2, then each GPU
/// instance's access followed by its eight compute instances'.
fn mig_minors(gpus: u32) -> String {
    let mut t = String::from("config 1\nmonitor 2\n");
    let mut n = 3;
    for g in 0..gpus {
        for gi in 0..15 {
            t += &format!("gpu{g}/gi{gi}/access {n}\n");
            n += 1;
            for ci in 0..8 {
                t += &format!("gpu{g}/gi{gi}/ci{ci}/access {n}\n");
                n += 1;
            }
        }
    }
    t
}

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_job_is_denied_the_gpus_and_mig_instances_it_was_not_given() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let table = mig_minors(2);
    write(root.join("proc/driver/nvidia-caps/mig-minors"), &table);
    write(
        root.join("proc/devices"),
        "Character devices:\n  1 mem\n195 nvidia-frontend\n237 nvidia-caps\n\nBlock devices:\n237 other\n",
    );
    // The driver gave GPU index 0 minor 1 and GPU index 1 minor 0.
    for (bus, minor) in [("0000:3b:00.0", 1), ("0000:af:00.0", 0)] {
        write(
            root.join("proc/driver/nvidia/gpus")
                .join(bus)
                .join("information"),
            &format!("Model: \t\t NVIDIA A100-PCIE-40GB\nDevice Minor: \t {minor}\n"),
        );
    }
    let h = host();
    let d = GpuDevices::discover(root, &h);
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    let cap = |key: &str| Dev {
        major: 237,
        minor: mig_minor(&table, key).unwrap(),
    };
    let gpu = |minor| Dev { major: 195, minor };
    let leaves: Vec<_> = h
        .leaves
        .iter()
        .map(|l| (l.gpu.0, l.uuid.as_str()))
        .collect();
    assert_eq!(leaves.len(), 3, "two instances on GPU 0, GPU 1 whole");
    let gi1 = [cap("gpu1/gi1/access"), cap("gpu1/gi1/ci0/access")];
    let gi2 = [cap("gpu1/gi2/access"), cap("gpu1/gi2/ci0/access")];
    let sorted = |mut v: Vec<Dev>| {
        v.sort();
        v
    };
    // The first instance: its GPU's node and its own capabilities stay open.
    assert_eq!(d.denied([leaves[0]]), sorted(vec![gpu(0), gi2[0], gi2[1]]));
    assert_eq!(d.denied([leaves[1]]), sorted(vec![gpu(0), gi1[0], gi1[1]]));
    // The whole GPU 1 (minor 0): GPU 0's node and every MIG capability are denied.
    assert_eq!(
        d.denied([leaves[2]]),
        sorted(vec![gpu(1), gi1[0], gi1[1], gi2[0], gi2[1]])
    );
    // A job without GPUs gets none; one with all of them is denied nothing.
    assert_eq!(d.denied([]).len(), 6);
    assert!(d.denied(leaves.iter().copied()).is_empty());
    assert!(d
        .summary()
        .starts_with("2 GPU device nodes and 4 MIG capabilities"));

    // Without the driver's table the instances are told apart by their GPU only, and said so.
    std::fs::remove_file(root.join("proc/driver/nvidia-caps/mig-minors")).unwrap();
    let d = GpuDevices::discover(root, &h);
    assert!(d.notes[0].contains("mig-minors"), "{:?}", d.notes);
    assert_eq!(d.denied([leaves[0]]), [gpu(0)]);
    // A root with nothing in it: GPU index as minor, the driver's major.
    let empty = tempfile::tempdir().unwrap();
    let d = GpuDevices::discover(empty.path(), &host());
    assert_eq!(d.denied([leaves[2]]), [gpu(0)]);
}

/// Whether the kernel tests can run here; says why not.
fn as_root() -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        eprintln!("notice: skipped, needs root to make device nodes and cgroups");
    }
    root
}

/// Make a character device node `c major:minor` at `path`.
fn mknod(path: &Path, major: u32, minor: u32) {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    let dev = makedev(major.into(), minor.into());
    mknod(path, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), dev)
        .unwrap_or_else(|e| panic!("mknod {}: {e}", path.display()));
}

/// Open each of `paths` read-write from a process in the cgroup `dir`: "ENXIO", "EPERM", "ok"
/// or the shell's message.
fn opens_in(dir: &Path, paths: &[&Path]) -> Vec<String> {
    let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
    let script = "for f in \"$@\"; do \
                  if e=$( { : <> \"$f\"; } 2>&1 ); then echo ok; else echo \"$e\"; fi; done";
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script).arg("sh").args(paths);
    // SAFETY: only open, write and close between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fd);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            if l.contains("No such device or address") {
                "ENXIO".into()
            } else if l.contains("Operation not permitted") {
                "EPERM".into()
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// A cgroup of this test, removed on drop.
struct TestCgroup(PathBuf);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// GPU 0 and GPU 1 nodes, and a MIG capability of each, in a temporary directory.
fn nodes(tmp: &Path) -> Vec<PathBuf> {
    let nodes = [
        ("nvidia0", 195, 0),
        ("nvidia1", 195, 1),
        ("cap12", 509, 12),
        ("cap13", 509, 13),
    ];
    nodes
        .iter()
        .map(|(name, major, minor)| {
            let p = tmp.join(name);
            mknod(&p, *major, *minor);
            p
        })
        .collect()
}

fn check_wall(cg: &Path, nodes: &[PathBuf]) {
    let paths: Vec<&Path> = nodes
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new("/dev/null"), Path::new("/dev/ptmx")])
        .collect();
    assert_eq!(
        opens_in(cg, &paths),
        ["ENXIO", "EPERM", "ENXIO", "EPERM", "ok", "ok"],
        "gpu0, gpu1, cap12, cap13, /dev/null, /dev/ptmx"
    );
}

const DENY: [Dev; 2] = [
    Dev {
        major: 195,
        minor: 1,
    },
    Dev {
        major: 509,
        minor: 13,
    },
];

#[test]
fn the_v1_devices_controller_refuses_a_denied_node() {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let Some(mount) = v1_mount_in(&info, Controller::Devices) else {
        eprintln!("notice: skipped, no cgroup v1 devices hierarchy is mounted");
        return;
    };
    if !as_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let nodes = nodes(tmp.path());
    let cg = TestCgroup(mount.join(format!("flex-devices-test.{}", std::process::id())));
    std::fs::create_dir(&cg.0).unwrap();
    devices::write_v1(&cg.0, &DENY).unwrap();
    check_wall(&cg.0, &nodes);
}

#[test]
fn a_bpf_device_program_on_cgroup2_refuses_a_denied_node() {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let Some(mount) = mount_point_in(&info) else {
        eprintln!("notice: skipped, no cgroup2 hierarchy is mounted");
        return;
    };
    if !as_root() {
        return;
    }
    if let Err(why) = bpf::supported() {
        eprintln!("notice: skipped, {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let nodes = nodes(tmp.path());
    let cg = TestCgroup(mount.join(format!("flex-devices-test.{}", std::process::id())));
    std::fs::create_dir(&cg.0).unwrap();
    bpf::attach(&cg.0, &DENY).unwrap();
    check_wall(&cg.0, &nodes);
}
