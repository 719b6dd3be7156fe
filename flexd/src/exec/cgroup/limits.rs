//! The files that limit a job, as Slurm's cgroup/v2 and cgroup/v1 plugins write them, and the
//! ones that say whether the kernel's OOM killer took one of its processes.
//!
//! | limit | cgroup2 | cgroup v1 |
//! |---|---|---|
//! | host memory | `memory.max`, `memory.swap.max` = 0 | `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes` (with swap accounting) |
//! | processes and threads | `pids.max` | `pids.max` |
//! | cores | `cpuset.cpus`, `cpuset.mems` | `cpuset.cpus`, `cpuset.mems` |
//! | GPU devices not given | a BPF device program ([`super::bpf`]) | `devices.deny` ([`super::devices`]) |
//! | OOM kills | `memory.events` `oom_kill` | `memory.oom_control` `oom_kill` (Linux 4.13), else `memory.failcnt` |
//!
//! Everything here reads and writes plain files below the directories it is given, so the
//! tests run it on a temporary directory laid out like the kernel's.

use super::devices::{self, Dev};
use super::{bpf, Controller};
use std::path::Path;

/// What a job may use; zero or empty: no limit of that kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Host memory in bytes (the allocation's); swap is not allowed beyond it.
    pub mem_bytes: u64,
    /// Processes and threads.
    pub pids_max: u32,
    /// The CPUs the job runs on.
    pub cpus: Vec<u32>,
    /// The GPU devices the job may not open.
    pub devices: Vec<Dev>,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value)
        .map_err(|e| format!("cannot write {value} to {}: {e}", path.display()))
}

/// Whether the space-separated list in `path` names `name`.
fn lists(path: &Path, name: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.split_whitespace().any(|w| w == name))
}

/// Make `c` available to the job cgroups below `flex` on the cgroup2 hierarchy mounted at
/// `mount`: enabled in the root's `cgroup.subtree_control` (the root, unlike other cgroups,
/// may hold processes and enable controllers) and in `flex`'s. Err says why it is not.
pub(crate) fn enable_v2(mount: &Path, flex: &Path, c: Controller) -> Result<(), String> {
    let name = c.name();
    if !lists(&mount.join("cgroup.controllers"), name) {
        return Err(format!(
            "{} does not list {name}: it is bound to a v1 hierarchy or disabled",
            mount.join("cgroup.controllers").display()
        ));
    }
    if !lists(&flex.join("cgroup.controllers"), name) {
        write(&mount.join("cgroup.subtree_control"), &format!("+{name}"))?;
    }
    if !lists(&flex.join("cgroup.subtree_control"), name) {
        write(&flex.join("cgroup.subtree_control"), &format!("+{name}"))?;
    }
    Ok(())
}

/// Ready the `flex` directory of `c`'s v1 hierarchy rooted at `root`: a v1 cpuset takes no
/// process until it has CPUs and memory nodes, which its children copy from it.
pub(crate) fn prepare_v1(root: &Path, flex: &Path, c: Controller) -> Result<(), String> {
    if c != Controller::Cpuset {
        return Ok(());
    }
    for file in ["cpuset.cpus", "cpuset.mems"] {
        if read(&flex.join(file))?.trim().is_empty() {
            write(&flex.join(file), read(&root.join(file))?.trim())?;
        }
    }
    Ok(())
}

/// CPUs as the kernel takes a list: `0,1,5`.
fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Write `c`'s limits into the job's cgroup `dir` on cgroup2, below `parent`.
pub(crate) fn write_v2(dir: &Path, parent: &Path, c: Controller, l: &Limits) -> Result<(), String> {
    match c {
        Controller::Memory if l.mem_bytes > 0 => {
            write(&dir.join("memory.max"), &l.mem_bytes.to_string())?;
            // Without swap accounting (swapaccount=0) there is no file, and no swap to limit.
            let swap = dir.join("memory.swap.max");
            if swap.exists() {
                write(&swap, "0")?;
            }
        }
        Controller::Pids if l.pids_max > 0 => {
            write(&dir.join("pids.max"), &l.pids_max.to_string())?;
        }
        Controller::Cpuset if !l.cpus.is_empty() => {
            write(&dir.join("cpuset.cpus"), &cpu_list(&l.cpus))?;
            // The memory nodes the job's parent may use now (empty would mean the same, but
            // says nothing to whoever reads the job's cgroup).
            let mems = read(&parent.join("cpuset.mems.effective")).unwrap_or_default();
            if !mems.trim().is_empty() {
                write(&dir.join("cpuset.mems"), mems.trim())?;
            }
        }
        Controller::Devices => bpf::attach(dir, &l.devices)?,
        _ => {}
    }
    Ok(())
}

/// Write `c`'s limits into the job's directory `dir` on its v1 hierarchy, below `parent`.
pub(crate) fn write_v1(dir: &Path, parent: &Path, c: Controller, l: &Limits) -> Result<(), String> {
    match c {
        Controller::Memory if l.mem_bytes > 0 => {
            let bytes = l.mem_bytes.to_string();
            write(&dir.join("memory.limit_in_bytes"), &bytes)?;
            // With swap accounting, memory and swap together: no swap beyond the limit.
            let memsw = dir.join("memory.memsw.limit_in_bytes");
            if memsw.exists() {
                write(&memsw, &bytes)?;
            }
        }
        Controller::Pids if l.pids_max > 0 => {
            write(&dir.join("pids.max"), &l.pids_max.to_string())?;
        }
        Controller::Cpuset => {
            // A v1 cpuset must have CPUs and memory nodes before a process can join it, even
            // for a job that was given no cores: those of the parent, then.
            let cpus = match l.cpus.is_empty() {
                true => read(&parent.join("cpuset.cpus"))?.trim().to_string(),
                false => cpu_list(&l.cpus),
            };
            if let Err(why) = write(&dir.join("cpuset.cpus"), &cpus) {
                // Cores the parent does not have (a topology file that names others): the job
                // keeps its affinity only.
                let theirs = read(&parent.join("cpuset.cpus"))?;
                write(&dir.join("cpuset.cpus"), theirs.trim()).map_err(|_| why)?;
            }
            let mems = read(&parent.join("cpuset.mems"))?;
            write(&dir.join("cpuset.mems"), mems.trim())?;
        }
        Controller::Devices => devices::write_v1(dir, &l.devices)?,
        _ => {}
    }
    Ok(())
}

/// The value of the `key value` line `key` in `text`.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// How many processes of the cgroup2 cgroup `dir` the OOM killer killed.
pub(crate) fn oom_kills_v2(dir: &Path) -> u64 {
    read(&dir.join("memory.events"))
        .ok()
        .and_then(|t| keyed(&t, "oom_kill"))
        .unwrap_or(0)
}

/// Whether the OOM killer took a process of the v1 memory cgroup `dir`: `memory.oom_control`'s
/// `oom_kill` count where the kernel has it (4.13), else whether the limit was ever hit
/// (`memory.failcnt`), as Slurm's cgroup/v1 reads it.
pub(crate) fn oom_killed_v1(dir: &Path) -> bool {
    let control = read(&dir.join("memory.oom_control")).unwrap_or_default();
    match keyed(&control, "oom_kill") {
        Some(n) => n > 0,
        None => read(&dir.join("memory.failcnt"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0),
    }
}
