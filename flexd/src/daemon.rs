//! Starting and stopping flexd: settings, paths, the host model, the database and recovery of
//! the jobs that ran while flexd was down, then the socket, the scheduling loop and signals
//! (SIGHUP reloads the config; SIGTERM/SIGINT stop flexd, its jobs keep running).

use crate::config::{ConfigError, Overrides, Settings};
use crate::exec::affinity::CpuMap;
use crate::exec::cgroup::devices::GpuDevices;
use crate::exec::files::{self};
use crate::exec::launch::{LaunchMsg, Launcher};
use crate::paths::Paths;
use crate::server::{self, unix_now, Core, Shared};
use crate::state::{Found, Signaller, State};
use crate::store::writer::{Done, Op, Writer};
use crate::store::{self, StoreError};
use flex_sched::Cluster;
use gres_plugin::probe::Discovered;
use gres_plugin::JobId;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How flexd was started.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The config file (`--config` or FLEX_CONFIG); None: the compiled-in defaults only.
    pub config: Option<PathBuf>,
    pub overrides: Overrides,
    /// Use the topology file even when NVML finds GPUs.
    pub force_topology: bool,
}

/// Why flexd could not start. Each maps to an exit code (documented in flexd --help).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("another flexd answers on {0}")]
    AlreadyRunning(PathBuf),
    #[error("another flexd uses the state directory {0} (it holds a lock on the directory)")]
    StateLocked(PathBuf),
    #[error("state directory {path}: {why}")]
    Insecure { path: PathBuf, why: String },
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("host model: {0}")]
    Topology(#[from] gres_plugin::probe::ProbeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl DaemonError {
    /// The process exit code: 2 configuration, 3 already running, 4 host model, 5 database,
    /// 1 anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::Config(_) => 2,
            DaemonError::AlreadyRunning(_) | DaemonError::StateLocked(_) => 3,
            DaemonError::Topology(_) => 4,
            DaemonError::Store(_) => 5,
            DaemonError::NotASocket { .. }
            | DaemonError::Io { .. }
            | DaemonError::Insecure { .. } => 1,
        }
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> DaemonError + 'a {
    move |source| DaemonError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Signals through the kernel: to supervisors by pid, to a job's group by the pgid its
/// supervisor wrote in the run file.
struct KernelSignaller {
    run_dir: PathBuf,
}

impl Signaller for KernelSignaller {
    fn supervisor(&self, pid: u32, signal: i32) -> Result<(), String> {
        let sig = Signal::try_from(signal).map_err(|e| e.to_string())?;
        kill(Pid::from_raw(pid as i32), sig)
            .map_err(|e| format!("cannot signal supervisor {pid}: {e}"))
    }

    fn job_group(&self, job: JobId, signal: i32) -> Result<(), String> {
        let sig = Signal::try_from(signal).map_err(|e| e.to_string())?;
        let pgid = files::read_run(&self.run_dir, job)?
            .and_then(|r| r.job_pgid)
            .ok_or_else(|| format!("job {job} is still starting; try again"))?;
        killpg(Pid::from_raw(pgid), sig).map_err(|e| format!("cannot signal job {job}: {e}"))
    }
}

