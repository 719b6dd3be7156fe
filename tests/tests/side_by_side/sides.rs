//! Running the scripts on both sides at once: each script gets a working directory per side,
//! holding the script with the probe of its batch step inserted after its header (the same
//! text on both sides) and the records of its processes; all are submitted, then waited for
//! together, so the whole run lasts about as long as its slowest job (the time limits).

use super::observe::{Ended, Normal, Observed};
use super::setup::{hostname, set_mode};
use super::slurm::{Slurm, NODE};
use super::{repo, Script};
use flex_proto::{JobState, JobView};
use flex_tests::{bin_dir, Daemon};
use gres_plugin::cpus::online_cores;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

const TOPOLOGY: &str = "a100-40gb-x2.toml";

/// The cores both sides declare; a machine with fewer folds both sides' bindings.
const TOPOLOGY_CORES: usize = 32;

/// The first job id on both sides.
const FIRST_JOB_ID: u64 = 1000;

/// flexd as a Slurm-spelled script expects it: the script's srun is flexrun's, even though a
/// Slurm is installed here.
const FLEXD_CONFIG: &str = "srun_in_jobs = \"flexrun\"\n";

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Slurm,
    Flex,
}

/// One side's handles: the daemons and the directory of the scripts' working directories.
struct Env<'a> {
    slurm: &'a Slurm,
    flex: &'a Daemon,
    work: &'a Path,
}

/// Every script's view on Slurm and on Flex, in the order of `scripts`.
pub(super) fn run_both(scripts: &[Script]) -> Vec<(Observed, Observed)> {
    let topology = repo().join("../etc/topologies").join(TOPOLOGY);
    let slurm = Slurm::start(&topology, FIRST_JOB_ID);
    let flex = start_flex();
    let work = tempfile::Builder::new()
        .prefix("flex-sbs-work-")
        .tempdir()
        .unwrap();
    set_mode(work.path(), 0o755);
    let env = Env {
        slurm: &slurm,
        flex: &flex,
        work: work.path(),
    };
    let started = Instant::now();
    let subs: Vec<[Vec<u64>; 2]> = scripts
        .iter()
        .map(|s| [env.submit(Side::Slurm, s), env.submit(Side::Flex, s)])
        .collect();
    env.wait_idle();
    eprintln!(
        "side by side: {} scripts ran on both sides in {:.0?}",
        scripts.len(),
        started.elapsed()
    );
    let ended_slurm = slurm.ended_jobs();
    let flex_jobs = env.flex_jobs();
    scripts
        .iter()
        .zip(subs)
        .map(|(s, [sl, fl])| {
            (
                env.observe(Side::Slurm, s, &sl, slurm_jobs(&ended_slurm, &sl)),
                env.observe(Side::Flex, s, &fl, (!fl.is_empty()).then(|| flex_jobs(&fl))),
            )
        })
        .collect()
}

/// flexd on the topology, its job ids moved to [`FIRST_JOB_ID`].
fn start_flex() -> Daemon {
    Daemon::start_with(TOPOLOGY, FLEXD_CONFIG).first_job_id(FIRST_JOB_ID)
}

/// A submission's jobs from Slurm's completion log, in array order.
fn slurm_jobs(ended: &[BTreeMap<String, String>], subs: &[u64]) -> Option<Vec<Ended>> {
    if subs.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for sub in subs {
        let sub = sub.to_string();
        let mut jobs: Vec<Ended> = ended
            .iter()
            .filter(|j| j.get("JobId") == Some(&sub) || j.get("ArrayJobId") == Some(&sub))
            .map(|j| Ended {
                index: j.get("ArrayTaskId").map(|i| i.parse().unwrap()),
                state: j["JobState"].clone(),
                exit: j["ExitCode"].clone(),
            })
            .collect();
        jobs.sort();
        out.extend(jobs);
    }
    Some(out)
}

