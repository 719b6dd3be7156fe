//! A scheduling pass of flexd's own state, for `cargo bench -p flexd --bench sched_plan`: the
//! plan (priorities and limits, under the state's lock in the daemon), the core's decision
//! and its application, on one host its first jobs fill, with a long queue of
//! pending jobs from many users. Not part of flexd's interface.

use crate::config::Settings;
use crate::exec::affinity::CpuMap;
use crate::state::{Signaller, State};
use crate::store::usage::{Holder, UsageRow};
use crate::store::NewJob;
use flex_proto::JobSpec;
use flex_sched::fairshare::Decayed;
use flex_sched::{Cluster, ClusterConfig};
use gres_plugin::{JobId, Request};

struct NoSignals;

impl Signaller for NoSignals {
    fn supervisor(&self, _: u32, _: i32) -> Result<(), String> {
        Ok(())
    }
    fn job_group(&self, _: JobId, _: i32) -> Result<(), String> {
        Ok(())
    }
}

/// A state whose host its first jobs fill, with `jobs` jobs of `users` users.
pub struct PassBench {
    state: State,
    settings: Settings,
    now: u64,
}

/// What the pass weighs: the old path (every weight 0, no limit), fair share with the shipped
/// weights, or fair share and a per-user limit of 4 running leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weighing {
    Fifo,
    FairShare,
    FairShareAndLimit,
}

impl PassBench {
    pub fn new(topology: &str, jobs: u64, users: u32, w: Weighing) -> PassBench {
        let host = gres_plugin::probe::discover_file(std::path::Path::new(topology))
            .expect("a shipped topology")
            .host;
        let cores: Vec<u32> = host.cores.iter().map(|c| c.id.0).collect();
        let (cpus, _) = CpuMap::new(&cores, cores.clone());
        let cluster = Cluster::new(vec![host], ClusterConfig::default());
        let mut settings = Settings::load(None, &Default::default())
            .expect("the compiled-in defaults")
            .0;
        match w {
            Weighing::Fifo => settings.priority.weights = Default::default(),
            Weighing::FairShare => {}
            Weighing::FairShareAndLimit => {
                let q = settings.priority.qos.get_mut("normal").expect("qos normal");
                q.max_running_leaves_per_user = 4;
            }
        }
        let mut state = State::new(cluster, cpus, Box::new(NoSignals), 0);
        let now = 1_800_000_000;
        let usage = (0..users).flat_map(|u| {
            [Holder::User, Holder::Account].map(|holder| UsageRow {
                holder,
                name: format!("user{u}"),
                usage: Decayed {
                    value: (u as f64 * 37.0) % 5000.0,
                    at: now,
                },
            })
        });
        state.load_usage(&settings, usage.collect());
        let mut add = |id: u64, uid: u32, leaves: u32, at: u64| {
            let mut job = job(uid, leaves, at);
            job.held = state.begin_submission(uid, None, 1, Default::default());
            state.add_submitted(&settings, JobId(id), job);
        };
        for i in 0..jobs {
            let size = [1, 1, 1, 2, 2, 3, 4, 7][i as usize % 8];
            add(i + 1, 1 + (i % users as u64) as u32, size, now - jobs + i);
        }
        let mut b = PassBench {
            state,
            settings,
            now,
        };
        // Fill the host: then no job ends and each pass leaves the whole queue waiting.
        while b.pass() > 0 {}
        b
    }

    /// One pass: plan, decide, apply; the jobs it started.
    pub fn pass(&mut self) -> usize {
        self.now += 1;
        let Some(plan) = self.state.plan(&self.settings, self.now) else {
            return 0;
        };
        let d = plan.decide(&self.settings.policy);
        self.state.apply(&self.settings, d, self.now)
    }
}

fn job(uid: u32, leaves: u32, at: u64) -> NewJob {
    NewJob {
        spec: JobSpec {
            name: "bench".into(),
            script: "true".into(),
            args: vec![],
            workdir: "/".into(),
            submit_dir: "/".into(),
            env: vec![].into(),
            stdout: None,
            stderr: None,
            request: Request::leaves(leaves, 600 + u64::from(uid % 7) * 600),
            account: None,
            qos: None,
            nice: 0,
            options: Default::default(),
            queue: Default::default(),
            umask: None,
            signal: None,
        },
        uid,
        gid: uid,
        user: format!("user{uid}"),
        account: format!("user{uid}"),
        priority: 0,
        submit_time: at,
        start: None,
        held: [u32::MAX; 2],
    }
}

/// flexd's GPU telemetry sampling on a full host, for `cargo bench -p flexd --bench
/// telemetry`: collecting the leaves running jobs hold (under the state's lock in the
/// daemon) and one sample of them from a samples file, added to each job's totals.
pub struct TelemetryBench {
    core: crate::server::Core,
    sampler: crate::telemetry::Sampler,
    /// A database holding the state's jobs, for the write of the running jobs' totals.
    db: rusqlite::Connection,
    _dir: tempfile::TempDir,
}

impl TelemetryBench {
    /// `topology` filled with running jobs (sizes 1 to 7 leaves); every leaf has a series of
    /// `samples` samples in the file.
    pub fn new(topology: &str, samples: u32) -> TelemetryBench {
        let pass = PassBench::new(topology, 2000, 10, Weighing::Fifo);
        let leaves = pass.state.cluster.host(gres_plugin::HostId(0)).leaves.len();
        let mut text = String::new();
        for n in 0..samples {
            for l in 0..leaves {
                text.push_str(&format!("{n},{l},{},{}\n", 1000 + n % 500, n % 101));
            }
        }
        let file = gres_plugin::telemetry::file::FileTelemetry::parse(
            &text,
            std::path::Path::new("bench.csv"),
        )
        .expect("generated samples");
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut db = crate::store::open(&dir.path().join("flex.db")).expect("a database");
        let tx = db.transaction().expect("a transaction");
        let mut bodies = crate::store::Bodies::default();
        let last = pass
            .state
            .running_jobs()
            .map(|j| j.row.id.0)
            .max()
            .unwrap_or(0);
        for n in 0..last {
            let job = crate::store::NewJob::for_test(&format!("bench-{n}"), 0, "root", "root", 0);
            crate::store::insert_job(&tx, &job, &mut bodies).expect("insert a job");
        }
        tx.commit().expect("commit");
        TelemetryBench {
            core: crate::server::Core {
                settings: pass.settings,
                state: pass.state,
            },
            sampler: crate::telemetry::Sampler::new(Box::new(file), 30.0),
            db,
            _dir: dir,
        }
    }

    /// What the writer thread does after each sample: the running jobs' totals, stored in
    /// one transaction; the jobs written.
    pub fn store_totals(&mut self) -> usize {
        let totals = self.sampler.running_totals();
        let tx = self.db.transaction().expect("a transaction");
        crate::store::gpu::save_totals(&tx, &totals).expect("store the totals");
        tx.commit().expect("commit");
        totals.len()
    }

    /// The leaves running jobs hold: what the daemon collects under its lock.
    pub fn collect(&self) -> usize {
        crate::telemetry::targets(&self.core).len()
    }

    /// One whole sample: collect, read, add; the readings taken.
    pub fn tick(&mut self) -> usize {
        let held = crate::telemetry::targets(&self.core);
        let runs = crate::telemetry::runs(&self.core);
        let targets: Vec<_> = held.into_iter().map(|(t, _)| t).collect();
        self.sampler.tick(&targets, &runs).0.len()
    }
}