/// Run flexd in the foreground until SIGTERM or SIGINT.
pub fn run(opts: Options) -> Result<(), DaemonError> {
    let (settings, warnings) = Settings::load(opts.config.as_deref(), &opts.overrides)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    let paths = private_dirs(&settings)?;
    for dir in [&paths.state_dir, &paths.run_dir] {
        check_writable(dir)?;
    }
    let lock = lock_state_dir(&paths)?;
    let fd_limit = raise_nofile();
    check_socket(&paths.socket)?;
    let (cluster, cpus, enforced, source, devices) = host_model(&paths, &opts, &settings)?;
    let mut sampler = sampler(&paths, &source, &settings);
    let (writer, _writer_thread, state, gpu_totals) =
        recovered_state(&paths, &settings, cluster, cpus)?;
    if let Some(s) = sampler.as_mut() {
        s.resume(gpu_totals);
    }
    let (launch_tx, launch_rx) = mpsc::channel();
    let shared = Arc::new(Shared::new(
        Core { settings, state },
        writer,
        launch_tx,
        paths.run_dir.clone(),
        paths.db.clone(),
    ));
    let _ = shared.enforcement.set(enforced);
    shared.with_core(|_| ());
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count());
    shared
        .fd_budget
        .store(fd_limit.saturating_sub(open_now), Ordering::Relaxed);
    let launcher = Launcher {
        exe: std::env::current_exe().map_err(io("own executable", Path::new("/proc/self/exe")))?,
        db: paths.db.clone(),
        run_dir: paths.run_dir.clone(),
        socket: paths.socket.clone(),
        devices,
    };
    launcher.spawn(launch_rx, shared.clone())?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("flexd")
        .build()
        .map_err(io("tokio runtime", Path::new("-")))?;
    let r = rt.block_on(serve(shared, &paths, &opts, sampler));
    drop(lock);
    r
}

/// Resolve flexd's paths and make its state and run directories exist, flexd's alone.
fn private_dirs(settings: &Settings) -> Result<Paths, DaemonError> {
    let cwd = std::env::current_dir().map_err(io("working directory", Path::new(".")))?;
    let paths = Paths::resolve(settings, &cwd);
    for dir in [&paths.state_dir, &paths.run_dir] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io("cannot create", dir))?;
    }
    for dir in [&paths.state_dir, &paths.run_dir] {
        make_private(dir)?;
    }
    Ok(paths)
}

/// What flexd enforces on jobs here, as `KEY`, value pairs for `flexcontrol show config`.
type Enforced = Vec<(String, String)>;

/// This host as the scheduler sees it (from NVML or the topology file), how the model's
/// cores map to real ones, and how jobs will be held and limited (cgroups or not, also said in
/// the log).
fn host_model(
    paths: &Paths,
    opts: &Options,
    settings: &Settings,
) -> Result<(Cluster, CpuMap, Enforced, String, Arc<GpuDevices>), DaemonError> {
    let mut found = gres_plugin::probe::discover(&paths.topology, opts.force_topology)?;
    // Jobs really run here: a simulated topology that names no RAM gets this host's; one that
    // names more than this host has is scheduled as it says, and the log says so.
    let real = gres_plugin::probe::host_memory_bytes().unwrap_or(0);
    if found.host.memory_bytes == 0 {
        found.host.memory_bytes = real;
    } else if real > 0 && found.host.memory_bytes > real {
        tracing::warn!(
            "the host model names {} MiB of RAM but this machine has {} MiB: jobs are given \
             memory as the model says, and may together ask for more than there is",
            found.host.memory_bytes >> 20,
            real >> 20
        );
    }
    tracing::info!(
        "host model from {}: {} GPUs, {} leaves, {} cores, {} MiB of RAM ({} MiB for jobs)",
        found.source,
        found.host.gpus.len(),
        found.host.leaves.len(),
        found.host.cores.len(),
        found.host.memory_bytes >> 20,
        found
            .host
            .memory_bytes
            .saturating_sub(settings.reserved_memory)
            >> 20,
    );
    let model_cores: Vec<u32> = found.host.cores.iter().map(|c| c.id.0).collect();
    let (cpus, note) = CpuMap::detect(&model_cores);
    if let Some(n) = note {
        tracing::warn!("{n}");
    }
    let mut enforced = say_cgroups();
    let (devices, said) = gpu_devices(paths, &found, settings);
    enforced.push(("gpu_devices".into(), said));
    let cluster = Cluster::new(vec![found.host], settings.cluster_config());
    Ok((cluster, cpus, enforced, found.source, Arc::new(devices)))
}

