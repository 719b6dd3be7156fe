//! Dependencies, decided before each pass: a group's dependency (evaluated on its first
//! pending task, the same for every task), or with `aftercorr` each task's own (task N after
//! task N of the other array). What can never hold stays pending as DependencyNeverSatisfied,
//! or is cancelled with `kill_invalid_depend`.

use super::eligible::{group_id, Deps};
use super::{Job, State};
use crate::config::Settings;
use flex_proto::{DepKind, DepTerm, JobRef, JobState, TaskRange};
use gres_plugin::JobId;
use std::collections::BTreeSet;

impl State {
    /// Re-evaluate the dependencies that wait: before each pass, so the core sees only jobs
    /// that may start. One that can no longer hold is cancelled with `kill_invalid_depend`.
    pub(super) fn refresh_dependencies(&mut self, s: &Settings, now: u64) {
        let waiting: Vec<JobId> = self.dep_waiting.iter().copied().collect();
        for gid in waiting {
            if self.groups.get(&gid).is_some_and(|g| g.per_task) {
                self.refresh_tasks(s, gid, now);
                continue;
            }
            let Some(first) = self.groups.get(&gid).and_then(|g| g.first_pending()) else {
                self.dep_waiting.remove(&gid);
                continue;
            };
            let d = self.evaluate(&self.jobs[&first]);
            if d == Deps::Waiting {
                continue;
            }
            self.dep_waiting.remove(&gid);
            let g = self.groups.get_mut(&gid).expect("a waiting group exists");
            g.deps = d.clone();
            self.dirty = true;
            match d {
                Deps::Never(why) if s.kill_invalid_depend => {
                    tracing::info!("job {gid}: dependency never satisfied ({why}); cancelling");
                    let ids: Vec<JobId> = g.pending().iter().copied().collect();
                    let reason = format!("DependencyNeverSatisfied: {why}");
                    for id in ids {
                        self.end_pending(id, JobState::Cancelled, now, Some(reason.clone()), None);
                    }
                }
                _ => self.top_up(gid),
            }
        }
    }

    /// A group whose tasks each have their own dependency (`aftercorr`): the blocked tasks
    /// whose dependency now holds join its reserve.
    fn refresh_tasks(&mut self, s: &Settings, gid: JobId, now: u64) {
        let (mut ready, mut never) = (Vec::new(), Vec::new());
        for &id in self.groups[&gid].blocked.iter() {
            match self.evaluate(&self.jobs[&id]) {
                Deps::Ok => ready.push(id),
                Deps::Never(why) => never.push((id, why)),
                Deps::Waiting => {}
            }
        }
        let g = self.groups.get_mut(&gid).expect("a waiting group exists");
        for id in &ready {
            g.blocked.remove(id);
            g.reserve.insert(*id);
        }
        for (id, _) in &never {
            g.blocked.remove(id);
            g.never.insert(*id);
        }
        if g.blocked.is_empty() {
            self.dep_waiting.remove(&gid);
        }
        self.dirty |= !ready.is_empty() || !never.is_empty();
        if s.kill_invalid_depend {
            for (id, why) in never {
                let reason = Some(format!("DependencyNeverSatisfied: {why}"));
                self.end_pending(id, JobState::Cancelled, now, reason, None);
            }
        }
        self.top_up(gid);
    }

    /// Where the dependency of `j` (and its group) stands now.
    fn evaluate(&self, j: &Job) -> Deps {
        let Some(dep) = &j.row.q.dependency else {
            return Deps::Ok;
        };
        let results: Vec<Deps> = dep.terms.iter().map(|t| self.term(j, t)).collect();
        let ok = |d: &Deps| *d == Deps::Ok;
        let never = |d: &&Deps| matches!(d, Deps::Never(_));
        let (done, failed) = if dep.any {
            (results.iter().any(ok), results.iter().all(|d| never(&d)))
        } else {
            (results.iter().all(ok), results.iter().any(|d| never(&d)))
        };
        match (done, results.iter().find(never)) {
            (true, _) => Deps::Ok,
            (false, Some(Deps::Never(why))) if failed => Deps::Never(why.clone()),
            _ => Deps::Waiting,
        }
    }

    fn term(&self, j: &Job, t: &DepTerm) -> Deps {
        let (kind, r) = match t {
            DepTerm::Singleton => return self.singleton(j),
            DepTerm::On { kind, job } => (*kind, job),
        };
        // aftercorr: task N of this array waits for task N of that one (and for nothing when
        // that array has no task N).
        let corr = match (kind, j.row.q.array) {
            (DepKind::AfterCorr, Some(a)) if r.tasks.is_none() => Some(JobRef {
                job: r.job,
                tasks: Some(vec![TaskRange {
                    first: a.index,
                    last: a.index,
                    step: 1,
                }]),
            }),
            _ => None,
        };
        let targets = self.resolve(corr.as_ref().unwrap_or(r));
        if targets.is_empty() {
            if corr.is_some() && self.arrays.contains_key(&r.job) {
                return Deps::Ok;
            }
            return Deps::Never(format!("job {r} is unknown"));
        }
        let mut all = Deps::Ok;
        for id in targets {
            let st = self.jobs[&id].row.state;
            // A dependee that waits on a dependency that can never hold never starts.
            let stuck = st == JobState::Pending
                && self
                    .groups
                    .get(&group_id(&self.jobs[&id]))
                    .is_some_and(|g| matches!(g.deps, Deps::Never(_)) || g.never.contains(&id));
            let d = match kind {
                _ if stuck => Deps::Never(format!("job {} can never start", self.shown(id))),
                DepKind::After if st != JobState::Pending => Deps::Ok,
                DepKind::AfterAny if st.is_finished() => Deps::Ok,
                DepKind::AfterOk | DepKind::AfterCorr if st == JobState::Completed => Deps::Ok,
                DepKind::AfterOk | DepKind::AfterCorr if st.is_finished() => {
                    Deps::Never(format!("job {} ended {st}", self.shown(id)))
                }
                DepKind::AfterNotOk if st == JobState::Completed => {
                    Deps::Never(format!("job {} completed", self.shown(id)))
                }
                DepKind::AfterNotOk if st.is_finished() => Deps::Ok,
                _ => Deps::Waiting,
            };
            match d {
                Deps::Never(_) => return d,
                Deps::Waiting => all = Deps::Waiting,
                Deps::Ok => {}
            }
        }
        all
    }

    /// No earlier job of the same user and name (outside this group) is pending or running.
    fn singleton(&self, j: &Job) -> Deps {
        let gid = group_id(j);
        let earlier = self.jobs.range(..gid).any(|(_, o)| {
            o.row.uid == j.row.uid
                && o.row.name == j.row.name
                && !o.row.state.is_finished()
                && group_id(o) != gid
        });
        if earlier {
            Deps::Waiting
        } else {
            Deps::Ok
        }
    }

    /// Jobs that waiting dependencies name: kept in memory while they wait.
    pub(super) fn depended_on(&self) -> BTreeSet<JobId> {
        let mut out = BTreeSet::new();
        for gid in &self.dep_waiting {
            let Some(first) = self.groups.get(gid).and_then(|g| g.first_pending()) else {
                continue;
            };
            for t in self.jobs[&first]
                .row
                .q
                .dependency
                .iter()
                .flat_map(|d| &d.terms)
            {
                if let DepTerm::On { job, .. } = t {
                    out.insert(job.job);
                }
            }
        }
        out
    }
}
