//! Which pending jobs the scheduler core sees (dependencies are decided in [`super::depend`]).
//! A plain job (no array, no dependency) is in the core's queue whenever it is pending and not
//! held. An array or a job with a dependency is a [`Group`]: its pending tasks wait in the group
//! until they are eligible (not held, dependency satisfied, under the array's throttle), and
//! only as many enter the core's queue as could run at once on this cluster, plus one. A
//! 100,000-task array is then a few queue entries, however many tasks wait. The core stays
//! pure: it gets the queue as before.

use super::taskset::TaskSet;
use super::{Job, State};
use crate::store::Hold;
use flex_proto::{DepKind, DepTerm, JobRef, JobState};
use gres_plugin::JobId;

/// Where a group's dependency stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Deps {
    Ok,
    Waiting,
    /// It can no longer be satisfied; why.
    Never(String),
}

/// The pending and running tasks of one submission.
#[derive(Debug)]
pub(crate) struct Group {
    /// Every pending task, held ones too.
    pending: TaskSet,
    /// Pending tasks in the core's queue.
    queued: TaskSet,
    /// Eligible pending tasks waiting for room in the core's queue.
    pub(super) reserve: TaskSet,
    /// With `aftercorr`, each task's dependency is its own: unheld pending tasks whose
    /// dependency waits, and those whose dependency can never hold.
    pub(super) per_task: bool,
    pub(super) blocked: TaskSet,
    pub(super) never: TaskSet,
    running: u32,
    throttle: Option<u32>,
    /// Most tasks that could run at once on this cluster, plus one.
    cap: usize,
    pub deps: Deps,
}

impl Group {
    fn throttled(&self) -> bool {
        self.throttle
            .is_some_and(|n| self.running as usize + self.queued.len() >= n as usize)
    }

    /// The lowest pending task: where flexq shows the group's pending tasks as one row.
    pub(crate) fn first_pending(&self) -> Option<JobId> {
        self.pending.first()
    }

    pub(crate) fn pending(&self) -> &TaskSet {
        &self.pending
    }

    pub(crate) fn throttle(&self) -> Option<u32> {
        self.throttle
    }
}

/// A job that needs no group: no array and no dependency. It enters the core's queue when it
/// is submitted unheld or released, and leaves it when it is held, starts or ends; the ~200
/// bytes of a group are saved on what most queued jobs are.
fn plain(j: &Job) -> bool {
    j.row.q.array.is_none() && j.row.q.dependency.is_none()
}

/// The submission a job came with: its array's id, or its own.
pub(crate) fn group_id(j: &Job) -> JobId {
    j.row.q.array.map_or(j.row.id, |a| a.job)
}

impl State {
    /// How many tasks asking `r` could run at once here, at most (plus one for the next head).
    fn cap(&self, r: &gres_plugin::Request) -> usize {
        let units: usize = self.cluster.hosts().map(|(_, h)| h.leaves.len()).sum();
        let per = match (r.gpus, r.leaves) {
            // A share is at least a thousandth of a unit (flexd's shares are thousandths).
            (Some(f), _) if f > 0.0 && f < 1.0 => units * (1.0 / f).ceil().min(1000.0) as usize,
            (_, Some(n)) if n > 1 => units / n as usize,
            _ => units,
        };
        per + 1
    }