/// The host's GPU device nodes that jobs not given them are denied (`constrain_devices`),
/// said once in the log; with what `flexcontrol show config` says of them.
fn gpu_devices(paths: &Paths, found: &Discovered, settings: &Settings) -> (GpuDevices, String) {
    if !settings.constrain_devices {
        tracing::warn!(
            "GPU devices are not confined (constrain_devices = false): a job can open the GPUs \
             and MIG instances it was not given"
        );
        return (
            GpuDevices::default(),
            "not confined: constrain_devices = false".into(),
        );
    }
    let root = if found.source == "nvml" {
        PathBuf::from("/")
    } else {
        let topology = gres_plugin::probe::topology::FileProbe::new(paths.topology.clone());
        match topology.device_root() {
            Ok(Some(root)) => root,
            Ok(None) => {
                tracing::info!(
                    "GPU devices: the simulated topology names no device_root, so its GPUs \
                     have no device nodes to confine"
                );
                return (GpuDevices::default(), "none: no device_root".into());
            }
            Err(e) => {
                tracing::warn!("GPU devices are not confined: {e}");
                return (GpuDevices::default(), format!("not confined: {e}"));
            }
        }
    };
    if !root.is_dir() {
        tracing::warn!(
            "GPU devices: the device root {} is not a directory",
            root.display()
        );
    }
    let devices = GpuDevices::discover(&root, &found.host);
    for n in &devices.notes {
        tracing::warn!("GPU devices: {n}");
    }
    if devices.is_empty() {
        tracing::info!("GPU devices: no GPU here, nothing to confine");
        return (devices, "none: no GPU".into());
    }
    tracing::info!(
        "each job is denied the GPU devices it was not given: {}",
        devices.summary()
    );
    let said = format!("denied to the jobs not given them: {}", devices.summary());
    (devices, said)
}

/// The GPU telemetry sampler of this host: NVML where the host model came from it, else the
/// samples file or seed the simulated topology names; None (said in the log) when there is neither.
fn sampler(paths: &Paths, source: &str, settings: &Settings) -> Option<crate::telemetry::Sampler> {
    use gres_plugin::telemetry::{nvml::NvmlTelemetry, Telemetry};
    let period = settings.telemetry_period.as_secs_f64();
    let telemetry: Box<dyn Telemetry> = if source == "nvml" {
        match NvmlTelemetry::open() {
            Ok(t) => Box::new(t),
            Err(e) => {
                tracing::warn!("no GPU telemetry: {e}");
                return None;
            }
        }
    } else {
        let topology = gres_plugin::probe::topology::FileProbe::new(paths.topology.clone());
        match topology.telemetry() {
            Ok(Some(sim)) => match sim.open() {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("no GPU telemetry: {e}");
                    return None;
                }
            },
            Ok(None) => {
                tracing::info!(
                    "no GPU telemetry: the simulated topology names no samples file or seed"
                );
                return None;
            }
            Err(e) => {
                tracing::warn!("no GPU telemetry: {e}");
                return None;
            }
        }
    };
    let s = crate::telemetry::Sampler::new(telemetry, period);
    tracing::info!(
        "GPU telemetry from {} every {}",
        s.label(),
        humantime::format_duration(settings.telemetry_period)
    );
    Some(s)
}

/// Say once how jobs will be held and limited (cgroups, which controllers, or none), and
/// remove the cgroups of jobs whose supervisor is gone; returns the same for `flexcontrol show
/// config`, one `cgroup_CONTROLLER` line each.
fn say_cgroups() -> Enforced {
    use crate::exec::cgroup;
    if nix::unistd::geteuid().is_root() {
        if let Err(e) = cgroup::protect_from_oom() {
            tracing::warn!("cannot keep the OOM killer off flexd (oom_score_adj): {e}");
        }
    }
    match cgroup::probe() {
        Ok(h) => {
            if let Some(base) = h.bases().next() {
                tracing::info!("each job gets its own cgroup under {}", base.display());
            }
            for (c, why) in h.missing() {
                tracing::warn!("jobs' {} is not limited: {why}", c.name());
            }
            for (c, _) in h.controllers.iter().filter(|(_, p)| p.enforced()) {
                tracing::info!("jobs' {} is limited {}", c.name(), h.describe(*c));
            }
            let n: usize = h.bases().map(cgroup::sweep).sum();
            if n > 0 {
                tracing::info!("removed {n} empty cgroups of jobs whose supervisor is gone");
            }
            h.controllers
                .iter()
                .map(|(c, _)| (format!("cgroup_{}", c.name()), h.describe(*c)))
                .collect()
        }
        Err(why) => {
            tracing::warn!(
                "jobs are held by their process group only ({why}): a process that leaves it \
                 (setsid) outlives its job, and jobs' memory, processes, cores and GPU \
                 devices are not limited"
            );
            vec![("cgroups".into(), format!("none: {why}"))]
        }
    }
}

