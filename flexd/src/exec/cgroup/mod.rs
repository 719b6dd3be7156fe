//! Job containment and limits with cgroups. A process group holds a job only as long as the
//! job does not leave it (`setsid`, a daemon that double-forks into a new session); a cgroup
//! holds every process the job ever forks. When flexd runs as root, each job's first process
//! joins its own cgroup `flex/job-<id>.<supervisor pid>` before it drops privileges, and the
//! job's end kills the whole cgroup (`cgroup.kill`; on kernels without it, SIGKILL to every
//! member while the cgroup is frozen) and removes it.
//!
//! The cgroup also limits the job, as Slurm's cgroup plugins do ([`limits`]): its memory (the
//! allocation's host memory, without swap), its processes and threads (`job_pids_max`) and its
//! CPUs (the allocated cores, as a cpuset the job cannot leave, unlike an affinity it can
//! reset). Each controller is taken from the cgroup2 hierarchy when it is enabled there (pure
//! v2 hosts; flexd enables it in `cgroup.subtree_control` down to its `flex` directory), else
//! from its own cgroup v1 hierarchy (hybrid hosts), where the job gets a directory of the
//! same name. A controller found nowhere is said once at flexd's start; jobs run without it.
//!
//! Devices are the exception ([`devices`]): the GPU device nodes a job was not given are
//! denied in its v1 devices cgroup where that hierarchy is mounted (hybrid and v1 hosts, as
//! systemd and Slurm's cgroup/v1 do there), else by a BPF device program attached to its
//! cgroup2 cgroup ([`bpf`]; cgroup2 has no devices controller).
//!
//! Without root or any cgroup hierarchy jobs are held by their process group only, and flexd
//! says so once when it starts.

pub(crate) mod bpf;
pub(crate) mod devices;
#[cfg(test)]
mod devices_tests;
pub(crate) mod limits;
#[cfg(test)]
mod tests;

pub(crate) use limits::Limits;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory below each hierarchy's root that holds the jobs' cgroups.
const BASE: &str = "flex";

/// A controller that limits jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Controller {
    Memory,
    Pids,
    Cpuset,
    /// The GPU device nodes a job may open.
    Devices,
}

impl Controller {
    pub(crate) const ALL: [Controller; 4] = [
        Controller::Memory,
        Controller::Pids,
        Controller::Cpuset,
        Controller::Devices,
    ];

    /// Its name in `cgroup.controllers` and in a v1 mount's options.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpuset => "cpuset",
            Controller::Devices => "devices",
        }
    }
}

/// Where a controller limits jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In each job's cgroup on the cgroup2 hierarchy.
    V2,
    /// On its own cgroup v1 hierarchy, below this `flex` directory.
    V1(PathBuf),
    /// Nowhere, and why.
    Missing(String),
}

impl Place {
    pub(crate) fn enforced(&self) -> bool {
        !matches!(self, Place::Missing(_))
    }
}

/// How this host holds and limits jobs: found once by flexd (to say it) and once by `flexd
/// supervise` (for every job it starts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// The `flex` directory on the cgroup2 mount; None on a host without a usable one.
    pub v2: Option<PathBuf>,
    /// Each of [`Controller::ALL`], in that order.
    pub controllers: Vec<(Controller, Place)>,
}

impl Hierarchy {
    /// Set up the `flex` directories on the hierarchies `mountinfo` names: create them, enable
    /// the controllers on cgroup2, give a v1 cpuset its CPUs and memory nodes. Err when jobs
    /// can have no cgroup at all, saying why.
    pub(crate) fn set_up(mountinfo: &str) -> Result<Hierarchy, String> {
        Self::set_up_with(mountinfo, bpf::supported)
    }

