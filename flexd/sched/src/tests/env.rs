//! A small world for the core's tests, in the manner of HyperQueue's tako `TestEnv`: hosts by
//! topology name, jobs built with a few chained calls, running jobs placed for real, and `now`
//! passed in like everything else.

use crate::*;
use gres_plugin::probe::build_host;
use gres_plugin::topology::{builtin, parse};
use gres_plugin::{JobId, Request};

/// Hosts, what runs on them, a queue and the time.
pub(super) struct TestEnv {
    pub cluster: Cluster,
    pub running: Vec<RunningJob<Allocation>>,
    pub queue: Vec<PendingJob>,
    pub now: Time,
}

impl TestEnv {
    /// Idle hosts of the named built-in topologies, at t = 0, with an empty queue.
    pub fn new(hosts: &[&str]) -> Self {
        let models = hosts
            .iter()
            .map(|n| build_host(&parse(builtin(n).unwrap(), n).unwrap()).unwrap())
            .collect();
        TestEnv {
            cluster: Cluster::new(models, ClusterConfig::default()),
            running: Vec::new(),
            queue: Vec::new(),
            now: 0,
        }
    }

    /// The Flex-MIG testbed: two A100-40GB, 14 leaves.
    pub fn testbed() -> Self {
        Self::new(&["a100-40gb-x2"])
    }

    /// Place `job` as the core would and hold its resources until `end`.
    pub fn running(mut self, job: impl Into<PendingJob>, end: Time) -> Self {
        let job = job.into();
        let placement = self.cluster.place(&job).expect("the running job fits");
        self.cluster.occupy(&placement);
        self.running.push(RunningJob {
            id: job.id,
            placement,
            expected_end: end,
        });
        self
    }

    /// Queue jobs, in this order.
    pub fn queued(mut self, jobs: impl IntoIterator<Item = JobB>) -> Self {
        self.queue.extend(jobs.into_iter().map(PendingJob::from));
        self
    }

    /// One pass of the core over this world.
    pub fn schedule(&self, policy: &Policy) -> Decisions<Allocation> {
        schedule(&self.cluster, &self.queue, &self.running, self.now, policy)
    }
}

/// A pending job under construction: `job(1).leaves(4).limit(400).priority(2)`.
#[derive(Clone, Debug)]
pub(super) struct JobB(PendingJob);

/// A one-leaf batch job of one hour.
pub(super) fn job(id: u64) -> JobB {
    JobB(PendingJob {
        id: JobId(id),
        request: Request::leaves(1, 3600),
        priority: 0,
        kind: JobKind::Batch,
    })
}

impl JobB {
    pub fn leaves(mut self, n: u32) -> Self {
        self.0.request.leaves = Some(n);
        self
    }

    /// Its time limit in seconds.
    pub fn limit(mut self, s: u64) -> Self {
        self.0.request.time_limit_s = s;
        self
    }

    pub fn priority(mut self, p: i64) -> Self {
        self.0.priority = p;
        self
    }
}

impl From<JobB> for PendingJob {
    fn from(j: JobB) -> Self {
        j.0
    }
}

/// The ids of the jobs a pass starts, in order.
pub(super) fn started(d: &Decisions<Allocation>) -> Vec<u64> {
    d.starts.iter().map(|s| s.job.0).collect()
}

/// Why the pass left `id` waiting.
pub(super) fn reason(d: &Decisions<Allocation>, id: u64) -> &Reason {
    &d.pending
        .iter()
        .find(|p| p.job == JobId(id))
        .expect("the job is pending")
        .reason
}