/// What [`recovered_state`] brings back: the writer and its thread, the state, and the GPU
/// telemetry totals stored of jobs (for the sampler to go on from).
type Recovered = (
    Writer,
    std::thread::JoinHandle<()>,
    State,
    Vec<(JobId, gres_plugin::telemetry::summary::GpuTotals)>,
);

/// Open the database, start its writer and bring back the jobs of the flexd before (see
/// [`State::recover`]).
fn recovered_state(
    paths: &Paths,
    settings: &Settings,
    cluster: Cluster,
    cpus: CpuMap,
) -> Result<Recovered, DaemonError> {
    let conn = store::open(&paths.db)?;
    // SQLite creates the -wal and -shm files with the database's mode.
    for dir in [&paths.state_dir, &paths.run_dir] {
        make_private(dir)?;
    }
    let now = unix_now();
    let since = now.saturating_sub(settings.keep_finished.as_secs());
    let rows = store::load_jobs(&conn, since).map_err(|e| e.in_file(&paths.db))?;
    let texts =
        store::job_texts(&conn, since, crate::state::Text::of).map_err(|e| e.in_file(&paths.db))?;
    let usage = store::usage::load(&conn).map_err(|e| e.in_file(&paths.db))?;
    let gpu_totals = store::gpu::load_totals(&conn).map_err(|e| e.in_file(&paths.db))?;
    let (writer, writer_thread) = Writer::spawn(conn);
    // What expired while flexd was down is not loaded, and goes now.
    writer.send(Op::PurgeFinishedBefore(since), Done::Nothing);
    let mut state = State::new(
        cluster,
        cpus,
        Box::new(KernelSignaller {
            run_dir: paths.run_dir.clone(),
        }),
        nix::unistd::geteuid().as_raw(),
    );
    state.load_usage(settings, usage);
    let run_dir = paths.run_dir.clone();
    state.recover(
        rows,
        &texts,
        now,
        |row| find(&run_dir, row.id, row.supervisor_pid),
        |row| server::kill_leftovers(&run_dir, row.id),
    );
    Ok((writer, writer_thread, state, gpu_totals))
}

/// What became of a job that was running when flexd stopped. A supervisor that cannot be
/// checked is taken as alive: the next health check looks again.
fn find(run_dir: &Path, job: JobId, recorded: Option<u32>) -> Found {
    if let Ok(Some(s)) = files::read_status(run_dir, job) {
        return Found::Ended(s);
    }
    match files::find_supervisor(run_dir, job, recorded) {
        Ok(Some(pid)) => return Found::Alive(pid),
        Ok(None) => {}
        Err(e) => {
            if let Some(pid) = recorded {
                tracing::warn!("job {job}: cannot check its supervisor ({e}); keeping it");
                return Found::Alive(pid);
            }
            tracing::error!("job {job}: cannot check its supervisor: {e}");
        }
    }
    // It may have written its status between the two looks.
    match (
        files::read_status(run_dir, job),
        files::read_run(run_dir, job),
    ) {
        (Ok(Some(s)), _) => Found::Ended(s),
        // Never launched: no supervisor was recorded, none runs, none wrote a run file.
        (Ok(None), Ok(None)) if recorded.is_none() => Found::NeverRan,
        _ => Found::Gone,
    }
}