    /// [`Hierarchy::set_up`], with `bpf` saying whether BPF device programs can be loaded.
    pub(crate) fn set_up_with(
        mountinfo: &str,
        bpf: impl Fn() -> Result<(), String>,
    ) -> Result<Hierarchy, String> {
        let v2 = mount_point_in(mountinfo).map(|m| (flex_dir(&m), m));
        let v2_why = match &v2 {
            None => "no cgroup2 hierarchy is mounted".to_string(),
            Some((Err(why), _)) => why.clone(),
            Some((Ok(_), _)) => String::new(),
        };
        let v2 = v2.and_then(|(flex, mount)| Some((flex.ok()?, mount)));
        let controllers = Controller::ALL
            .into_iter()
            .map(|c| {
                if c == Controller::Devices {
                    return (c, devices_place(mountinfo, v2.is_some(), &v2_why, &bpf));
                }
                let on_v2 = match &v2 {
                    Some((flex, mount)) => limits::enable_v2(mount, flex, c),
                    None => Err(v2_why.clone()),
                };
                let place = match (on_v2, v1_mount_in(mountinfo, c)) {
                    (Ok(()), _) => Place::V2,
                    (Err(why), None) => Place::Missing(format!(
                        "not on the cgroup2 hierarchy ({why}) and no cgroup v1 {} hierarchy \
                         is mounted",
                        c.name()
                    )),
                    (Err(_), Some(root)) => match flex_dir(&root) {
                        Ok(flex) => match limits::prepare_v1(&root, &flex, c) {
                            Ok(()) => Place::V1(flex),
                            Err(why) => Place::Missing(why),
                        },
                        Err(why) => Place::Missing(why),
                    },
                };
                (c, place)
            })
            .collect::<Vec<_>>();
        let any_v1 = controllers.iter().any(|(_, p)| matches!(p, Place::V1(_)));
        if v2.is_none() && !any_v1 {
            return Err(v2_why);
        }
        Ok(Hierarchy {
            v2: v2.map(|(flex, _)| flex),
            controllers,
        })
    }

    /// The controllers found nowhere, with why.
    pub(crate) fn missing(&self) -> impl Iterator<Item = (Controller, &str)> {
        self.controllers.iter().filter_map(|(c, p)| match p {
            Place::Missing(why) => Some((*c, why.as_str())),
            _ => None,
        })
    }

    /// Every `flex` directory jobs' cgroups go in.
    pub(crate) fn bases(&self) -> impl Iterator<Item = &Path> {
        self.v2
            .iter()
            .map(PathBuf::as_path)
            .chain(self.controllers.iter().filter_map(|(_, p)| match p {
                Place::V1(flex) => Some(flex.as_path()),
                _ => None,
            }))
    }

    /// Where `c` limits jobs, or why it does not (the log, `flexcontrol show config`).
    pub(crate) fn describe(&self, c: Controller) -> String {
        let place = self
            .controllers
            .iter()
            .find(|(k, _)| *k == c)
            .map(|(_, p)| p);
        match (place, &self.v2) {
            (Some(Place::V2), Some(flex)) if c == Controller::Devices => {
                format!(
                    "by a BPF device program on cgroup v2 below {}",
                    flex.display()
                )
            }
            (Some(Place::V2), Some(flex)) => format!("on cgroup v2 below {}", flex.display()),
            (Some(Place::V1(flex)), _) => format!("on cgroup v1 below {}", flex.display()),
            (Some(Place::Missing(why)), _) => format!("not enforced: {why}"),
            _ => "not enforced".into(),
        }
    }
}

/// Where jobs' devices are limited: the v1 devices hierarchy where one is mounted, else a BPF
/// program on cgroup2 (`v2`: there is a usable cgroup2 `flex` directory, or why not).
fn devices_place(
    mountinfo: &str,
    v2: bool,
    v2_why: &str,
    bpf: &impl Fn() -> Result<(), String>,
) -> Place {
    if let Some(root) = v1_mount_in(mountinfo, Controller::Devices) {
        return match flex_dir(&root) {
            Ok(flex) => Place::V1(flex),
            Err(why) => Place::Missing(why),
        };
    }
    let why = match v2 {
        true => match bpf() {
            Ok(()) => return Place::V2,
            Err(why) => why,
        },
        false => v2_why.to_string(),
    };
    Place::Missing(format!(
        "no cgroup v1 devices hierarchy is mounted and no BPF device program on cgroup2: {why}"
    ))
}

/// `flex` below a hierarchy's root, created when missing.
fn flex_dir(root: &Path) -> Result<PathBuf, String> {
    let base = root.join(BASE);
    match std::fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", base.display())),
    }
    if !base.join("cgroup.procs").exists() {
        return Err(format!("{} is not a cgroup", base.display()));
    }
    Ok(base)
}

/// Which controller a v1 directory belongs to, from the files the kernel shows in it.
fn controller_of(dir: &Path) -> Option<Controller> {
    [
        (Controller::Memory, "memory.limit_in_bytes"),
        (Controller::Pids, "pids.max"),
        (Controller::Cpuset, "cpuset.cpus"),
        (Controller::Devices, "devices.list"),
    ]
    .into_iter()
    .find(|(_, f)| dir.join(f).exists())
    .map(|(c, _)| c)
}

