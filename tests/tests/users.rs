//! Jobs of other users, through the real commands run under those users' ids: a job runs with
//! its submitter's uid, gid and groups and creates its files as that user; another user can
//! neither cancel nor signal it nor read its script or environment; a planted symlink cannot
//! redirect its output; flexd's own environment does not reach it; scripts and environments
//! never reach flexd's log.
//!
//! The tests create throwaway users with `useradd` and remove them at the end, and run the
//! commands through `setpriv`; they need root and are skipped with a notice otherwise.

use flex_proto::{JobState, JobView};
use flex_tests::{bin, bin_dir, wait_for, Daemon};
use gres_plugin::JobId;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

const A100: &str = "a100-40gb-x2.toml";

/// useradd and userdel lock /etc/passwd: one at a time within this test binary.
static ACCOUNTS: Mutex<()> = Mutex::new(());

fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("notice: skipped, needs root to create users and run commands as them");
    false
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run an account tool, retrying while another process holds the lock on /etc/passwd.
fn account_tool(args: &[&str]) {
    let _one = ACCOUNTS.lock().unwrap_or_else(|p| p.into_inner());
    for attempt in 0.. {
        let out = Command::new(args[0])
            .args(&args[1..])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e} (install passwd)", args[0]));
        if out.status.success() {
            return;
        }
        // 10: "cannot lock /etc/passwd"
        assert!(
            out.status.code() == Some(10) && attempt < 50,
            "{args:?}: {}",
            text(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A throwaway user; removed (with its group) on drop.
struct User {
    name: String,
    uid: u32,
    gid: u32,
    /// A supplementary group created for it, if any.
    extra_group: Option<String>,
}

impl User {
    /// Create `flx<pid><tag>`, with a supplementary group of its own when `with_group`.
    fn create(tag: &str, with_group: bool) -> User {
        let name = format!("flx{}{tag}", std::process::id());
        let extra_group = with_group.then(|| format!("{name}g"));
        if let Some(g) = &extra_group {
            account_tool(&["groupadd", g]);
        }
        let mut args = vec!["useradd", "-M", "-U", "-s", "/bin/sh"];
        if let Some(g) = &extra_group {
            args.extend(["-G", g.as_str()]);
        }
        args.push(&name);
        account_tool(&args);
        let u = nix::unistd::User::from_name(&name)
            .unwrap()
            .expect("the new user exists");
        User {
            name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
            extra_group,
        }
    }

    /// A command run as this user with its groups, and only the environment given here.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("setpriv");
        c.arg("--reuid")
            .arg(self.uid.to_string())
            .arg("--regid")
            .arg(self.gid.to_string())
            .arg("--init-groups")
            .arg("--")
            .arg(program)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin_dir().display()))
            .env("HOME", "/")
            .env("USER", &self.name);
        c
    }

    /// A flex command as this user against `d`.
    fn flex(&self, d: &Daemon, name: &str) -> Command {
        let mut c = self.cmd(bin(name));
        c.env("FLEX_SOCKET", d.socket())
            .env("FLEX_CONFIG", d.config_path());
        c
    }

    /// Submit `script` (written into `dir`) with flexsub as this user; returns the job id.
    fn submit(&self, d: &Daemon, dir: &Path, script: &str, args: &[&str]) -> JobId {
        let out = self.submit_output(d, dir, script, args, &[]);
        assert!(
            out.status.success(),
            "flexsub as {} failed: {}\n{}",
            self.name,
            text(&out.stderr),
            d.log()
        );
        JobId(text(&out.stdout).trim().parse().expect("a job id"))
    }

    fn submit_output(
        &self,
        d: &Daemon,
        dir: &Path,
        script: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Output {
        let file = dir.join(format!("job-{}.sh", self.name));
        std::fs::write(&file, script).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        self.flex(d, "flexsub")
            .current_dir(dir)
            .envs(env.iter().copied())
            .args(args)
            .arg("--parsable")
            .arg(&file)
            .output()
            .unwrap()
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _one = ACCOUNTS.lock().unwrap_or_else(|p| p.into_inner());
        // -f: the user's jobs may still be on their way out.
        let _ = Command::new("userdel").args(["-f", &self.name]).output();
        let _ = Command::new("groupdel").arg(&self.name).output();
        if let Some(g) = &self.extra_group {
            let _ = Command::new("groupdel").arg(g).output();
        }
    }
}

/// `id` of a user as root sees it: (uid, gid, groups).
fn id_of(name: &str) -> String {
    let run = |flag: &str| {
        let out = Command::new("id").arg(flag).arg(name).output().unwrap();
        assert!(out.status.success());
        text(&out.stdout)
    };
    format!("{}{}{}", run("-u"), run("-g"), run("-G"))
}

fn wait_file(path: &Path) -> String {
    wait_for(&format!("{}", path.display()), || {
        std::fs::read_to_string(path).ok().filter(|s| !s.is_empty())
    })
}

fn flexq_json(u: &User, d: &Daemon, args: &[&str]) -> (Vec<JobView>, String) {
    let out = u
        .flex(d, "flexq")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "flexq: {}", text(&out.stderr));
    let raw = text(&out.stdout);
    (serde_json::from_str(&raw).expect("flexq --json"), raw)
}

