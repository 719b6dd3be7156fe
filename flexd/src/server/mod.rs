//! The Unix-socket API and the loops around the core:
//!
//! - [`conn`]: one task per connection reads frames, checks the Hello, and hands each request
//!   to [`dispatch`], which routes it to its handler, one file per request in [`handlers`].
//! - [`sched_loop`]: wakes the pure scheduler core and applies its decisions.
//! - [`health`]: supervisors that are gone, and what they left behind.
//! - [`http`]: the metrics endpoint.
//!
//! [`Shared`] is what every task shares: the settings and the state behind one lock, the
//! database writer, the launcher's queue.

pub(crate) mod conn;
pub(crate) mod dispatch;
pub(crate) mod handlers;
pub(crate) mod health;
pub(crate) mod http;
pub(crate) mod sched_loop;
#[cfg(test)]
mod tests;

pub(crate) use conn::serve;
pub(crate) use health::kill_leftovers;
pub(crate) use sched_loop::schedule_loop;

use crate::config::Settings;
use crate::exec::files;
use crate::exec::launch::{LaunchMsg, LaunchSink};
use crate::state::{Effect, Outcome, State};
use crate::store::writer::{Done, Op, Writer};
use flex_proto::JobState;
use gres_plugin::JobId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// The settings and the state, behind one lock.
pub(crate) struct Core {
    pub settings: Settings,
    pub state: State,
}

/// What every task shares.
pub(crate) struct Shared {
    core: Mutex<Core>,
    pub writer: Writer,
    pub launch_tx: mpsc::Sender<LaunchMsg>,
    pub run_dir: PathBuf,
    /// Wakes the scheduling loop.
    pub sched: Notify,
    /// The frame limit of the current settings.
    pub max_frame: AtomicUsize,
    /// Requests being answered (shutdown waits for them).
    pub in_flight: AtomicUsize,
    users: Mutex<HashMap<u32, String>>,
    /// The database accounting reads, and default accounts.
    pub acct: handlers::accounting::Accounting,
    /// Counters and histograms for the metrics endpoint.
    pub metrics: crate::metrics::Metrics,
    /// Open connections by uid, and in all.
    conns: Mutex<HashMap<u32, u32>>,
    open_conns: AtomicUsize,
    /// Descriptors connections may use: the open-file limit less those open at start.
    pub fd_budget: AtomicUsize,
    /// Bytes of frames still arriving that all connections together may hold
    /// (`max_buffered_bytes`, read at start), as permits.
    pub buffered: std::sync::Arc<tokio::sync::Semaphore>,
    pub max_buffered: usize,
    /// What flexd enforces on jobs here (cgroup controllers), found at its start, for
    /// `flexcontrol show config`.
    pub enforcement: std::sync::OnceLock<Vec<(String, String)>>,
    /// The latest GPU telemetry of the leaves jobs hold, and where it comes from.
    gauges: Mutex<(String, Vec<crate::telemetry::LeafGauge>)>,
}

/// A connection's place in the budgets; given back on drop.
pub(crate) struct ConnSlot<'a> {
    shared: &'a Shared,
    /// None for a uid that is not counted (root, flexd's own).
    uid: Option<u32>,
}

impl Drop for ConnSlot<'_> {
    fn drop(&mut self) {
        let Some(uid) = self.uid else {
            return;
        };
        let mut conns = self.shared.conns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = conns.get_mut(&uid) {
            *n -= 1;
            if *n == 0 {
                conns.remove(&uid);
            }
        }
    }
}

/// A connection counted in the total; given back on drop.
pub(crate) struct OpenConn(std::sync::Arc<Shared>);