/// Where the cgroup v1 hierarchy of `c` is mounted, from `/proc/self/mountinfo` text.
pub(crate) fn v1_mount_in(mountinfo: &str, c: Controller) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut fields = right.split_whitespace();
        let (fstype, _source, options) = (fields.next()?, fields.next()?, fields.next()?);
        let mount = left.split_whitespace().nth(4)?;
        (fstype == "cgroup" && options.split(',').any(|o| o == c.name()))
            .then(|| PathBuf::from(unescape(mount)))
    })
}

/// Where the cgroup2 hierarchy is mounted, from `/proc/self/mountinfo` text: `/sys/fs/cgroup`
/// when it is one, else the first cgroup2 mount.
pub(crate) fn mount_point_in(mountinfo: &str) -> Option<PathBuf> {
    let mounts: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| {
            // id parent major:minor root mount-point options [optional...] - fstype source opts
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount = left.split_whitespace().nth(4)?;
            (fstype == "cgroup2").then(|| PathBuf::from(unescape(mount)))
        })
        .collect();
    let preferred = Path::new("/sys/fs/cgroup");
    mounts
        .iter()
        .find(|m| m.as_path() == preferred)
        .or_else(|| mounts.first())
        .cloned()
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How jobs are held and limited on this host; Err says why jobs are held by their process
/// group only.
pub(crate) fn probe() -> Result<Hierarchy, String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("flexd does not run as root".into());
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    Hierarchy::set_up(&info)
}

/// Keep the kernel's OOM killer off this process and those it forks (flexd and the
/// supervisors, as root): a job at its memory limit is killed in its own cgroup, and one that
/// exhausts the host must not take its supervisor (whose end record it needs) or flexd with
/// it. The job's own processes go back to 0 before they run ([`super::spawn`]).
pub(crate) fn protect_from_oom() -> std::io::Result<()> {
    std::fs::write("/proc/self/oom_score_adj", "-1000")
}

/// Remove the empty cgroups below `base` whose supervisor is gone (one killed before it could
/// remove its own, on a host with no flexd to do it since). Returns how many went.
pub(crate) fn sweep(base: &Path) -> usize {
    let Ok(dir) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for e in dir.flatten() {
        let path = e.path();
        let supervisor = e
            .file_name()
            .to_str()
            .filter(|n| n.starts_with("job-"))
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok());
        let Some(pid) = supervisor else {
            continue;
        };
        // A live supervisor may not have moved its job in yet: its cgroup is not stale.
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let cg = JobCgroup::tracking_only(path);
        if !cg.populated() && std::fs::remove_dir(&cg.path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Is `path` a job cgroup below some hierarchy's `flex` directory? (A run file names it;
/// flexd writes only to such paths.)
pub(crate) fn is_job_cgroup(path: &Path) -> bool {
    let name_ok = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("job-") && !n.contains('/'));
    let parent_ok = path
        .parent()
        .is_some_and(|p| p.file_name().is_some_and(|n| n == BASE));
    name_ok
        && parent_ok
        && path.is_absolute()
        && path.components().all(|c| {
            !matches!(
                c,
                std::path::Component::ParentDir | std::path::Component::CurDir
            )
        })
}

/// One job's cgroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobCgroup {
    /// The cgroup that holds every process of the job, which the job's end kills and waits
    /// for: on cgroup2 where it is mounted, else the job's first v1 directory.
    pub path: PathBuf,
    /// The controllers limiting the job in `path` on cgroup2.
    pub v2: Vec<Controller>,
    /// The job's directories on v1 hierarchies, by controller (`path` among them on a host
    /// without cgroup2).
    pub v1: Vec<(Controller, PathBuf)>,
}

impl JobCgroup {
    /// Create the cgroups of `job`, supervised by `supervisor`, in every hierarchy of `h`.
    pub(crate) fn create(h: &Hierarchy, job: u64, supervisor: u32) -> std::io::Result<JobCgroup> {
        let name = format!("job-{job}.{supervisor}");
        let mut made: Vec<PathBuf> = Vec::new();
        let mut mkdir = |base: &Path| -> std::io::Result<PathBuf> {
            let p = base.join(&name);
            std::fs::create_dir(&p)?;
            made.push(p.clone());
            Ok(p)
        };
        let built = (|| {
            let v2_path = h.v2.as_deref().map(&mut mkdir).transpose()?;
            let mut v1 = Vec::new();
            for (c, place) in &h.controllers {
                if let Place::V1(flex) = place {
                    v1.push((*c, mkdir(flex)?));
                }
            }
            let path = match (&v2_path, v1.first()) {
                (Some(p), _) => p.clone(),
                (None, Some((_, p))) => p.clone(),
                (None, None) => return Err(std::io::Error::other("no cgroup hierarchy")),
            };
            let v2 = match v2_path {
                Some(_) => h
                    .controllers
                    .iter()
                    .filter(|(_, p)| *p == Place::V2)
                    .map(|(c, _)| *c)
                    .collect(),
                None => Vec::new(),
            };
            Ok(JobCgroup { path, v2, v1 })
        })();
        if built.is_err() {
            for p in made.iter().rev() {
                let _ = std::fs::remove_dir(p);
            }
        }
        built
    }