impl Env<'_> {
    fn dir(&self, side: Side, s: &Script) -> PathBuf {
        let side = match side {
            Side::Slurm => "slurm",
            Side::Flex => "flex",
        };
        self.work.join(side).join(s.name.trim_end_matches(".sh"))
    }

    /// PATH for the submission: the stand-ins, then the workspace's binaries, then the rest.
    fn path(&self) -> String {
        format!(
            "{}:{}:{}",
            repo().join("side-by-side/bin").display(),
            bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// Writes the script into its directory and submits it (and its `--dependency` follower);
    /// the ids sbatch or flexsub printed, none when it refused.
    fn submit(&self, side: Side, s: &Script) -> Vec<u64> {
        let dir = self.dir(side, s);
        let (rec, sub) = (dir.join("rec"), dir.join("sub"));
        std::fs::create_dir_all(&rec).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        for d in [dir.parent().unwrap(), &dir, &rec, &sub] {
            set_mode(d, 0o777);
        }
        std::fs::write(dir.join(&s.name), with_probe(&s.text)).unwrap();
        let mut ids = Vec::new();
        let Some(first) = self.submit_one(side, &dir, &s.name, &[]) else {
            return ids;
        };
        ids.push(first);
        if let Some(kind) = &s.then {
            let then =
                std::fs::read_to_string(repo().join("side-by-side/scripts/dep.then.sh")).unwrap();
            std::fs::write(dir.join("dep.then.sh"), with_probe(&then)).unwrap();
            let dep = match kind.as_str() {
                "singleton" => "--dependency=singleton".to_string(),
                _ => format!("--dependency={kind}:{first}"),
            };
            let id = self.submit_one(side, &dir, "dep.then.sh", &["-J", "first", &dep]);
            ids.extend(id);
        }
        ids
    }

    fn submit_one(&self, side: Side, dir: &Path, name: &str, args: &[&str]) -> Option<u64> {
        let mut c = match side {
            Side::Slurm => self.slurm.command("sbatch", dir, &self.path()),
            Side::Flex => {
                let mut c = self.flex.cmd("flexsub");
                c.env("PATH", self.path()).current_dir(dir);
                c
            }
        };
        let o = c
            .env("SBS_REC", dir.join("rec"))
            .env_remove("TMPDIR")
            .args(args)
            .args(["--parsable", name])
            .output()
            .unwrap();
        if !o.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&o.stdout);
        let id = text.trim().split(';').next().unwrap();
        Some(id.parse().unwrap_or_else(|_| panic!("{name}: {o:?}")))
    }

    /// Waits until neither side has a job queued or running. Jobs whose dependency can never
    /// be satisfied wait forever on both sides (Slurm's default, Flex's too): once they are all
    /// that is left, they are cancelled on both, as a user would.
    fn wait_idle(&self) {
        let deadline = Instant::now() + Duration::from_secs(240);
        let never = "DependencyNeverSatisfied";
        loop {
            let flex: Vec<JobView> = self
                .flex_views()
                .into_iter()
                .filter(|j| matches!(j.state, JobState::Pending | JobState::Running))
                .collect();
            let o = self.slurm.run(&["squeue", "-h", "-o", "%i %r"], 30);
            let slurm: Vec<(String, String)> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(i, r)| (i.to_string(), r.to_string()))
                .collect();
            if flex.is_empty() && slurm.is_empty() {
                return;
            }
            let stuck = flex.iter().all(|j| j.reason.as_deref() == Some(never))
                && slurm.iter().all(|(_, r)| r == never);
            if stuck {
                for (id, _) in &slurm {
                    self.slurm.run(&["scancel", id], 30);
                }
                for j in &flex {
                    ok(self
                        .flex
                        .cmd("flexcancel")
                        .arg(j.id.0.to_string())
                        .output()
                        .unwrap());
                }
            }
            if Instant::now() > deadline {
                let squeue = self.slurm.run(&["squeue", "-o", "%i %j %T %r"], 30);
                let flexq = self.flex.cmd("flexq").output().unwrap();
                panic!(
                    "jobs still queued or running after 240 s:\n{}\n{}\n{}",
                    String::from_utf8_lossy(&squeue.stdout),
                    String::from_utf8_lossy(&flexq.stdout),
                    self.slurm.logs(),
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn flex_views(&self) -> Vec<JobView> {
        let o = ok(self
            .flex
            .cmd("flexq")
            .args(["--json", "-t", "all", "-r"])
            .output()
            .unwrap());
        serde_json::from_slice(&o.stdout).expect("flexq --json")
    }

    /// A function from a submission's ids to its jobs as flexacct shows them, in array order.
    fn flex_jobs(&self) -> impl Fn(&[u64]) -> Vec<Ended> {
        let views = self.flex_views();
        let ids: Vec<String> = views.iter().map(|v| v.id.0.to_string()).collect();
        let o = ok(self
            .flex
            .cmd("flexacct")
            .args(["-a", "-P", "-n", "-o", "JobID,State,ExitCode", "-j"])
            .arg(ids.join(","))
            .output()
            .unwrap());
        let acct: BTreeMap<String, (String, String)> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                (f.len() == 3).then(|| (f[0].to_string(), (f[1].to_string(), f[2].to_string())))
            })
            .collect();
        move |subs: &[u64]| {
            let mut out = Vec::new();
            for sub in subs {
                let mut jobs: Vec<Ended> = views
                    .iter()
                    .filter(|v| v.id.0 == *sub || v.array.is_some_and(|a| a.job.0 == *sub))
                    .map(|v| {
                        let key = match v.array {
                            Some(a) => format!("{}_{}", a.job.0, a.index),
                            None => v.id.0.to_string(),
                        };
                        let (state, exit) = acct
                            .get(&key)
                            .or_else(|| acct.get(&v.id.0.to_string()))
                            .cloned()
                            .unwrap_or_else(|| panic!("flexacct has no {key}: {acct:?}"));
                        Ended {
                            index: v.array.map(|a| a.index),
                            state,
                            exit,
                        }
                    })
                    .collect();
                jobs.sort();
                out.extend(jobs);
            }
            out
        }
    }

    /// One side's normalised view of a script whose jobs have ended.
    fn observe(&self, side: Side, s: &Script, subs: &[u64], jobs: Option<Vec<Ended>>) -> Observed {
        let dir = self.dir(side, s);
        let host = hostname();
        let hosts = [NODE, host.as_str()];
        let mut job_ids: BTreeSet<u64> = subs.iter().copied().collect();
        for r in std::fs::read_dir(dir.join("rec")).into_iter().flatten() {
            let text = std::fs::read_to_string(r.unwrap().path()).unwrap_or_default();
            for l in text.lines() {
                if let Some(v) = l
                    .strip_prefix("SLURM_JOB_ID=")
                    .or_else(|| l.strip_prefix("SLURM_ARRAY_JOB_ID="))
                {
                    job_ids.extend(v.parse::<u64>().ok());
                }
            }
        }
        let n = Normal {
            job_ids,
            workdir: &dir,
            hosts: &hosts,
            count_cores: online_cores().len() >= TOPOLOGY_CORES,
        };
        Observed {
            files: n.files(&dir, &s.name),
            records: n.records(&dir.join("rec")),
            jobs,
        }
    }
}

/// The script with `probe batch` after its header (the shebang, comments and blank lines:
/// sbatch reads no directive after the first command).
fn with_probe(text: &str) -> String {
    let probe = repo().join("side-by-side/bin/probe");
    let mut out = String::new();
    let mut inserted = false;
    for line in text.lines() {
        let t = line.trim();
        if !(inserted || t.is_empty() || t.starts_with('#')) {
            out.push_str(&format!("{} batch\n", probe.display()));
            inserted = true;
        }
        out.push_str(line);
        out.push('\n');
    }
    if !inserted {
        out.push_str(&format!("{} batch\n", probe.display()));
    }
    out
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{o:?}");
    o
}
