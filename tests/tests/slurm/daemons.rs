//! The private Slurm's daemons, shared by the tests that start one (`slurm`, `side_by_side`,
//! `slurm_formats`): munged, slurmctld and one slurmd per node, started in the cluster's
//! directory (which holds slurm.conf, the munge key and `log/`), waited on until every node is
//! idle, and stopped by pid on drop; and the client commands run against them.

use super::setup::{clean_env, find, self_logs};
use flex_tests::wait_child;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The running daemons of a cluster in `dir`.
pub(super) struct Daemons {
    dir: PathBuf,
    running: Vec<(String, Child)>,
}

impl Daemons {
    /// Starts munged, slurmctld and a slurmd for each of `nodes`, each after what it needs, and
    /// waits until every node is idle.
    pub(super) fn start(dir: &Path, nodes: &[&str]) -> Daemons {
        let mut d = Daemons {
            dir: dir.to_path_buf(),
            running: Vec::new(),
        };
        let dd = dir.display();
        d.spawn(
            "munged",
            Command::new(find("munged").unwrap()).args([
                "-F".to_string(),
                "-f".into(),
                format!("--socket={dd}/munge/sock"),
                format!("--key-file={dd}/munge/key"),
                format!("--log-file={dd}/log/munged.log"),
                format!("--pid-file={dd}/munge/pid"),
                format!("--seed-file={dd}/munge/seed"),
            ]),
        );
        let sock = dir.join("munge/sock");
        d.wait("munged's socket", |_| sock.exists().then_some(()));
        let conf = dir.join("slurm.conf");
        d.spawn(
            "slurmctld",
            Command::new(find("slurmctld").unwrap())
                .args(["-D", "-i", "-f"])
                .arg(&conf),
        );
        for n in nodes {
            std::fs::create_dir_all(dir.join("spool").join(n)).unwrap();
            d.spawn(
                &format!("slurmd {n}"),
                Command::new(find("slurmd").unwrap())
                    .args(["-D", "-N", n, "-f"])
                    .arg(&conf),
            );
        }
        let path = std::env::var("PATH").unwrap_or_default();
        d.wait("every node idle", |d| {
            let o = d.run(&["sinfo", "-h", "-N", "-o", "%N %T"], 30, &path);
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let idle = nodes
                .iter()
                .all(|n| text.lines().any(|l| l.trim() == format!("{n} idle")));
            idle.then_some(())
        });
        d
    }

    fn spawn(&mut self, name: &str, cmd: &mut Command) {
        let log = self.dir.join(format!("log/{}.out", name.replace(' ', "-")));
        let log = std::fs::File::create(log).unwrap();
        let child = clean_env(cmd)
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.running.push((name.to_string(), child));
    }

    /// Waits for `check`, failing with the daemons' logs when one of them dies or 240 s pass.
    fn wait<T>(&mut self, what: &str, mut check: impl FnMut(&Daemons) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            for (name, child) in &mut self.running {
                if let Ok(Some(s)) = child.try_wait() {
                    panic!(
                        "{name} exited ({s}) while waiting for {what}\n{}",
                        self_logs(&self.dir)
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self_logs(&self.dir)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A Slurm client command against this cluster, from its directory with `path` as PATH,
    /// killed after `secs`.
    pub(super) fn run(&self, args: &[&str], secs: u64, path: &str) -> Output {
        let mut child = clean_env(&mut Command::new(find(args[0]).unwrap()))
            .args(&args[1..])
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            .env("PATH", path)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
        if wait_child(&mut child, Duration::from_secs(secs)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?} did not finish in {secs} s\n{}",
                self_logs(&self.dir)
            );
        }
        child.wait_with_output().unwrap()
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        // In reverse order of start, each by its own pid: TERM, then KILL.
        while let Some((_, mut child)) = self.running.pop() {
            flex_tests::signal(child.id(), libc::SIGTERM);
            if wait_child(&mut child, Duration::from_secs(20)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