    /// A cgroup known by its path only (a stale one, or one a run file names).
    fn tracking_only(path: PathBuf) -> JobCgroup {
        JobCgroup {
            path,
            v2: Vec::new(),
            v1: Vec::new(),
        }
    }

    /// An existing job cgroup named by a run file, with the v1 directories it names beside.
    pub(crate) fn existing(path: &Path, v1: &[PathBuf]) -> Option<JobCgroup> {
        let ok = |p: &Path| is_job_cgroup(p) && p.join("cgroup.procs").exists();
        ok(path).then(|| JobCgroup {
            v1: v1
                .iter()
                .filter(|p| p.as_path() != path && ok(p))
                .filter_map(|p| Some((controller_of(p)?, p.clone())))
                .collect(),
            ..JobCgroup::tracking_only(path.to_path_buf())
        })
    }

    /// The v1 directories besides `path`, which the job joins one by one.
    pub(crate) fn other_v1(&self) -> impl Iterator<Item = &Path> {
        self.v1
            .iter()
            .map(|(_, p)| p.as_path())
            .filter(|p| *p != self.path)
    }

    /// Write the job's limits into its cgroups; Err says which could not be set.
    pub(crate) fn apply(&self, l: &Limits) -> Result<(), String> {
        let parent = |p: &Path| p.parent().unwrap_or(p).to_path_buf();
        for &c in &self.v2 {
            limits::write_v2(&self.path, &parent(&self.path), c, l)?;
        }
        for (c, dir) in &self.v1 {
            limits::write_v1(dir, &parent(dir), *c, l)?;
        }
        Ok(())
    }

    /// Whether the kernel's OOM killer killed a process of the job (read before removal).
    pub(crate) fn oom_killed(&self) -> bool {
        if self.v2.contains(&Controller::Memory) {
            return limits::oom_kills_v2(&self.path) > 0;
        }
        self.v1
            .iter()
            .find(|(c, _)| *c == Controller::Memory)
            .is_some_and(|(_, dir)| limits::oom_killed_v1(dir))
    }

    /// The job's peak memory use in bytes: cgroup2's `memory.peak` (Linux 5.19), or v1's
    /// `memory.max_usage_in_bytes`.
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        let read = |p: PathBuf| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
        read(self.path.join("memory.peak")).or_else(|| {
            let (_, dir) = self.v1.iter().find(|(c, _)| *c == Controller::Memory)?;
            read(dir.join("memory.max_usage_in_bytes"))
        })
    }

    /// The file a process writes "0" to in order to join.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// The processes in the cgroup now.
    pub(crate) fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Whether any process is left (from `cgroup.events`).
    pub(crate) fn populated(&self) -> bool {
        match std::fs::read_to_string(self.path.join("cgroup.events")) {
            Ok(ev) => ev.lines().any(|l| l.trim() == "populated 1"),
            Err(_) => !self.pids().is_empty(),
        }
    }

    /// Send `sig` to every process in the cgroup.
    pub(crate) fn signal(&self, sig: Signal) {
        for pid in self.pids() {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// SIGKILL everything in the cgroup, including processes forked meanwhile.
    pub(crate) fn kill_all(&self) {
        if std::fs::write(self.path.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        // Kernels before 5.14: freeze so nothing forks between the listing and the kills.
        let freeze = self.path.join("cgroup.freeze");
        let frozen = std::fs::write(&freeze, "1").is_ok();
        for _ in 0..100 {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            if frozen {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if frozen {
            let _ = std::fs::write(&freeze, "0");
        }
    }

    /// Kill everything, wait up to `wait` for the cgroup to empty, and remove it with the v1
    /// directories beside it. Returns whether all are gone.
    pub(crate) fn kill_and_remove(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            self.kill_all();
            if !self.populated() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let remove = |p: &Path| std::fs::remove_dir(p).is_ok() || !p.exists();
        // A v1 directory lets go of its last process a moment after the cgroup2 one does.
        let others = self.other_v1().all(|p| {
            while !remove(p) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            remove(p)
        });
        remove(&self.path) && others
    }
}
