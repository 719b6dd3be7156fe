//! The two sides: the private Slurm 22.05 (the side-by-side test's one-node cluster) and the
//! real flexd on the same simulated host, each with a working directory, the same jobs in the
//! same order (both number them from 1000), and a way to run one form on each.

use super::forms::{Form, SCRIPTS};
use super::setup::set_mode;
use super::slurm::Slurm;
use flex_tests::{bin, Daemon};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOPOLOGY: &str = "a100-40gb-x2.toml";
const FIRST_JOB_ID: u64 = 1000;

/// What one side answered.
pub(crate) struct Answer {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Both sides, started.
pub(crate) struct Sides {
    slurm: Slurm,
    flex: Daemon,
    work: tempfile::TempDir,
    /// The directory of Flex's Slurm-named links.
    names: PathBuf,
    /// Each side's placeholders and their values (Slurm's, then Flex's), the job ids added as
    /// the jobs are submitted.
    pub(crate) words: [Vec<(&'static str, String)>; 2],
}

impl Sides {
    pub(crate) fn start(repo: &Path) -> Sides {
        let topology = repo.join("../etc/topologies").join(TOPOLOGY);
        let slurm = Slurm::start(&topology, FIRST_JOB_ID);
        let flex = start_flex();
        let work = tempfile::Builder::new()
            .prefix("flex-formats-")
            .tempdir()
            .unwrap();
        set_mode(work.path(), 0o755);
        let names = work.path().join("slurm-bin");
        let o = Command::new(bin("flex-slurm"))
            .arg("links")
            .arg(&names)
            .output()
            .unwrap();
        assert!(o.status.success(), "flex-slurm links: {o:?}");
        for side in ["slurm", "flex"] {
            std::fs::create_dir_all(work.path().join(side)).unwrap();
        }
        let me = nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap();
        let user = me
            .as_ref()
            .map_or_else(|| "root".to_string(), |u| u.name.clone());
        // The account a Flex job gets without one: the user's primary group.
        let account = me
            .and_then(|u| nix::unistd::Group::from_gid(u.gid).ok().flatten())
            .map_or_else(|| "root".to_string(), |g| g.name);
        let start = Command::new("date")
            .args(["-d", "2 days ago", "+%Y-%m-%dT%H:00"])
            .output()
            .unwrap();
        let start = String::from_utf8_lossy(&start.stdout).trim().to_string();
        let mut sides = Sides {
            slurm,
            flex,
            work,
            names,
            words: [0, 1].map(|_| {
                vec![
                    ("{user}", user.clone()),
                    ("{start}", start.clone()),
                    ("{account}", account.clone()),
                ]
            }),
        };
        for slurm in [true, false] {
            let dir = sides.dir(slurm).display().to_string();
            sides.words[usize::from(!slurm)].push(("{workdir}", dir));
        }
        sides
    }

    fn dir(&self, slurm: bool) -> PathBuf {
        self.work.path().join(if slurm { "slurm" } else { "flex" })
    }

    /// `text` with one side's placeholders filled in.
    pub(crate) fn fill(&self, slurm: bool, text: &str) -> String {
        let mut t = text.to_string();
        for (k, v) in &self.words[usize::from(!slurm)] {
            t = t.replace(k, v);
        }
        t
    }

    /// Writes the scripts (now that `{run}` is known) into both working directories.
    pub(crate) fn write_scripts(&self) {
        for slurm in [true, false] {
            for (name, text) in SCRIPTS {
                std::fs::write(self.dir(slurm).join(name), self.fill(slurm, text)).unwrap();
            }
        }
    }

    /// Each job id of one side and the name of its job (`{run}` is `run`), and its working
    /// directory (`workdir`), where its jobs run and its scripts are.
    pub(crate) fn roles(&self, slurm: bool) -> Vec<(String, String)> {
        let mut roles: Vec<(String, String)> = self.words[usize::from(!slurm)]
            .iter()
            .filter(|(k, _)| super::JOBS.contains(k))
            .map(|(k, v)| (v.clone(), k.trim_matches(['{', '}']).to_string()))
            .collect();
        roles.push((self.dir(slurm).display().to_string(), "workdir".into()));
        roles
    }

    /// Runs `form` on one side.
    pub(crate) fn run(&self, slurm: bool, form: &Form) -> Answer {
        let args: Vec<String> = form.args.iter().map(|a| self.fill(slurm, a)).collect();
        let path = std::env::var("PATH").unwrap_or_default();
        let mut c = if slurm {
            self.slurm.command(&args[0], &self.dir(true), &path)
        } else {
            let mut c = Command::new(self.names.join(&args[0]));
            c.env("FLEX_SOCKET", self.flex.socket())
                .env("FLEX_CONFIG", self.flex.config_path())
                .env("PATH", format!("{}:{path}", self.names.display()))
                .current_dir(self.dir(false));
            c
        };
        c.args(&args[1..]);
        for (k, v) in form.env {
            c.env(k, self.fill(slurm, v));
        }
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
        let mut stdin = child.stdin.take().unwrap();
        if let Some(s) = form.stdin {
            stdin.write_all(self.fill(slurm, s).as_bytes()).unwrap();
        }
        drop(stdin);
        if flex_tests::wait_child(&mut child, Duration::from_secs(60)).is_none() {
            let _ = child.kill();
            panic!("{args:?} did not finish in 60 s");
        }
        let o = child.wait_with_output().unwrap();
        Answer {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Each job's state as one side's squeue says it (`-t all`), by id.
    pub(crate) fn states(&self, slurm: bool) -> Vec<(String, String)> {
        let q = super::forms::Form {
            tools: "",
            args: &["squeue", "-h", "-t", "all", "-o", "%i %T"],
            stdin: None,
            env: &[],
            compare: super::forms::Compare::Output,
        };
        let a = self.run(slurm, &q);
        a.stdout
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(i, s)| (i.to_string(), s.trim().to_string()))
            .collect()
    }

    /// Waits until on both sides `{done}` and `{fail}` have ended and `{run}` runs.
    pub(crate) fn wait_for_jobs(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        for slurm in [true, false] {
            let want = [
                (self.fill(slurm, "{done}"), "COMPLETED"),
                (self.fill(slurm, "{fail}"), "FAILED"),
                (self.fill(slurm, "{run}"), "RUNNING"),
            ];
            loop {
                let states = self.states(slurm);
                let there = want
                    .iter()
                    .all(|(id, s)| states.iter().any(|(i, t)| i == id && t == s));
                if there {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the jobs did not reach {want:?} on {}: {states:?}\n{}",
                    if slurm { "Slurm" } else { "Flex" },
                    if slurm {
                        self.slurm.logs()
                    } else {
                        self.flex.log()
                    }
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

/// flexd on the topology, its job ids moved to [`FIRST_JOB_ID`] as Slurm's FirstJobId does.
fn start_flex() -> Daemon {
    Daemon::start_with(TOPOLOGY, "").first_job_id(FIRST_JOB_ID)
}
