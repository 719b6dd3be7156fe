//! flexcontrol's transitions: hold and release a pending job, requeue a running or finished
//! one (keeping its id; the run it ended stays in accounting), update a job's name, time
//! limit, priority and nice. Errors are for the user and name the job.

use super::{Effect, State};
use crate::store::writer::Op;
use crate::store::{Hold, Update};
use flex_proto::JobState;
use gres_plugin::JobId;

/// One `key=value` of `flexcontrol update`, as flexd applies it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Change {
    Name(String),
    TimeLimit(u64),
    Priority(i64),
    Nice(i64),
}

impl State {
    /// Hold a pending job (`root`: JobHeldAdmin), or release it.
    pub(crate) fn set_hold(&mut self, id: JobId, hold: bool, root: bool) -> Result<(), String> {
        let shown = self.shown(id);
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or(format!("job {shown} not found"))?;
        if j.row.state != JobState::Pending {
            return Err(format!("job {shown} is {}, not pending", j.row.state));
        }
        let to = match (hold, j.row.q.hold) {
            (true, _) if root => Hold::Admin,
            (true, Hold::Admin) => {
                return Err(format!("job {shown} is already held by root"));
            }
            (true, _) => Hold::User,
            (false, Hold::None) => return Err(format!("job {shown} is not held")),
            (false, Hold::Admin) if !root => {
                return Err(format!(
                    "job {shown} was held by root (JobHeldAdmin): only root may release it"
                ))
            }
            (false, _) => Hold::None,
        };
        let was = j.row.q.hold;
        j.row.q.hold = to;
        self.outbox
            .push(Effect::Write(Op::Hold { job: id, hold: to }));
        if (was == Hold::None) != (to == Hold::None) {
            self.set_eligible(id, to == Hold::None);
        }
        self.dirty = true;
        Ok(())
    }

    /// Put a job back in the queue (held when `hold`): a running one is ended first (its
    /// supervisor gives it the kill grace), a finished one at once.
    pub(crate) fn requeue(&mut self, id: JobId, hold: bool, now: u64) -> Result<(), String> {
        let shown = self.shown(id);
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or(format!("job {shown} not found"))?;
        if !j.row.q.requeue {
            return Err(format!(
                "job {shown} was submitted with --no-requeue and cannot be requeued"
            ));
        }
        match j.row.state {
            JobState::Pending => Err(format!("job {shown} is pending: nothing to requeue")),
            JobState::Running if j.row.q.requeue_requested.is_some() => {
                Err(format!("job {shown} is already being requeued"))
            }
            JobState::Running => {
                j.row.q.requeue_requested = Some(hold);
                self.outbox
                    .push(Effect::Write(Op::RequeueRequested { job: id, hold }));
                match j.row.supervisor_pid {
                    Some(pid) => self.signaller.supervisor(pid, libc::SIGTERM),
                    None => {
                        j.requeue_pending = true;
                        Ok(())
                    }
                }
            }
            _ => {
                self.requeue_ended(id, now, hold, None);
                Ok(())
            }
        }
    }

    /// A job that ended goes back to the queue with one more restart (not to start before
    /// `begin`, when given).
    pub(super) fn requeue_ended(&mut self, id: JobId, time: u64, hold: bool, begin: Option<u64>) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let from = j.row.state;
        // A cancel of its run is not one of the next.
        j.cancel_pending = None;
        // Its end gave the user's count back; it is queued again.
        let qos = super::count::qos_key(j.row.qos.as_deref());
        self.queued.add(j.row.uid, qos, 1);
        self.held.queue(j.texts, 1);
        let r = &mut j.row;
        r.state = JobState::Pending;
        r.start_time = None;
        r.end_time = None;
        r.exit_code = None;
        r.signal = None;
        r.reason = None;
        r.alloc = None;
        r.supervisor_pid = None;
        r.master_port = None;
        r.q.restarts += 1;
        r.q.requeue_requested = None;
        r.q.mails_sent = 0;
        r.q.hold = if hold { Hold::User } else { Hold::None };
        if begin.is_some() {
            r.q.begin = begin;
        }
        let hold = r.q.hold;
        tracing::info!("job {id}: requeued (restart {})", r.q.restarts);
        self.outbox.push(Effect::Write(Op::Requeue {
            job: id,
            time,
            hold,
            from,
        }));
        self.enqueue(id);
        self.dirty = true;
    }

    /// Apply `flexcontrol update` changes (checked by the caller for who may make them).
    pub(crate) fn update(&mut self, id: JobId, changes: &[Change]) -> Result<(), String> {
        let shown = self.shown(id);
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or(format!("job {shown} not found"))?;
        let mut u = Update {
            job: id,
            name: None,
            request: None,
            priority: None,
            nice: None,
        };
        let pending = j.row.state == JobState::Pending;
        for c in changes {
            match c {
                Change::Name(n) => {
                    j.row.name = n.clone();
                    u.name = Some(n.clone());
                }
                Change::TimeLimit(_) | Change::Priority(_) | Change::Nice(_) if !pending => {
                    return Err(format!(
                        "job {shown} is {}: only a pending job's time limit, priority and nice \
                         can change",
                        j.row.state
                    ));
                }
                Change::TimeLimit(t) => {
                    j.row.request.time_limit_s = *t;
                    u.request = Some(j.row.request.clone());
                }
                Change::Priority(p) => {
                    j.row.priority = *p;
                    u.priority = Some(*p);
                }
                Change::Nice(n) => {
                    j.row.q.nice = *n;
                    u.nice = Some(*n);
                }
            }
        }
        if pending {
            // Priorities are computed from the base priority the roster keeps.
            self.roster.remove(id);
            self.roster.add(&self.jobs[&id]);
        }
        let requeue = pending && self.pending.contains(id);
        if requeue {
            // The core's queue holds the old request and priority.
            self.pending.remove(id);
            self.pending.push(super::pending_job(&self.jobs[&id]));
        }
        self.outbox.push(Effect::Write(Op::Update(Box::new(u))));
        self.dirty = true;
        Ok(())
    }
}