/// Every file below `dir`, directories included.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

#[test]
fn a_job_runs_with_its_submitters_uid_gid_and_groups() {
    if !root() {
        return;
    }
    let a = User::create("ida", true);
    let d = Daemon::start(A100);
    let w = d.scratch("ids");
    let job = a.submit(
        &d,
        &w,
        "#!/bin/sh\n(id -u; id -g; id -G) > ids.tmp && mv ids.tmp ids\n",
        &[],
    );
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    let ids = wait_file(&w.join("ids"));
    assert_eq!(ids, id_of(&a.name), "the job's id -u, -g, -G");
    assert!(
        ids.lines().nth(2).unwrap().split(' ').count() >= 2,
        "the supplementary group is there: {ids:?}"
    );
    for f in ["ids", &format!("flex-{job}.out")] {
        let m = std::fs::metadata(w.join(f)).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (a.uid, a.gid),
            "{f} is created as the user"
        );
    }
    let v = d.job(job).unwrap();
    assert_eq!((v.uid, v.user.as_str()), (a.uid, a.name.as_str()));
}

#[test]
fn another_user_can_neither_cancel_nor_signal_nor_read_a_job() {
    if !root() {
        return;
    }
    let (a, b) = (User::create("ownera", false), User::create("otherb", false));
    let d = Daemon::start(A100);
    let w = d.scratch("owner");
    let marker = format!("script-marker-{}", std::process::id());
    let env_marker = format!("env-marker-{}", std::process::id());
    let script = format!(
        "#!/bin/sh\n# {marker}\ntrap 'touch usr1' USR1\necho $$ > pid\n\
         while :; do sleep 0.1; done\n"
    );
    let out = a.submit_output(&d, &w, &script, &[], &[("FLEX_TEST_SECRET", &env_marker)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = JobId(text(&out.stdout).trim().parse().unwrap());
    d.wait_state(job, &[JobState::Running]);
    let job_pid = wait_file(&w.join("pid")).trim().to_string();

    // B can neither cancel nor signal it, and is told why.
    for args in [vec![], vec!["-s", "USR1"]] {
        let out = b
            .flex(&d, "flexcancel")
            .args(&args)
            .arg(job.to_string())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!out.status.success(), "flexcancel {args:?} as B succeeded");
        assert!(
            err.contains("permission denied") && err.contains(&a.name),
            "flexcancel {args:?}: {err}"
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(d.job(job).unwrap().state, JobState::Running);
    assert!(!w.join("usr1").exists(), "B's signal reached the job");

    // B sees the job in flexq, but no script or environment.
    let (views, raw) = flexq_json(&b, &d, &["-j", &job.to_string()]);
    assert_eq!(views.len(), 1);
    assert!(
        !raw.contains(&marker) && !raw.contains(&env_marker),
        "{raw}"
    );

    // Nothing flexd keeps can be read by B: not the database, not the run files, nor the
    // job's or its supervisor's environment in /proc.
    let mut files = Vec::new();
    walk(&d.state_dir(), &mut files);
    assert!(files.len() > 3, "{files:?}");
    let job_proc = PathBuf::from(format!("/proc/{job_pid}/environ"));
    let readable = |f: &Path| {
        let tool = if f.is_dir() { "ls" } else { "cat" };
        b.cmd(tool).arg(f).output().unwrap().status.success()
    };
    assert!(readable(&d.config_path()), "B can read what is public");
    for f in files.iter().chain([&job_proc]) {
        assert!(!readable(f), "B could read {}", f.display());
    }
    let mode = std::fs::metadata(d.state_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "state dir mode {mode:o}");

    // The owner can signal it; root can cancel it.
    let out = a
        .flex(&d, "flexcancel")
        .args(["-s", "USR1", &job.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("the owner's signal", || {
        w.join("usr1").exists().then_some(())
    });
    let out = d.cmd("flexcancel").arg(job.to_string()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(d.wait_finished(job).state, JobState::Cancelled);
}

#[test]
fn a_planted_symlink_cannot_redirect_a_jobs_output() {
    if !root() {
        return;
    }
    let a = User::create("linka", false);
    let d = Daemon::start(A100);
    let w = d.scratch("links");
    // A root-only file in flexd's state directory, and a link to it where the output goes.
    let secret = d.state_dir().join("root-only");
    std::fs::write(&secret, "root only\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&secret, w.join("out.txt")).unwrap();
    std::os::unix::fs::symlink(d.state_dir(), w.join("state-link")).unwrap();

    let cases = [
        (vec!["-o", "out.txt"], "out.txt"),
        (vec!["-o", "ok.txt", "-e", "out.txt"], "out.txt"),
        (vec!["-o", "state-link/planted"], "state-link/planted"),
    ];
    for (args, shown) in cases {
        let job = a.submit(&d, &w, "#!/bin/sh\necho overwritten\n", &args);
        let v = d.wait_finished(job);
        assert_eq!(v.state, JobState::Failed, "{args:?}: {v:?}");
        let why = v.reason.unwrap_or_default();
        assert!(
            why.contains(&format!("cannot create the output file {shown}")),
            "{args:?}: {why}"
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    let m = std::fs::metadata(&secret).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o600));
    assert!(!d.state_dir().join("planted").exists());
}

#[test]
fn a_job_gets_its_submitters_environment_not_flexds() {
    if !root() {
        return;
    }
    let a = User::create("enva", false);
    let d = Daemon::start_env(A100, "", &[("FLEXD_SECRET", "daemon-only")]);
    let w = d.scratch("env");
    let out = a.submit_output(
        &d,
        &w,
        "#!/bin/sh\nenv > env.tmp && mv env.tmp env.txt\n",
        &[],
        &[("SUBMITTER_VAR", "from-a")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = JobId(text(&out.stdout).trim().parse().unwrap());
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    let env = wait_file(&w.join("env.txt"));
    assert!(env.lines().any(|l| l == "SUBMITTER_VAR=from-a"), "{env}");
    assert!(
        !env.contains("FLEXD_SECRET"),
        "flexd's environment leaked:\n{env}"
    );
    assert!(!env.contains("FLEX_LOG="), "{env}");
    assert!(
        env.lines().any(|l| l == format!("USER={}", a.name)),
        "{env}"
    );
}

#[test]
fn scripts_and_environments_never_reach_the_log() {
    if !root() {
        return;
    }
    let a = User::create("loga", false);
    // Everything flexd can log, at its most verbose.
    let d = Daemon::start_env(A100, "", &[("FLEX_LOG", "trace")]);
    let w = d.scratch("log");
    let marker = format!("SCRIPTMARK{}x", std::process::id());
    let env_marker = format!("ENVMARK{}x", std::process::id());
    let script = format!(
        "#!/bin/sh\n# {marker}\necho {marker}-ran > ran.txt\necho \"$FLEX_SECRET_VALUE\" > env.txt\n"
    );
    let env = [("FLEX_SECRET_VALUE", env_marker.as_str())];
    let out = a.submit_output(&d, &w, &script, &[], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = JobId(text(&out.stdout).trim().parse().unwrap());
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    assert!(wait_file(&w.join("ran.txt")).contains(&marker));
    assert_eq!(wait_file(&w.join("env.txt")).trim(), env_marker);
    // A pending job cancelled, a test-only and a refused submission take other paths.
    let blocker = a.submit(&d, &w, "#!/bin/sh\nsleep 300\n", &["--leaves", "14"]);
    d.wait_state(blocker, &[JobState::Running]);
    let waiting = a.submit_output(&d, &w, &script, &["--leaves", "1"], &env);
    let waiting = JobId(text(&waiting.stdout).trim().parse().unwrap());
    let out = a.submit_output(&d, &w, &script, &["--test-only"], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = a.submit_output(&d, &w, &script, &["--leaves", "15"], &env);
    assert!(!out.status.success());
    let out = d
        .cmd("flexcancel")
        .args([waiting.to_string(), blocker.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    d.wait_finished(blocker);

    let log = d.log();
    assert!(
        log.contains("TRACE") || log.contains("trace"),
        "not at trace level"
    );
    assert!(log.contains(&format!("job {job}")), "the log names the job");
    assert!(!log.contains(&marker), "the script reached the log:\n{log}");
    assert!(
        !log.contains(&env_marker),
        "the environment reached the log:\n{log}"
    );
}
