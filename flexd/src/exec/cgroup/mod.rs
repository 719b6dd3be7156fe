//! Job containment with cgroup v2. A process group holds a job only as long as the job does not
//! leave it (`setsid`, a daemon that double-forks into a new session); a cgroup holds every
//! process the job ever forks. When flexd runs as root and a cgroup2 hierarchy is mounted and
//! writable (at /sys/fs/cgroup, or at /sys/fs/cgroup/unified on a hybrid host), each job's
//! first process joins its own cgroup `<mount>/flex/job-<id>.<supervisor pid>` before it drops
//! privileges, and the job's end kills the whole cgroup (`cgroup.kill`; on kernels without it,
//! SIGKILL to every member while the cgroup is frozen) and removes it. Elsewhere jobs are held by
//! their process group only, and flexd says so once when it starts.
//!
//! No controller is enabled: the cgroup only tracks and kills, so it works below any parent.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory below the cgroup2 mount that holds the jobs' cgroups.
const BASE: &str = "flex";

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

/// The directory jobs' cgroups go in, created when missing; Err says why jobs are held by their
/// process group only.
pub(crate) fn probe() -> Result<PathBuf, String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("flexd does not run as root".into());
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mount = mount_point_in(&info).ok_or("no cgroup2 hierarchy is mounted")?;
    let base = mount.join(BASE);
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
        let cg = JobCgroup { path };
        if !cg.populated() && std::fs::remove_dir(&cg.path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Is `path` a job cgroup below some cgroup2 mount's `flex` directory? (A run file names it;
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

/// One job's cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobCgroup {
    pub path: PathBuf,
}

impl JobCgroup {
    /// Create the cgroup of `job`, supervised by `supervisor`, below `base` (from [`probe`]).
    pub(crate) fn create(base: &Path, job: u64, supervisor: u32) -> std::io::Result<JobCgroup> {
        let path = base.join(format!("job-{job}.{supervisor}"));
        std::fs::create_dir(&path)?;
        Ok(JobCgroup { path })
    }

    /// An existing job cgroup named by a run file.
    pub(crate) fn existing(path: &Path) -> Option<JobCgroup> {
        (is_job_cgroup(path) && path.join("cgroup.procs").exists()).then(|| JobCgroup {
            path: path.to_path_buf(),
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

    /// Kill everything, wait up to `wait` for the cgroup to empty, and remove it. Returns
    /// whether it is gone.
    pub(crate) fn kill_and_remove(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            self.kill_all();
            if !self.populated() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::remove_dir(&self.path).is_ok() || !self.path.exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:7 - cgroup2 cgroup2 rw
27 25 0:24 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
";

    #[test]
    fn the_cgroup2_mount_is_found_on_unified_and_hybrid_hosts() {
        assert_eq!(
            mount_point_in(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified = "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n\
                       31 1 0:27 / /mnt/other\\040dir rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            mount_point_in(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(
            mount_point_in("31 1 0:27 / /mnt/other\\040dir rw - cgroup2 cgroup2 rw\n"),
            Some(PathBuf::from("/mnt/other dir"))
        );
        assert_eq!(mount_point_in(&HYBRID.replace("cgroup2", "cgroup")), None);
        assert_eq!(mount_point_in(""), None);
    }

    #[test]
    fn only_job_cgroups_below_flex_are_accepted() {
        assert!(is_job_cgroup(Path::new("/sys/fs/cgroup/flex/job-4.123")));
        assert!(!is_job_cgroup(Path::new("/sys/fs/cgroup/flex")));
        assert!(!is_job_cgroup(Path::new("/sys/fs/cgroup/other/job-4.1")));
        assert!(!is_job_cgroup(Path::new("/sys/fs/cgroup/flex/../job-4.1")));
        assert!(!is_job_cgroup(Path::new("flex/job-4.1")));
        assert!(!is_job_cgroup(Path::new("/etc/passwd")));
    }
}