    /// A job became pending (submitted, recovered, requeued): it joins its group. One with a
    /// `--begin` time waits for the next plan to see whether it has come.
    pub(super) fn enqueue(&mut self, id: JobId) {
        let j = &self.jobs[&id];
        self.roster.add(j);
        let begins_later = j.row.q.begin.is_some();
        if let Some(t) = j.row.q.begin {
            self.begin_waiting.insert((t, id));
        }
        if plain(j) {
            if j.row.q.hold == Hold::None && !begins_later {
                self.pending.push(super::pending_job(j));
                self.dirty = true;
            }
            return;
        }
        let gid = group_id(j);
        if let Some(a) = j.row.q.array {
            let n = self.arrays.entry(a.job).or_insert(0);
            *n = (*n).max(id.0 - a.job.0 + 1);
        }
        let held = j.row.q.hold != Hold::None || begins_later;
        if !self.groups.contains_key(&gid) {
            let per_task = j.row.q.dependency.as_ref().is_some_and(|d| {
                d.terms.iter().any(|t| {
                    matches!(
                        t,
                        DepTerm::On {
                            kind: DepKind::AfterCorr,
                            ..
                        }
                    )
                })
            });
            let deps = match j.row.q.dependency {
                Some(_) if !per_task => {
                    self.dep_waiting.insert(gid);
                    Deps::Waiting
                }
                _ => Deps::Ok,
            };
            let g = Box::new(Group {
                pending: TaskSet::default(),
                queued: TaskSet::default(),
                reserve: TaskSet::default(),
                per_task,
                blocked: TaskSet::default(),
                never: TaskSet::default(),
                running: 0,
                throttle: j.row.q.throttle,
                cap: self.cap(&j.row.request),
                deps,
            });
            self.groups.insert(gid, g);
        }
        let g = self.groups.get_mut(&gid).expect("just made");
        g.pending.insert(id);
        if !held {
            self.admit(gid, id);
        }
        self.top_up(gid);
    }

    /// An unheld pending task joins its group's reserve, or with a dependency of its own
    /// waits for the next evaluation.
    fn admit(&mut self, gid: JobId, id: JobId) {
        let Some(g) = self.groups.get_mut(&gid) else {
            return;
        };
        if g.per_task {
            g.blocked.insert(id);
            self.dep_waiting.insert(gid);
        } else {
            g.reserve.insert(id);
        }
    }

    /// A running job that flexd found running after a restart counts against its throttle.
    pub(super) fn count_running(&mut self, id: JobId) {
        if plain(&self.jobs[&id]) {
            return;
        }
        let gid = group_id(&self.jobs[&id]);
        let throttle = self.jobs[&id].row.q.throttle;
        let cap = self.cap(&self.jobs[&id].row.request);
        let g = self.groups.entry(gid).or_insert_with(|| {
            Box::new(Group {
                pending: TaskSet::default(),
                queued: TaskSet::default(),
                reserve: TaskSet::default(),
                per_task: false,
                blocked: TaskSet::default(),
                never: TaskSet::default(),
                running: 0,
                throttle,
                cap,
                deps: Deps::Ok,
            })
        });
        g.running += 1;
    }

    /// Move eligible tasks of the group into the core's queue while there is room.
    pub(super) fn top_up(&mut self, gid: JobId) {
        let Some(g) = self.groups.get_mut(&gid) else {
            return;
        };
        if g.deps != Deps::Ok {
            return;
        }
        while g.queued.len() < g.cap && !g.throttled() {
            let Some(id) = g.reserve.pop_first() else {
                break;
            };
            g.queued.insert(id);
            self.pending.push(super::pending_job(&self.jobs[&id]));
            self.dirty = true;
        }
    }

