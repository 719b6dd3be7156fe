//! Taking over from a flexd that stopped: its jobs come back from the database; running ones
//! are re-adopted, ended from their status file, queued again when they never ran, or failed
//! as NODE_FAIL.

use super::count::Text;
use super::{node_fail, Job, Outcome, State};
use crate::exec::files::StatusFile;
use crate::store::{JobRow, StoredAlloc};
use flex_proto::JobState;
use flex_sched::Allocation;
use gres_plugin::JobId;
use std::collections::HashMap;

/// What recovery finds about a job that was running when flexd stopped.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    /// Its supervisor wrote how it ended.
    Ended(StatusFile),
    /// Its supervisor still runs.
    Alive(u32),
    /// Neither: the supervisor is gone without a status file.
    Gone,
    /// No supervisor recorded or running, no status file and no run file: the job's first
    /// process never ran (a supervisor writes the run file before it lets the job run),
    /// because flexd stopped between committing the start and launching it.
    NeverRan,
}

impl State {
    /// Load the jobs of the database after a restart. Running jobs are re-adopted when their
    /// supervisor still runs (their allocation re-occupied, never twice), ended from their
    /// status file when it wrote one, and NODE_FAIL otherwise. `find` looks for both;
    /// `gone` is told about each NODE_FAIL (to kill what is left of the job).
    pub(crate) fn recover(
        &mut self,
        rows: Vec<JobRow>,
        texts: &HashMap<JobId, [Text; 2]>,
        now: u64,
        mut find: impl FnMut(&JobRow) -> Found,
        mut gone: impl FnMut(&JobRow),
    ) {
        // Running tasks first, so that an array's throttle counts them before its pending
        // tasks enter the queue.
        let mut rows = rows;
        rows.sort_by_key(|r| r.state == JobState::Pending);
        for mut row in rows {
            self.names.share(&mut row);
            let id = row.id;
            let state = row.state;
            let job_texts = texts.get(&id).copied().unwrap_or_default();
            let job = Job {
                texts: self.held.hold(row.uid, job_texts, 1, false),
                row,
                alloc: None,
                cancel_pending: None,
                requeue_pending: false,
            };
            match state {
                JobState::Pending => {
                    self.reserve(&job);
                    self.jobs.insert(id, Box::new(job));
                    self.enqueue(id);
                }
                JobState::Running => self.recover_running(job, now, &mut find, &mut gone),
                _ => {
                    self.jobs.insert(id, Box::new(job));
                }
            }
        }
        self.dirty = true;
    }

    /// Bring back one job that was running: re-adopted with its allocation, or ended from
    /// what `find` found.
    fn recover_running(
        &mut self,
        mut job: Job,
        now: u64,
        find: &mut impl FnMut(&JobRow) -> Found,
        gone: &mut impl FnMut(&JobRow),
    ) {
        let id = job.row.id;
        let found = find(&job.row);
        if found == Found::NeverRan {
            // Nothing of it ran and nothing holds its resources: back in the queue.
            tracing::info!("job {id}: its start was stored but it never ran; queued again");
            self.jobs.insert(id, Box::new(job));
            self.requeue_ended(id, now, false, None);
            return;
        }
        self.reserve(&job);
        let adopted = match (&found, &job.row.alloc) {
            (Found::Alive(pid), Some(a)) => self.reoccupy(a).map(|al| (al, *pid)),
            (Found::Alive(_), None) => Err("it has no allocation".to_string()),
            _ => Err(String::new()),
        };
        self.running.insert(id);
        self.jobs.insert(id, Box::new(job.clone()));
        self.count_running(id);
        match adopted {
            Ok((al, pid)) => {
                tracing::info!("job {id}: re-adopted, supervisor pid {pid}");
                job.alloc = Some(Box::new(al));
                job.row.supervisor_pid = Some(pid);
                self.jobs.insert(id, Box::new(job));
            }
            Err(why) => {
                self.jobs.insert(id, Box::new(job));
                let outcome = match found {
                    Found::Ended(s) => Outcome::from(&s),
                    Found::Alive(pid) => {
                        tracing::error!(
                            "job {id}: its allocation cannot be re-adopted ({why}); ending it"
                        );
                        let _ = self.signaller.supervisor(pid, libc::SIGTERM);
                        node_fail(now, format!("allocation lost on restart: {why}"))
                    }
                    Found::Gone | Found::NeverRan => {
                        gone(&self.jobs[&id].row);
                        node_fail(
                            now,
                            "its supervisor is gone without recording an end".into(),
                        )
                    }
                };
                self.finish(id, outcome);
            }
        }
    }

    /// Occupy a stored allocation again, after checking it against the host model.
    fn reoccupy(&mut self, a: &StoredAlloc) -> Result<Allocation, String> {
        let exists = self.cluster.hosts().any(|(h, _)| h == a.host_id());
        let checked = if exists {
            a.to_alloc(self.cluster.host(a.host_id()))
        } else {
            Err(format!("host {} does not exist", a.host_id()))
        };
        checked.and_then(|al| {
            self.cluster.try_occupy(&al)?;
            Ok(al)
        })
    }
}
