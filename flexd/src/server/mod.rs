//! The Unix-socket API: one task per connection reads frames (`proto::decode`), checks the
//! Hello, and hands each request to the dispatcher, the only code between the socket and the
//! synchronous [`handlers`]. Also the scheduling loop that wakes the core.

pub mod acct;
pub mod handlers;
pub mod http;
#[cfg(test)]
mod tests;

use crate::config::Settings;
use crate::exec::files;
use crate::exec::launch::{LaunchMsg, LaunchSink};
use crate::state::{node_fail, Effect, Outcome, State};
use crate::store::writer::{Done, Op, Writer};
use flex_proto::{self as proto, ErrorKind, FrameError, Hello, JobState, Request, Response};
use gres_plugin::JobId;
use handlers::Peer;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{watch, Notify};

/// The settings and the state, behind one lock.
pub struct Core {
    pub settings: Settings,
    pub state: State,
}

/// What every task shares.
pub struct Shared {
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
    pub acct: acct::Accounting,
    /// Counters and histograms for the metrics endpoint.
    pub metrics: crate::metrics::Metrics,
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Shared {
    pub fn new(
        core: Core,
        writer: Writer,
        launch_tx: mpsc::Sender<LaunchMsg>,
        run_dir: PathBuf,
        db: PathBuf,
    ) -> Shared {
        let max = core.settings.limits.max_frame_bytes as usize;
        Shared {
            core: Mutex::new(core),
            writer,
            launch_tx,
            run_dir,
            sched: Notify::new(),
            max_frame: AtomicUsize::new(max),
            in_flight: AtomicUsize::new(0),
            users: Mutex::new(HashMap::new()),
            acct: acct::Accounting::new(db),
            metrics: crate::metrics::Metrics::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A handler that panicked left the state as it was between transitions; carry on.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` on the core, then send its database changes to the writer while still holding
    /// the lock (so they reach the database in the order they happened) and wake the
    /// scheduler when something changed.
    pub fn with_core<R>(&self, f: impl FnOnce(&mut Core) -> R) -> R {
        let mut core = self.lock();
        let r = f(&mut core);
        let effects = core.state.take_outbox();
        let dirty = core.state.take_dirty();
        for e in effects {
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
                    _ => unreachable!("Effect::End carries an end"),
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
    pub async fn barrier(&self) {
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
    pub fn set_settings(&self, s: Settings) {
        self.max_frame
            .store(s.limits.max_frame_bytes as usize, Ordering::Relaxed);
        self.with_core(|c| {
            c.state.cluster.set_config(flex_sched::ClusterConfig {
                default_strategy: s.placement,
                round_up_fractions: s.round_up_fractions,
            });
            c.settings = s;
        });
        self.sched.notify_one();
    }

    pub fn settings(&self) -> Settings {
        self.lock().settings.clone()
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
                },
            )
        });
    }
}

/// Serve one connection until the client closes it.
pub async fn serve(shared: Arc<Shared>, stream: UnixStream) {
    let peer = match stream.peer_cred() {
        Ok(c) => Peer {
            uid: c.uid(),
            gid: c.gid(),
            pid: c.pid(),
            user: shared.user_name(c.uid()),
        },
        Err(e) => {
            tracing::warn!("connection without peer credentials refused: {e}");
            return;
        }
    };
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = Vec::with_capacity(8192);
    let max = || shared.max_frame.load(Ordering::Relaxed);
    let hello: Hello = match read(&mut rd, &mut buf, max()).await {
        Ok(h) => h,
        Err(FrameError::Closed) => return,
        Err(e) => {
            refuse(&mut rd, &mut wr, &buf, &e).await;
            return;
        }
    };
    if hello.version != proto::PROTOCOL_VERSION {
        tracing::info!(
            "{} (uid {}) speaks protocol version {}; refused",
            hello.client,
            peer.uid,
            hello.version
        );
        let msg = format!(
            "version mismatch: {} speaks protocol version {}, flexd speaks version {}",
            hello.client,
            hello.version,
            proto::PROTOCOL_VERSION
        );
        let _ = write(&mut wr, &Response::error(ErrorKind::VersionMismatch, msg)).await;
        return;
    }
    let server = format!("flexd {}", env!("CARGO_PKG_VERSION"));
    let ok = Response::Hello {
        version: proto::PROTOCOL_VERSION,
        server,
    };
    if write(&mut wr, &ok).await.is_err() {
        return;
    }
    loop {
        let req: Request = match read(&mut rd, &mut buf, max()).await {
            Ok(r) => r,
            Err(FrameError::Closed) => return,
            Err(e) => {
                refuse(&mut rd, &mut wr, &buf, &e).await;
                return;
            }
        };
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        let sent = answer(&shared, &peer, req, &mut wr).await;
        shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        if sent.is_err() {
            return;
        }
    }
}

/// Answer one request: one frame, or a listing's pages one after the other (each made under
/// the state's lock on its own, so other clients are served in between).
async fn answer(
    shared: &Shared,
    peer: &Peer,
    req: Request,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
) -> std::io::Result<()> {
    let mut next = Some(req);
    while let Some(req) = next.take() {
        let filter = match &req {
            Request::Queue(f) | Request::QueueRows(f) => Some(f.clone()),
            _ => None,
        };
        let resp = dispatch(shared, peer, req).await;
        next = handlers::next_page(filter, &resp);
        let frame = encode(&resp)?;
        drop(resp);
        wr.write_all(&frame).await?;
    }
    Ok(())
}

/// Answer a frame that cannot be read, then close. The rest of a frame refused for its size is
/// read and dropped first (for a while): a client still writing it would otherwise never get to
/// read why.
async fn refuse(
    rd: &mut tokio::net::unix::OwnedReadHalf,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    buf: &[u8],
    e: &FrameError,
) {
    let _ = write(wr, &bad_frame(e)).await;
    if let FrameError::TooLarge { size, .. } = e {
        let mut left = (size + 4).saturating_sub(buf.len());
        let mut scratch = vec![0u8; 64 << 10];
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while left > 0 {
                match rd.read(&mut scratch[..left.min(64 << 10)]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left -= n,
                }
            }
        })
        .await;
    }
}

fn bad_frame(e: &FrameError) -> Response {
    match e {
        FrameError::TooLarge { size, max } => Response::error(
            ErrorKind::LimitExceeded,
            format!("the request is {size} bytes, more than max_frame_bytes = {max}"),
        ),
        _ => Response::error(ErrorKind::InvalidRequest, e.to_string()),
    }
}

async fn read<T: serde::de::DeserializeOwned>(
    rd: &mut tokio::net::unix::OwnedReadHalf,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<T, FrameError> {
    loop {
        if let Some((msg, used)) = proto::decode(buf, max)? {
            buf.drain(..used);
            return Ok(msg);
        }
        if rd.read_buf(buf).await? == 0 {
            return Err(if buf.is_empty() {
                FrameError::Closed
            } else {
                FrameError::Malformed("connection closed inside a frame".into())
            });
        }
    }
}

async fn write(wr: &mut tokio::net::unix::OwnedWriteHalf, msg: &Response) -> std::io::Result<()> {
    wr.write_all(&encode(msg)?).await
}

/// Return freed heap pages to the system, once a second: glibc keeps what bursts of
/// submissions, listings and scheduling passes over a long queue freed in its arenas
/// otherwise, and flexd's resident size would stay at its peak.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let t0 = Instant::now();
        // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
        unsafe {
            libc::malloc_trim(0);
        }
        tracing::trace!("memory given back in {:?}", t0.elapsed());
    }
}

/// [`proto::encode`] into one buffer: the body is serialized after a placeholder for its
/// length, not copied behind it (a page of a `Queue` listing is ~1.5 MB).
fn encode(msg: &Response) -> std::io::Result<Vec<u8>> {
    let hint = match msg {
        Response::QueueRows { rows, .. } => rows.text_len() + 64,
        _ => 256,
    };
    let mut frame = Vec::with_capacity(4 + hint);
    frame.extend_from_slice(&[0; 4]);
    serde_json::to_writer(&mut frame, msg).expect("protocol types always serialize");
    let len = u32::try_from(frame.len() - 4)
        .map_err(|_| std::io::Error::other("an answer of 4 GiB or more cannot be framed"))?;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    Ok(frame)
}

/// The only place requests meet the state.
pub async fn dispatch(shared: &Shared, peer: &Peer, req: Request) -> Response {
    let now = unix_now();
    match req {
        Request::Submit(mut spec) => {
            if spec.account.as_deref().is_none_or(str::is_empty) {
                spec.account = Some(shared.acct.default_account(peer));
            }
            let prepared = shared.with_core(|c| {
                handlers::prepare_submit(&c.settings, &mut c.state, peer, spec, now)
            });
            let job = match prepared {
                Ok(j) => j,
                Err(r) => return r,
            };
            // Kept to give its resources back if the commit fails.
            let (uid, start) = (job.uid, job.start.clone());
            match shared.writer.submit(job).await {
                Ok(Ok((id, job))) => {
                    tracing::debug!("job {id}: submitted by {} (uid {})", peer.user, peer.uid);
                    shared.with_core(|c| c.state.add_submitted(&c.settings, id, *job));
                    Response::Submitted { job: id }
                }
                failed => {
                    let e = match failed {
                        Ok(Err(e)) => e,
                        _ => "the database writer has stopped".into(),
                    };
                    shared.with_core(|c| c.state.abandon_submission(uid, start.as_ref()));
                    Response::error(ErrorKind::Internal, format!("cannot store the job: {e}"))
                }
            }
        }
        Request::Accounting(q) => {
            let hosts = shared.with_core(|c| acct::hosts(&c.state));
            shared.acct.answer(peer, q, hosts, now).await
        }
        Request::JobEnded { job } => {
            let status = files::read_status(&shared.run_dir, job);
            let had_status = matches!(status, Ok(Some(_)));
            let (r, stale) = shared.with_core(|c| {
                let was_running = c
                    .state
                    .job(job)
                    .is_some_and(|j| j.row.state == JobState::Running);
                let r = handlers::job_ended(&mut c.state, peer, job, status);
                let stale = !was_running && r == Response::Pong;
                (r, stale)
            });
            // The end was recorded before (NODE_FAIL while its supervisor was still going):
            // nothing will remove these files after a commit.
            if stale && had_status {
                files::remove_job_files(&shared.run_dir, job);
            }
            r
        }
        other => {
            shared.with_core(|c| handlers::handle(&c.settings, &mut c.state, peer, other, now))
        }
    }
}

/// Run a scheduling pass whenever something changed (many changes → one pass) and once a
/// second; once a second also look after supervisors and forget old finished jobs.
pub async fn schedule_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ticked = tokio::select! {
            _ = shared.sched.notified() => false,
            _ = tick.tick() => true,
            _ = stop.changed() => return,
        };
        if ticked {
            check_supervisors(&shared);
            shared.with_core(|c| {
                let keep = c.settings.keep_finished.as_secs();
                c.state.prune_finished(unix_now().saturating_sub(keep));
            });
            give_back_memory();
        }
        let t0 = Instant::now();
        // The core runs on a copy, off the lock and off the runtime's workers, so clients are
        // served while it thinks; its decisions are checked again when they are applied.
        let plan = shared.with_core(|c| {
            c.state.take_dirty();
            c.state.plan(unix_now()).map(|p| (p, c.settings.policy))
        });
        // Only real passes go into the histogram (none runs while nothing is pending).
        let ran = plan.is_some();
        let started = match plan {
            None => 0,
            Some((plan, policy)) => {
                let now = plan.now;
                let Ok(d) = tokio::task::spawn_blocking(move || plan.decide(&policy)).await else {
                    tracing::error!("the scheduling pass panicked");
                    continue;
                };
                shared.with_core(|c| c.state.apply(&c.settings, d, now))
            }
        };
        let took = t0.elapsed();
        if ran {
            shared.metrics.sched_pass(took);
        }
        if started > 0 || took > Duration::from_millis(5) {
            tracing::debug!("scheduling pass started {started} jobs in {took:?}");
        }
        // Leave the clients twice the time a pass took, and at least 5 ms: under a stream of
        // submissions (each one a change) passes take at most a third of a core, and at most
        // 200 a second when the queue is short. A job submitted to an empty queue starts with
        // its commit when it fits, without waiting for a pass.
        tokio::time::sleep((2 * took).max(Duration::from_millis(5))).await;
    }
}

/// End the running jobs whose supervisor is gone: from their status file when it wrote one,
/// NODE_FAIL (and kill what is left of the job) otherwise.
pub fn check_supervisors(shared: &Shared) {
    let sups = shared.with_core(|c| c.state.supervisors());
    for (job, pid) in sups {
        if files::is_supervisor(pid, job, &shared.run_dir) {
            continue;
        }
        let outcome = match files::read_status(&shared.run_dir, job) {
            Ok(Some(s)) => Outcome::from(&s),
            other => {
                if let Some(p) = files::find_supervisor(&shared.run_dir, job, None) {
                    shared.with_core(|c| c.state.set_supervisor(job, p));
                    continue;
                }
                match files::read_status(&shared.run_dir, job) {
                    Ok(Some(s)) => Outcome::from(&s),
                    _ => {
                        if let Err(e) = other {
                            tracing::error!("job {job}: {e}");
                        }
                        kill_leftovers(&shared.run_dir, job);
                        node_fail(
                            unix_now(),
                            format!("its supervisor (pid {pid}) died without recording an end"),
                        )
                    }
                }
            }
        };
        tracing::info!(
            "job {job}: its supervisor is gone; ending it as {}",
            outcome.state
        );
        shared.with_core(|c| c.state.finish(job, outcome));
    }
}

/// Kill what is left of a job whose supervisor vanished.
pub fn kill_leftovers(run_dir: &std::path::Path, job: JobId) {
    if let Ok(Some(run)) = files::read_run(run_dir, job) {
        if let Some(pgid) = run.job_pgid {
            let n = files::kill_orphaned_group(pgid, run.uid);
            if n > 0 {
                tracing::warn!("job {job}: killed {n} processes left without a supervisor");
            }
        }
        // What left the group is still in the job's cgroup.
        let cgroup = run.cgroup.as_deref();
        if let Some(cg) = cgroup.and_then(crate::exec::cgroup::JobCgroup::existing) {
            let n = cg.pids().len();
            if n > 0 {
                tracing::warn!("job {job}: killing {n} processes left in its cgroup");
            }
            if !cg.kill_and_remove(Duration::from_secs(2)) {
                tracing::warn!("job {job}: cannot remove its cgroup {}", cg.path.display());
            }
        }
    }
}