impl Drop for OpenConn {
    fn drop(&mut self) {
        self.0.open_conns.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Shared {
    pub(crate) fn new(
        core: Core,
        writer: Writer,
        launch_tx: mpsc::Sender<LaunchMsg>,
        run_dir: PathBuf,
        db: PathBuf,
    ) -> Shared {
        let max = core.settings.limits.max_frame_bytes as usize;
        let max_buffered = core.settings.limits.max_buffered_bytes as usize;
        Shared {
            core: Mutex::new(core),
            writer,
            launch_tx,
            run_dir,
            sched: Notify::new(),
            max_frame: AtomicUsize::new(max),
            in_flight: AtomicUsize::new(0),
            users: Mutex::new(HashMap::new()),
            acct: handlers::accounting::Accounting::new(db),
            metrics: crate::metrics::Metrics::default(),
            conns: Mutex::new(HashMap::new()),
            open_conns: AtomicUsize::new(0),
            fd_budget: AtomicUsize::new(usize::MAX),
            buffered: std::sync::Arc::new(tokio::sync::Semaphore::new(max_buffered)),
            max_buffered,
            enforcement: std::sync::OnceLock::new(),
            gauges: Mutex::new((String::new(), Vec::new())),
        }
    }

    /// Keep the latest telemetry readings for the metrics endpoint.
    pub(crate) fn set_gauges(&self, source: &str, gauges: Vec<crate::telemetry::LeafGauge>) {
        let mut g = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        *g = (source.to_string(), gauges);
    }

    /// The latest telemetry readings and their source ("" before the first sample).
    pub(crate) fn gauges(&self) -> (String, Vec<crate::telemetry::LeafGauge>) {
        self.gauges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Count a new connection in the total, unless it would eat into `reserved_fds`: then
    /// Err with why (the caller closes it at once).
    pub(crate) fn open_conn(self: &std::sync::Arc<Self>) -> Result<OpenConn, String> {
        let reserved = self.limits().reserved_fds as usize;
        let max = self
            .fd_budget
            .load(Ordering::Relaxed)
            .saturating_sub(reserved);
        let n = self.open_conns.fetch_add(1, Ordering::SeqCst);
        let conn = OpenConn(self.clone());
        if n >= max {
            return Err(format!(
                "{n} connections open, as many as the open-file limit allows with \
                 reserved_fds = {reserved} kept free; closing a new one"
            ));
        }
        Ok(conn)
    }

    /// Take a place for a connection of `uid`, or say why it has none.
    /// Root and flexd's own user are not counted: job supervisors report ends as them, and
    /// many wait at once while the database cannot be written (the descriptor budget still
    /// bounds them).
    pub(crate) fn conn_slot(&self, uid: u32, user: &str) -> Result<ConnSlot<'_>, String> {
        if uid == 0 || uid == nix::unistd::geteuid().as_raw() {
            return Ok(ConnSlot {
                shared: self,
                uid: None,
            });
        }
        let max = self.limits().max_connections_per_user;
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let n = conns.entry(uid).or_insert(0);
        if *n >= max {
            return Err(format!(
                "{user} already has {n} connections open (max_connections_per_user = {max})"
            ));
        }
        *n += 1;
        Ok(ConnSlot {
            shared: self,
            uid: Some(uid),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A handler that panicked left the state as it was between transitions; carry on.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` on the core, then send its database changes to the writer while still holding
    /// the lock (so they reach the database in the order they happened) and wake the
    /// scheduler when something changed.
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&mut Core) -> R) -> R {
        let mut core = self.lock();
        let r = f(&mut core);
        let effects = core.state.take_outbox();
        let dirty = core.state.take_dirty();
        for e in effects {
            if let Some(sendmail) = &core.settings.sendmail {
                if let Some(m) = crate::mail::for_effect(&e, |id| core.state.job(id)) {
                    crate::mail::send(sendmail, m);
                }
            }
            self.send(e);
        }
        drop(core);
        if dirty {
            self.sched.notify_one();
        }
        r
    }

    fn send(&self, e: Effect) {
        self.metrics.effect(&e);
        match e {
            Effect::Write(op) => self.writer.send(op, Done::Nothing),
            Effect::Start(op, launch) => {
                let tx = self.launch_tx.clone();
                let job = launch.job;
                self.writer.send(
                    op,
                    Done::Then(Box::new(move |r| match r {
                        Ok(()) => {
                            let _ = tx.send(LaunchMsg::Launch(launch));
                        }
                        Err(e) => tracing::error!(
                            "job {job}: its start could not be stored ({e}); not starting it"
                        ),
                    })),
                );
            }
            Effect::Launch(launch) => {
                let _ = self.launch_tx.send(LaunchMsg::Launch(launch));
            }
            Effect::End(op) => {
                let job = match &op {
                    Op::End(e) => e.job,
                    Op::Requeue { job, .. } => *job,
                    _ => unreachable!("Effect::End carries an end or a requeue"),
                };
                let dir = self.run_dir.clone();
                self.writer.send(
                    op,
                    Done::Then(Box::new(move |r| {
                        if r.is_ok() {
                            files::remove_job_files(&dir, job);
                        }
                    })),
                );
            }
        }
    }

    /// Wait until every change sent so far is committed.
    pub(crate) async fn barrier(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.writer.send(
            Op::Barrier,
            Done::Then(Box::new(move |_| {
                let _ = tx.send(());
            })),
        );
        let _ = rx.await;
    }

    /// Replace the settings (after a reload).
    pub(crate) fn set_settings(&self, s: Settings) {
        self.max_frame
            .store(s.limits.max_frame_bytes as usize, Ordering::Relaxed);
        self.with_core(|c| {
            c.state.cluster.set_config(s.cluster_config());
            c.settings = s;
        });
        self.sched.notify_one();
    }

    pub(crate) fn settings(&self) -> Settings {
        self.lock().settings.clone()
    }

    /// The current limits (without copying the rest of the settings).
    pub(crate) fn limits(&self) -> crate::config::Limits {
        self.lock().settings.limits.clone()
    }

    fn user_name(&self, uid: u32) -> String {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        users
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map_or_else(|| uid.to_string(), |u| u.name)
            })
            .clone()
    }
}

impl LaunchSink for Shared {
    fn launched(&self, job: JobId, pid: u32, master_port: u16) {
        self.with_core(|c| c.state.launched(job, pid, master_port));
    }

    fn failed(&self, job: JobId, why: String) {
        self.with_core(|c| {
            c.state.finish(
                job,
                Outcome {
                    state: JobState::Failed,
                    exit_code: None,
                    signal: None,
                    time: unix_now(),
                    note: Some(why),
                    max_rss: None,
                    cpu_usec: None,
                },
            )
        });
    }
}
