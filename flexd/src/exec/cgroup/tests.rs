//! The cgroup module's tests: finding the hierarchies, and the limits written into a
//! temporary directory laid out as the kernel lays out cgroup2 and v1 hierarchies.

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

/// A directory laid out as the kernel shows a cgroup: `files` with their contents.
fn cgroup_dir(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// mountinfo lines for a cgroup2 mount at `root/unified` and v1 hierarchies at `root/<name>`.
fn mountinfo(root: &Path, v1: &[&str]) -> String {
    let mut m = format!(
        "26 25 0:23 / {}/unified rw,relatime - cgroup2 cgroup2 rw\n",
        root.display()
    );
    for (i, c) in v1.iter().enumerate() {
        m += &format!(
            "{} 25 0:{} / {}/{c} rw,relatime - cgroup cgroup rw,{c}\n",
            30 + i,
            30 + i,
            root.display()
        );
    }
    m
}

const LIMITS: fn() -> Limits = || Limits {
    mem_bytes: 64 << 20,
    pids_max: 64,
    cpus: vec![2, 3],
    devices: Vec::new(),
};

/// [`Hierarchy::set_up`] on a host whose kernel loads BPF device programs.
fn set_up(mountinfo: &str) -> Result<Hierarchy, String> {
    Hierarchy::set_up_with(mountinfo, || Ok(()))
}

#[test]
fn v1_hierarchies_are_found_by_controller() {
    let info = format!(
        "{HYBRID}28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
         29 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
         30 25 0:27 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
    );
    assert_eq!(
        v1_mount_in(&info, Controller::Memory),
        Some(PathBuf::from("/sys/fs/cgroup/memory"))
    );
    assert_eq!(
        v1_mount_in(&info, Controller::Pids),
        Some(PathBuf::from("/sys/fs/cgroup/pids"))
    );
    assert_eq!(v1_mount_in(&info, Controller::Cpuset), None);
    assert_eq!(
        v1_mount_in(HYBRID, Controller::Memory),
        None,
        "cgroup2 is not v1"
    );
}

#[test]
fn a_pure_v2_host_enables_the_controllers_and_limits_in_the_jobs_cgroup() {
    let tmp = tempfile::tempdir().unwrap();
    let mount = tmp.path().join("unified");
    let all = "cpuset cpu io memory hugetlb pids rdma misc";
    cgroup_dir(
        &mount,
        &[
            ("cgroup.controllers", all),
            ("cgroup.subtree_control", "cpuset cpu io memory pids"),
        ],
    );
    // What the root's subtree_control hands down; `flex` enables nothing yet.
    cgroup_dir(
        &mount.join("flex"),
        &[
            ("cgroup.procs", ""),
            ("cgroup.controllers", "cpuset cpu io memory pids"),
            ("cgroup.subtree_control", ""),
            ("cpuset.mems.effective", "0-1\n"),
        ],
    );
    let h = set_up(&mountinfo(tmp.path(), &[])).unwrap();
    assert_eq!(h.v2, Some(mount.join("flex")));
    assert!(h.controllers.iter().all(|(_, p)| *p == Place::V2), "{h:?}");
    assert!(h
        .describe(Controller::Devices)
        .starts_with("by a BPF device program on cgroup v2 below "));
    // Each controller was enabled for the jobs below `flex` (the last write stays in a file).
    assert_eq!(read(mount.join("flex/cgroup.subtree_control")), "+cpuset");

    let cg = JobCgroup::create(&h, 7, 99).unwrap();
    assert_eq!(cg.path, mount.join("flex/job-7.99"));
    assert_eq!(cg.other_v1().count(), 0);
    std::fs::write(cg.path.join("memory.swap.max"), "max").unwrap();
    cg.apply(&LIMITS()).unwrap();
    assert_eq!(read(cg.path.join("memory.max")), (64u64 << 20).to_string());
    assert_eq!(read(cg.path.join("memory.swap.max")), "0");
    assert_eq!(read(cg.path.join("pids.max")), "64");
    assert_eq!(read(cg.path.join("cpuset.cpus")), "2,3");
    assert_eq!(read(cg.path.join("cpuset.mems")), "0-1");

    assert!(!cg.oom_killed());
    std::fs::write(
        cg.path.join("memory.events"),
        "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
    )
    .unwrap();
    assert!(cg.oom_killed());
}

#[test]
fn a_controller_the_root_has_not_enabled_is_enabled_there_first() {
    let tmp = tempfile::tempdir().unwrap();
    let mount = tmp.path().join("unified");
    cgroup_dir(
        &mount,
        &[
            ("cgroup.controllers", "memory pids"),
            ("cgroup.subtree_control", ""),
        ],
    );
    cgroup_dir(
        &mount.join("flex"),
        &[("cgroup.procs", ""), ("cgroup.controllers", "pids")],
    );
    limits::enable_v2(&mount, &mount.join("flex"), Controller::Memory).unwrap();
    assert_eq!(read(mount.join("cgroup.subtree_control")), "+memory");
    assert_eq!(read(mount.join("flex/cgroup.subtree_control")), "+memory");
    let e = limits::enable_v2(&mount, &mount.join("flex"), Controller::Cpuset).unwrap_err();
    assert!(e.contains("does not list cpuset"), "{e}");
}

#[test]
fn a_hybrid_host_limits_on_the_v1_hierarchies() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // The cgroup2 mount of a hybrid host has no controllers but hugetlb.
    cgroup_dir(
        &root.join("unified"),
        &[
            ("cgroup.controllers", "hugetlb"),
            ("cgroup.subtree_control", ""),
        ],
    );
    cgroup_dir(&root.join("unified/flex"), &[("cgroup.procs", "")]);
    for c in ["memory", "pids", "devices"] {
        cgroup_dir(&root.join(c).join("flex"), &[("cgroup.procs", "")]);
    }
    // A new v1 cpuset has neither CPUs nor memory nodes.
    cgroup_dir(
        &root.join("cpuset"),
        &[("cpuset.cpus", "0-7\n"), ("cpuset.mems", "0\n")],
    );
    cgroup_dir(
        &root.join("cpuset/flex"),
        &[
            ("cgroup.procs", ""),
            ("cpuset.cpus", "\n"),
            ("cpuset.mems", "\n"),
        ],
    );
    let h = set_up(&mountinfo(root, &["memory", "pids", "cpuset", "devices"])).unwrap();
    for (c, p) in &h.controllers {
        assert_eq!(*p, Place::V1(root.join(c.name()).join("flex")));
    }
    assert_eq!(read(root.join("cpuset/flex/cpuset.cpus")), "0-7");
    assert_eq!(read(root.join("cpuset/flex/cpuset.mems")), "0");
    assert!(h
        .describe(Controller::Pids)
        .starts_with("on cgroup v1 below "));

    let cg = JobCgroup::create(&h, 8, 100).unwrap();
    assert_eq!(
        cg.path,
        root.join("unified/flex/job-8.100"),
        "tracked on cgroup2"
    );
    let dir = |c: &str| root.join(c).join("flex/job-8.100");
    assert_eq!(
        cg.other_v1().collect::<Vec<_>>(),
        [dir("memory"), dir("pids"), dir("cpuset"), dir("devices")]
    );
    // With swap accounting the kernel shows memsw.
    std::fs::write(dir("memory").join("memory.memsw.limit_in_bytes"), "").unwrap();
    std::fs::write(dir("devices").join("devices.deny"), "").unwrap();
    let gpu = |minor| devices::Dev { major: 195, minor };
    cg.apply(&Limits {
        devices: vec![gpu(1), gpu(3)],
        ..LIMITS()
    })
    .unwrap();
    assert_eq!(
        read(dir("devices").join("devices.deny")),
        "c 195:1 rwm\nc 195:3 rwm\n",
        "one rule per write"
    );
    let bytes = (64u64 << 20).to_string();
    assert_eq!(read(dir("memory").join("memory.limit_in_bytes")), bytes);
    assert_eq!(
        read(dir("memory").join("memory.memsw.limit_in_bytes")),
        bytes
    );
    assert_eq!(read(dir("pids").join("pids.max")), "64");
    assert_eq!(read(dir("cpuset").join("cpuset.cpus")), "2,3");
    assert_eq!(read(dir("cpuset").join("cpuset.mems")), "0");

    // A job without cores still gets a cpuset it can join: the parent's CPUs.
    let none = JobCgroup::create(&h, 9, 100).unwrap();
    none.apply(&Limits::default()).unwrap();
    assert_eq!(read(root.join("cpuset/flex/job-9.100/cpuset.cpus")), "0-7");
    assert!(!root
        .join("memory/flex/job-9.100/memory.limit_in_bytes")
        .exists());

    // OOM kills: memory.oom_control's count, else whether the limit was hit.
    let mem = dir("memory");
    std::fs::write(
        mem.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    )
    .unwrap();
    std::fs::write(mem.join("memory.failcnt"), "5\n").unwrap();
    assert!(!cg.oom_killed(), "oom_kill 0 wins over failcnt");
    std::fs::write(
        mem.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
    )
    .unwrap();
    assert!(cg.oom_killed());
    std::fs::write(
        mem.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\n",
    )
    .unwrap();
    assert!(cg.oom_killed(), "a kernel before 4.13: failcnt");
    std::fs::write(mem.join("memory.failcnt"), "0\n").unwrap();
    assert!(!cg.oom_killed());
    std::fs::write(mem.join("memory.max_usage_in_bytes"), "1234\n").unwrap();
    assert_eq!(cg.peak_memory(), Some(1234));
}

