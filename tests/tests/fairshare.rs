//! Sharing the host fairly, on the real flexd with the real commands run as throwaway users:
//! fair share lets a light user past a heavy user's backlog, a per-user QOS limit holds under
//! a burst with Slurm's reason in flexq, and a higher QOS jumps the queue (flexprio shows why).
//!
//! The users are created with `useradd` and removed at the end; the tests need root and are
//! skipped with a notice otherwise.

use flex_proto::{JobState, JobView, QueueFilter, Request, Response};
use flex_tests::{bin, bin_dir, script_job, wait_for, Daemon};
use gres_plugin::JobId;
use std::process::Command;
use std::sync::Mutex;

const A100: &str = "a100-40gb-x2.toml";

/// useradd and userdel lock /etc/passwd: one at a time within this test binary.
static ACCOUNTS: Mutex<()> = Mutex::new(());

fn root() -> bool {
    let yes = nix::unistd::geteuid().is_root();
    if !yes {
        eprintln!("notice: skipped, needs root to create users and run commands as them");
    }
    yes
}

/// A throwaway user (and its group), removed on drop.
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

impl User {
    fn create(tag: &str) -> User {
        let name = format!("fs{}{tag}", std::process::id());
        {
            let _one = ACCOUNTS.lock().unwrap_or_else(|p| p.into_inner());
            let out = Command::new("useradd")
                .args(["-M", "-U", "-s", "/bin/sh", &name])
                .output()
                .expect("run useradd (install passwd)");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let u = nix::unistd::User::from_name(&name).unwrap().unwrap();
        User {
            name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }
    }

    /// A flex command run as this user against `d`.
    fn flex(&self, d: &Daemon, command: &str) -> Command {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            &self.uid.to_string(),
            "--regid",
            &self.gid.to_string(),
        ])
        .args(["--init-groups", "--"])
        .arg(bin(command))
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir().display()))
        .env("FLEX_SOCKET", d.socket())
        .env("FLEX_CONFIG", d.config_path())
        .current_dir(d.scratch("jobs"));
        c
    }

    /// Submit `n` one-leaf jobs running `script` through the protocol, as this user.
    fn submit_n(&self, d: &Daemon, n: usize, script: &str, qos: Option<&str>) -> Vec<JobId> {
        let mut spec = script_job(script, &d.scratch("jobs"));
        spec.qos = qos.map(String::from);
        (0..n)
            .map(
                |_| match d.request_as(self.uid, self.gid, &Request::Submit(spec.clone())) {
                    Response::Submitted(s) => s.job,
                    r => panic!("submission as {} refused: {r:?}\n{}", self.name, d.log()),
                },
            )
            .collect()
    }

    fn output(&self, d: &Daemon, command: &str, args: &[&str]) -> String {
        let out = self.flex(d, command).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{command} {args:?} as {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _one = ACCOUNTS.lock().unwrap_or_else(|p| p.into_inner());
        let _ = Command::new("userdel").args(["-f", &self.name]).output();
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

fn all_jobs(d: &Daemon) -> Vec<JobView> {
    d.client()
        .queue(QueueFilter {
            include_finished: true,
            ..QueueFilter::default()
        })
        .unwrap()
}

#[test]
fn a_light_user_starts_before_a_heavy_users_backlog() {
    if !root() {
        return;
    }
    // The shipped defaults: fair share on. Finished jobs stay in view for the count below.
    let d = Daemon::start_with(A100, "keep_finished = \"1h\"");
    let (a, b) = (User::create("a"), User::create("b"));
    let heavy = a.submit_n(&d, 200, "sleep 2", None);
    let light = b.submit_n(&d, 5, "sleep 1", None);
    let mut last_light = 0;
    for id in &light {
        let v = d.wait_state(*id, &[JobState::Running, JobState::Completed]);
        last_light = last_light.max(v.start_time.unwrap());
    }
    let jobs = all_jobs(&d);
    let heavy_before = jobs
        .iter()
        .filter(|j| heavy.contains(&j.id))
        .filter(|j| j.start_time.is_some_and(|t| t <= last_light))
        .count();
    // 14 leaves: A's first 14 start at once; B's 5 take the next leaves that free up, where
    // submission order alone would run all 200 of A's first.
    assert!(
        heavy_before < 100,
        "{heavy_before} of A's 200 jobs started before B's last one"
    );
    // flexshare shows A's usage above B's and a lower fair-share factor.
    let shares = a.output(&d, "flexshare", &["--json"]);
    let rows: Vec<flex_proto::ShareRow> = serde_json::from_str(&shares).unwrap();
    let of = |u: &User| {
        rows.iter()
            .find(|r| r.user.as_deref() == Some(u.name.as_str()))
            .unwrap_or_else(|| panic!("{} in {shares}", u.name))
            .clone()
    };
    assert!(of(&a).raw_usage > of(&b).raw_usage, "{shares}");
    assert!(of(&a).fairshare < of(&b).fairshare, "{shares}");
    for id in heavy {
        let _ = d.client().call(&Request::Cancel(flex_proto::CancelRequest {
            jobs: vec![id],
            signal: None,
            tasks: Vec::new(),
        }));
    }
}

#[test]
fn a_per_user_limit_holds_a_burst_and_a_higher_qos_jumps_the_queue() {
    if !root() {
        return;
    }
    let d = Daemon::start_with(
        A100,
        "[qos.normal]\nmax_running_leaves_per_user = 4\n[qos.high]\npriority = 100\n",
    );
    let (a, b) = (User::create("c"), User::create("d"));
    let burst = a.submit_n(&d, 30, "sleep 60", None);
    let running = |u: &User| {
        all_jobs(&d)
            .iter()
            .filter(|j| j.user == u.name && j.state == JobState::Running)
            .count()
    };
    wait_for("A's first 4 jobs to run", || {
        (running(&a) == 4).then_some(())
    });
    // Several passes later, still 4: the limit holds under the burst.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(running(&a), 4);
    let q = a.output(&d, "flexq", &["-t", "PD", "-o", "%i %u %r %Q %q", "-h"]);
    assert!(
        q.lines().count() == 26 && q.contains("QOSMaxGRESPerUser"),
        "{q}"
    );
    // B fills the rest of the host with high-QOS jobs in a burst of its own (no per-user limit
    // there), then one more high job waits: it is first in line, above A's backlog.
    let filler = b.submit_n(&d, 10, "sleep 60", Some("high"));
    wait_for("B's 10 jobs to run", || (running(&b) == 10).then_some(()));
    let dir = d.scratch("jobs");
    std::fs::write(
        dir.join("urgent.sh"),
        "#!/bin/sh\n#SBATCH --qos high --gres=gpu:1\nsleep 30\n",
    )
    .unwrap();
    let out = b.output(&d, "flexsub", &["--parsable", "urgent.sh"]);
    let urgent = JobId(out.trim().parse().unwrap());
    let prio = b.output(&d, "flexprio", &["-h"]);
    let first = prio.split_whitespace().next().unwrap();
    assert_eq!(first, urgent.0.to_string(), "{prio}");
    // A's running jobs hold the host: B's urgent job takes the first leaf one frees.
    let a_running: Vec<JobId> = all_jobs(&d)
        .iter()
        .filter(|j| j.user == a.name && j.state == JobState::Running)
        .map(|j| j.id)
        .collect();
    let cancel = Command::new(bin("flexcancel"))
        .env("FLEX_SOCKET", d.socket())
        .arg(a_running[0].0.to_string())
        .status()
        .unwrap();
    assert!(cancel.success());
    d.wait_state(urgent, &[JobState::Running]);
    assert!(burst
        .iter()
        .all(|id| d.job(*id).unwrap().state != JobState::Running || a_running.contains(id)));
    for id in burst.into_iter().chain(filler) {
        let _ = d.client().call(&Request::Cancel(flex_proto::CancelRequest {
            jobs: vec![id],
            signal: None,
            tasks: Vec::new(),
        }));
    }
}