    /// A pending job left the queue: it started (`started`), or ended, or was held.
    pub(super) fn leave_queue(&mut self, id: JobId, started: bool) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        let gid = group_id(j);
        if let Some(t) = j.row.q.begin {
            self.begin_waiting.remove(&(t, id));
        }
        self.pending.remove(id);
        self.roster.remove(id);
        if let Some(g) = self.groups.get_mut(&gid) {
            g.pending.remove(&id);
            g.queued.remove(&id);
            g.reserve.remove(&id);
            g.blocked.remove(&id);
            g.never.remove(&id);
            if started {
                g.running += 1;
            }
        }
        self.top_up(gid);
        self.forget_group(gid);
    }

    /// A running job ended (or was requeued): room under its throttle.
    pub(super) fn left_running(&mut self, id: JobId) {
        let gid = group_id(&self.jobs[&id]);
        if let Some(g) = self.groups.get_mut(&gid) {
            g.running = g.running.saturating_sub(1);
        }
        self.top_up(gid);
        self.forget_group(gid);
    }

    fn forget_group(&mut self, gid: JobId) {
        if self
            .groups
            .get(&gid)
            .is_some_and(|g| g.pending.is_empty() && g.running == 0)
        {
            self.groups.remove(&gid);
            self.dep_waiting.remove(&gid);
        }
    }

    /// Whether a pending job waits for its `--begin` time.
    fn waits_to_begin(&self, j: &Job) -> bool {
        j.row
            .q
            .begin
            .is_some_and(|t| self.begin_waiting.contains(&(t, j.row.id)))
    }

    /// The jobs whose `--begin` time has come are eligible (unless held).
    pub(super) fn release_begun(&mut self, now: u64) {
        while let Some(&(t, id)) = self.begin_waiting.first() {
            if t > now {
                break;
            }
            self.begin_waiting.remove(&(t, id));
            let ready = self
                .jobs
                .get(&id)
                .is_some_and(|j| j.row.state == JobState::Pending && j.row.q.hold == Hold::None);
            if ready {
                self.set_eligible(id, true);
            }
        }
    }

    /// Hold or release a pending job (a released one still waits for its `--begin` time).
    pub(super) fn set_eligible(&mut self, id: JobId, eligible: bool) {
        let j = &self.jobs[&id];
        if eligible && self.waits_to_begin(j) {
            return;
        }
        let gid = group_id(j);
        if !eligible {
            self.pending.remove(id);
        } else if plain(j) && j.row.state == JobState::Pending && !self.pending.contains(id) {
            self.pending.push(super::pending_job(j));
            self.dirty = true;
        }
        let Some(g) = self.groups.get_mut(&gid) else {
            return;
        };
        if eligible {
            if !g.queued.contains(&id) && g.pending.contains(&id) {
                self.admit(gid, id);
            }
        } else {
            g.queued.remove(&id);
            g.reserve.remove(&id);
            g.blocked.remove(&id);
        }
        self.top_up(gid);
    }

    pub(crate) fn group(&self, gid: JobId) -> Option<&Group> {
        self.groups.get(&gid).map(|g| &**g)
    }

    /// The ids of array `job`'s tasks (those still in memory), or None when it is no array.
    pub(crate) fn array_tasks(&self, job: JobId) -> Option<impl Iterator<Item = &Job> + '_> {
        let n = *self.arrays.get(&job)?;
        Some(
            self.jobs
                .range(job..JobId(job.0 + n))
                .map(|(_, j)| &**j)
                .filter(move |j| j.row.q.array.is_some_and(|a| a.job == job)),
        )
    }

    /// The jobs a reference names: every task of an array, some of them, or one job.
    pub(crate) fn resolve(&self, r: &JobRef) -> Vec<JobId> {
        match self.array_tasks(r.job) {
            Some(tasks) => tasks
                .filter(|j| j.row.q.array.is_some_and(|a| r.names_task(a.index)))
                .map(|j| j.row.id)
                .collect(),
            None if r.tasks.is_none() && self.jobs.contains_key(&r.job) => vec![r.job],
            None => Vec::new(),
        }
    }

    /// A job's id as users see it (`12_3` for a task).
    pub(crate) fn shown(&self, id: JobId) -> String {
        match self.jobs.get(&id).and_then(|j| j.row.q.array) {
            Some(a) => a.to_string(),
            None => id.to_string(),
        }
    }

    /// Why a pending job that is not in the core's queue waits; None when the core decides.
    pub(crate) fn held_back(&self, j: &Job) -> Option<&'static str> {
        if j.row.state != JobState::Pending {
            return None;
        }
        let begin = self.waits_to_begin(j).then_some("BeginTime");
        if plain(j) {
            // Pending, unheld and begun, a plain job is in the core's queue.
            return j.row.q.hold.reason().or(begin);
        }
        if self.pending.contains(j.row.id) {
            return None;
        }
        if let Some(r) = j.row.q.hold.reason().or(begin) {
            return Some(r);
        }
        let g = self.groups.get(&group_id(j))?;
        if g.blocked.contains(&j.row.id) {
            return Some("Dependency");
        }
        if g.never.contains(&j.row.id) {
            return Some("DependencyNeverSatisfied");
        }
        Some(match g.deps {
            Deps::Waiting => "Dependency",
            Deps::Never(_) => "DependencyNeverSatisfied",
            Deps::Ok if g.throttled() => "JobArrayTaskLimit",
            Deps::Ok => "Priority",
        })
    }
}