/// Raise the soft open-file limit to the hard one (connections, supervisors' pipes and the
/// store all need descriptors); returns the soft limit in force.
fn raise_nofile() -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    // Beyond this a select()-using library would break, and memory per slot adds up.
    let want = hard.min(1 << 20);
    if want > soft {
        match setrlimit(Resource::RLIMIT_NOFILE, want, hard) {
            Ok(()) => {
                tracing::info!("open-file limit raised from {soft} to {want}");
                return want as usize;
            }
            Err(e) => tracing::warn!("cannot raise the open-file limit from {soft}: {e}"),
        }
    }
    soft as usize
}

/// Hold an exclusive lock on the state directory itself for flexd's lifetime: no file to
/// delete undoes it.
fn lock_state_dir(paths: &Paths) -> Result<nix::fcntl::Flock<std::fs::File>, DaemonError> {
    let d = std::fs::File::open(&paths.state_dir).map_err(io("cannot open", &paths.state_dir))?;
    nix::fcntl::Flock::lock(d, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| DaemonError::StateLocked(paths.state_dir.clone()))
}

/// Refuse a state directory that cannot be written (a read-only remount, a full quota): flexd
/// would listen and then refuse every submission. A file is made, written, synced and removed.
fn check_writable(dir: &Path) -> Result<(), DaemonError> {
    let probe = dir.join(format!(".flexd-writable.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, b"flexd")?;
            f.sync_all()
        });
    let _ = std::fs::remove_file(&probe);
    written.map_err(io("cannot write in", dir))
}

/// Make a state directory flexd's alone: it must belong to flexd's uid (else refuse); the
/// directory becomes 0700 and the files in it 0600 where they were looser.
fn make_private(dir: &Path) -> Result<(), DaemonError> {
    let me = nix::unistd::geteuid().as_raw();
    let meta = std::fs::symlink_metadata(dir).map_err(io("cannot inspect", dir))?;
    let insecure = |why: String| DaemonError::Insecure {
        path: dir.to_path_buf(),
        why,
    };
    if !meta.is_dir() {
        return Err(insecure("is not a directory (a symlink?)".into()));
    }
    if meta.uid() != me {
        return Err(insecure(format!(
            "belongs to uid {}, not to flexd's uid {me}; refusing to keep scripts and \
             environments in it",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        tracing::warn!(
            "state directory {} was mode {:o}; making it 0700",
            dir.display(),
            meta.mode() & 0o7777
        );
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io("cannot chmod", dir))?;
    }
    for e in std::fs::read_dir(dir)
        .map_err(io("cannot list", dir))?
        .flatten()
    {
        let Ok(m) = e.path().symlink_metadata() else {
            continue;
        };
        if m.is_file() && m.mode() & 0o077 != 0 {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o600))
                .map_err(io("cannot chmod", &e.path()))?;
        }
    }
    Ok(())
}

/// Refuse to start when another flexd answers on the socket; remove a stale socket file.
fn check_socket(path: &Path) -> Result<(), DaemonError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("cannot inspect", path)(e)),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(DaemonError::NotASocket {
                path: path.to_path_buf(),
            })
        }
        Ok(m) => {
            let me = nix::unistd::geteuid().as_raw();
            // Another flexd is one of our own uid; a socket another user bound at our path
            // (in /tmp while flexd was down) is replaced, not obeyed.
            if let Ok(s) = std::os::unix::net::UnixStream::connect(path) {
                let peer =
                    nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
                        .map(|c| c.uid());
                if peer.map_or(true, |uid| uid == me) {
                    return Err(DaemonError::AlreadyRunning(path.to_path_buf()));
                }
                tracing::warn!(
                    "{} is served by uid {} (its file belongs to uid {}), not by flexd's uid \
                     {me}; replacing it",
                    path.display(),
                    peer.unwrap_or(u32::MAX),
                    m.uid()
                );
            } else {
                tracing::info!("removing the stale socket {}", path.display());
            }
            std::fs::remove_file(path).map_err(io("cannot remove", path))?;
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(io("cannot create", dir))?;
    }
    Ok(())
}