#[test]
fn a_missing_controller_is_said_and_jobs_still_get_a_cgroup() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    cgroup_dir(&root.join("unified"), &[("cgroup.controllers", "")]);
    cgroup_dir(&root.join("unified/flex"), &[("cgroup.procs", "")]);
    cgroup_dir(&root.join("memory/flex"), &[("cgroup.procs", "")]);
    let h = Hierarchy::set_up_with(&mountinfo(root, &["memory"]), || {
        Err("the kernel refuses a BPF device program (Operation not permitted)".into())
    })
    .unwrap();
    let missing: Vec<_> = h.missing().map(|(c, _)| c).collect();
    assert_eq!(
        missing,
        [Controller::Pids, Controller::Cpuset, Controller::Devices]
    );
    let why = h.describe(Controller::Devices);
    assert!(
        why.contains("no cgroup v1 devices hierarchy") && why.contains("refuses a BPF"),
        "{why}"
    );
    assert!(
        h.describe(Controller::Pids)
            .contains("no cgroup v1 pids hierarchy"),
        "{}",
        h.describe(Controller::Pids)
    );
    let cg = JobCgroup::create(&h, 1, 2).unwrap();
    cg.apply(&LIMITS()).unwrap();
    assert_eq!(
        read(root.join("memory/flex/job-1.2/memory.limit_in_bytes")),
        (64u64 << 20).to_string()
    );
    assert!(!root.join("unified/flex/job-1.2/pids.max").exists());

    // Without any hierarchy, no cgroup at all.
    assert!(Hierarchy::set_up("").is_err());
}