async fn serve(
    shared: Arc<Shared>,
    paths: &Paths,
    opts: &Options,
    sampler: Option<crate::telemetry::Sampler>,
) -> Result<(), DaemonError> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener =
        tokio::net::UnixListener::bind(&paths.socket).map_err(io("cannot bind", &paths.socket))?;
    // Everyone may connect; who they are comes from SO_PEERCRED.
    std::fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(0o666))
        .map_err(io("cannot chmod", &paths.socket))?;
    let sig = |k: SignalKind| signal(k).map_err(io("signal handler", Path::new("-")));
    let (mut hup, mut term, mut int) = (
        sig(SignalKind::hangup())?,
        sig(SignalKind::terminate())?,
        sig(SignalKind::interrupt())?,
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(addr) = shared.settings().metrics_listen {
        let shown = PathBuf::from(addr.to_string());
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(io("cannot bind the metrics address", &shown))?;
        tracing::info!("metrics at http://{addr}/metrics");
        tokio::spawn(server::http::serve(l, shared.clone(), stop_rx.clone()));
    }
    if let Some(s) = sampler {
        let period = shared.settings().telemetry_period;
        let stop = stop_rx.clone();
        tokio::spawn(crate::telemetry::sample_loop(
            shared.clone(),
            s,
            period,
            stop,
        ));
    }
    let sched = tokio::spawn(server::schedule_loop(shared.clone(), stop_rx));
    tracing::info!(
        "flexd {} listening on {} (state in {})",
        env!("CARGO_PKG_VERSION"),
        paths.socket.display(),
        paths.state_dir.display()
    );
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => match shared.open_conn() {
                    Ok(open) => {
                        tokio::spawn(server::serve(shared.clone(), stream, open));
                    }
                    Err(why) => server::health::warn_limited(&why),
                },
                Err(e) => {
                    server::health::warn_limited(&format!("accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = hup.recv() => reload(&shared, opts),
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    tracing::info!("stopping: no new connections; running jobs keep running");
    drop(listener);
    let _ = std::fs::remove_file(&paths.socket);
    let deadline = Instant::now() + Duration::from_secs(10);
    while shared.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop_tx.send(true);
    let _ = sched.await;
    // Every start is committed and handed to the launcher; let it finish them, then commit
    // what the launches recorded.
    shared.barrier().await;
    let (done_tx, done_rx) = mpsc::channel();
    if shared.launch_tx.send(LaunchMsg::Stop(done_tx)).is_ok() {
        let _ = tokio::task::spawn_blocking(move || done_rx.recv_timeout(Duration::from_secs(30)))
            .await;
    }
    shared.barrier().await;
    tracing::info!("stopped");
    Ok(())
}

/// SIGHUP: read the config file again; keep the old settings when it is bad.
fn reload(shared: &Shared, opts: &Options) {
    let old = shared.settings();
    match Settings::load(opts.config.as_deref(), &opts.overrides) {
        Err(e) => tracing::error!("reload failed, keeping the current settings: {e}"),
        Ok((mut new, warnings)) => {
            for w in warnings {
                tracing::warn!("{w}");
            }
            for (key, fixed) in [
                ("socket", &mut new.socket),
                ("state_dir", &mut new.state_dir),
                ("topology", &mut new.topology),
            ] {
                let was = match key {
                    "socket" => &old.socket,
                    "state_dir" => &old.state_dir,
                    _ => &old.topology,
                };
                if fixed != was {
                    tracing::warn!("reload: {key} changes only when flexd restarts");
                    *fixed = was.clone();
                }
            }
            if new.constrain_devices != old.constrain_devices {
                tracing::warn!("reload: constrain_devices changes only when flexd restarts");
                new.constrain_devices = old.constrain_devices;
            }
            if new.metrics_listen != old.metrics_listen {
                tracing::warn!("reload: metrics_listen changes only when flexd restarts");
                new.metrics_listen = old.metrics_listen;
            }
            let changes = old.changes(&new);
            if changes.is_empty() {
                tracing::info!("reload: nothing changed");
            }
            for c in changes {
                tracing::info!("reload: {c}");
            }
            shared.set_settings(new);
        }
    }
}
