//! flexrun: inside a job, start one process (rank) per allocated leaf, like srun or torchrun.
//!
//! The plan comes from the job's environment ([`gres_plugin::env::rank_plan`]), or inside a
//! Slurm allocation from Slurm's ([`gres_plugin::slurm::step::flexrun_plan`]); each rank gets
//! [`gres_plugin::env::rank_env`] on top of it and is bound to its own cores. Each rank leads its
//! own process group (as torchrun's workers do), so a signal sent to the job's group reaches it
//! once, through flexrun: signals flexrun receives (TERM, INT, HUP, USR1, USR2) go to every
//! rank's group. When flexrun ends, however it ends, the [`watchdog`] kills what is left in the
//! ranks' groups. flexrun exits with the status of the first rank to fail; the other ranks then
//! get SIGTERM after a grace period and SIGKILL [`KILL_AFTER`] later.

mod scontrol;
mod srun;
mod torchrun;
mod watchdog;

pub use scontrol::scontrol;
pub use srun::srun_args;
pub use torchrun::{launch_args, torchrun_args};

use crate::error::{exit, Error};
use clap::Parser;
use gres_plugin::env::rank_env;
use nix::sched::CpuSet;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long ranks that ignore SIGTERM get before SIGKILL.
pub const KILL_AFTER: Duration = Duration::from_secs(10);

/// The signals flexrun passes on to its ranks.
pub const FORWARDED: [i32; 5] = [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2];

/// Start one rank per leaf of this job (like srun). Every rank sees its own leaf as CUDA
/// device 0, so programs must not call torch.cuda.set_device(LOCAL_RANK).
#[derive(Debug, Parser)]
#[command(name = "flexrun", version)]
pub struct Args {
    /// Prefix each output line with "RANK: ".
    #[arg(short = 'l', long)]
    pub label: bool,
    /// Start only the first N ranks (default: one per leaf).
    #[arg(short = 'n', long = "ntasks", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub ntasks: Option<u32>,
    /// Seconds the other ranks keep running after one fails, before they get SIGTERM.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub grace: u64,
    /// Each rank told it is alone on its node (LOCAL_RANK 0): torchrun's personality.
    #[arg(skip)]
    pub ranks_as_nodes: bool,
    /// Slurm tasks instead of one rank per leaf: srun's personality.
    #[arg(skip)]
    pub tasks: Option<Tasks>,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// The tasks of an `srun` line, as Slurm starts them: `ntasks` processes (`-n`, else the job's
/// `-n`, else 1), each with its share of the leaves (`gpus_per_task` each when given) and
/// `cpus_per_task` cores when given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tasks {
    /// srun's `--ntasks-per-node`: the task count when neither `-n` nor the job's gives one.
    pub per_node: Option<u32>,
    /// The step's own GPUs (srun's `--gres=gpu:N`, `--gpus N`): the first N of the job's.
    pub gpus: Option<u32>,
    pub gpus_per_task: Option<u32>,
    pub cpus_per_task: Option<u32>,
    /// srun's `--output` and `--error` patterns (`%j`, `%t`, ...): each task's own files.
    pub output: Option<String>,
    pub error: Option<String>,
    /// `--open-mode=append`.
    pub append: bool,
}

/// How a rank's cores become real ones; shared with the Slurm plugin (gres_plugin::cpus).
pub use gres_plugin::cpus::bind_cores;
use gres_plugin::cpus::online_cores;

/// A finished process's status as a shell reports it: its code, or 128 + the signal.
pub fn status_code(s: ExitStatus) -> i32 {
    s.code()
        .or_else(|| s.signal().map(|sig| 128 + sig))
        .unwrap_or(exit::INTERNAL)
}

/// Copy `src` to `dst` line by line, each line prefixed; a last line without a newline gets one.
fn pump(src: impl Read, prefix: String, dst: impl Fn() -> Box<dyn Write>) {
    let mut r = BufReader::new(src);
    let mut line = Vec::new();
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if line.last() != Some(&b'\n') {
                    line.push(b'\n');
                }
                let mut buf = Vec::with_capacity(prefix.len() + line.len());
                buf.extend_from_slice(prefix.as_bytes());
                buf.extend_from_slice(&line);
                // One write per line keeps the ranks' lines whole; a closed output is not
                // a reason to stop reading (the rank would block on a full pipe).
                let mut out = dst();
                let _ = out.write_all(&buf).and_then(|_| out.flush());
            }
        }
    }
}

/// Live ranks' process ids (None once reaped), shared with the signal forwarder.
type Live = Arc<Mutex<Vec<Option<i32>>>>;

fn signal_all(live: &Live, sig: i32) {
    let Ok(sig) = Signal::try_from(sig) else {
        return;
    };
    for pid in live.lock().expect("rank list lock").iter().flatten() {
        // The rank may have just exited; nothing to do then.
        let _ = killpg(Pid::from_raw(*pid), sig);
    }
}

/// This step's number in its job, as Slurm counts a job's steps from 0: one byte appended per
/// step to a file in the job's own temporary directory (appends are atomic, so concurrent
/// `srun`s get different numbers); 0 without one.
fn next_step() -> u64 {
    let Some(dir) =
        std::env::var_os("TMPDIR").filter(|_| std::env::var_os("FLEX_JOB_ID").is_some())
    else {
        return 0;
    };
    let path = std::path::Path::new(&dir).join(".flex-steps");
    let counted = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| {
            f.write_all(b".")?;
            f.metadata()
        });
    counted.map_or(0, |m| m.len().saturating_sub(1))
}

/// Point task `r`'s stdout and stderr at its files from srun's `--output`/`--error` patterns
/// (stderr goes with stdout when only `--output` is given), made as Slurm names them.
fn task_files(cmd: &mut Command, t: &Tasks, step: u64, r: usize) -> Result<(), Error> {
    let Some(out) = &t.output else {
        return Ok(());
    };
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let job: u64 = var("FLEX_JOB_ID").parse().unwrap_or(0);
    let array = var("SLURM_ARRAY_JOB_ID")
        .parse::<u64>()
        .ok()
        .zip(var("SLURM_ARRAY_TASK_ID").parse::<u32>().ok());
    let (name, user, host) = (var("FLEX_JOB_NAME"), var("USER"), var("FLEX_HOST"));
    let pj = flex_proto::fname::PatternJob {
        job,
        array,
        name: &name,
        user: &user,
        host: &host,
    };
    let open = |pattern: &str| {
        let path = flex_proto::fname::expand_step(pattern, &pj, &step.to_string(), r as u32);
        // Its directory is made if need be, as Slurm (23.02 and later) does.
        if let Some(dir) = std::path::Path::new(&path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(t.append)
            .truncate(!t.append)
            .open(&path)
            .map_err(|e| Error::Input(format!("cannot open {path}: {e}")))
    };
    let stdout = open(out)?;
    let stderr = match &t.error {
        Some(e) if e != out => open(e)?,
        _ => stdout.try_clone().map_err(Error::output)?,
    };
    cmd.stdout(stdout).stderr(stderr);
    Ok(())
}

/// Start rank `r`'s process.
fn spawn_rank(
    a: &Args,
    plan: &gres_plugin::env::RankPlan,
    r: usize,
    step: u64,
    online: &[u32],
    parent: Pid,
) -> Result<std::process::Child, Error> {
    let ld = std::env::var("LD_LIBRARY_PATH").ok();
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..])
        .envs(rank_env(plan, r, ld.as_deref()))
        .process_group(0);
    if let Some(t) = &a.tasks {
        if let Some(c) = t.cpus_per_task {
            cmd.env("SLURM_CPUS_PER_TASK", c.to_string());
        }
        cmd.env("SLURM_STEP_ID", step.to_string());
        cmd.env("SLURM_STEPID", step.to_string());
        // The step's GPUs on this node: every leaf some task of it sees.
        let mut leaves: Vec<&str> = plan.uuids.iter().flat_map(|u| u.split(',')).collect();
        leaves.retain(|u| !u.is_empty());
        leaves.sort_unstable();
        leaves.dedup();
        if !leaves.is_empty() {
            cmd.env("SLURM_GPUS_ON_NODE", leaves.len().to_string());
        }
        task_files(&mut cmd, t, step, r)?;
    }
    if a.ranks_as_nodes {
        cmd.envs([
            ("LOCAL_RANK", "0"),
            ("LOCAL_WORLD_SIZE", "1"),
            ("SLURM_LOCALID", "0"),
        ]);
    }
    let stdin_is_file = r == 0 && !std::io::stdin().is_terminal();
    let to_files = a.tasks.as_ref().is_some_and(|t| t.output.is_some());
    cmd.stdin(if stdin_is_file {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    if a.label && !to_files {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let cores = bind_cores(&plan.cores[r], online);
    let mut set = CpuSet::new();
    let mut bind = !cores.is_empty();
    for &c in &cores {
        bind &= set.set(c as usize).is_ok();
    }
    // SAFETY: the closure runs between fork and exec and only makes system calls
    // (prctl, getppid, sched_setaffinity) with data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
            if nix::unistd::getppid() != parent {
                // flexrun died before the parent-death signal was armed.
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            if bind {
                // Binding is best effort: a rank runs unbound rather than not at all.
                let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), &set);
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| Error::Spawn {
        rank: r,
        program: a.command[0].to_string_lossy().into_owned(),
        source,
    })
}

/// flexrun acting as another command inside a job: `srun`, `torchrun`,
/// `torch.distributed.launch` or `scontrol`, with that command's arguments. Returns the exit
/// code, or None for a name it is not.
pub fn personality(name: &str, rest: &[OsString]) -> Option<i32> {
    let report = |who: &str, e: &Error| crate::error::report(who, e);
    let args = match name {
        "srun" => match srun_args(rest) {
            // An srun line without -n, -c or --gpus-per-task starts the job's own tasks, as
            // sbatch's options shaped them (Slurm's default: one task).
            Ok(mut a) => {
                let job = |k: &str| std::env::var(k).ok().and_then(|n| n.parse().ok());
                let per_node = a.tasks.as_ref().and_then(|t| t.per_node);
                a.ntasks = a.ntasks.or_else(|| job("FLEX_NTASKS")).or(per_node);
                if let Some(t) = a.tasks.as_mut() {
                    t.cpus_per_task = t.cpus_per_task.or_else(|| job("FLEX_CPUS_PER_TASK"));
                    t.gpus_per_task = t.gpus_per_task.or_else(|| job("FLEX_GPUS_PER_TASK"));
                }
                a
            }
            Err(e) => return Some(report("srun", &e)),
        },
        "torchrun" => match torchrun_args(rest) {
            Ok(a) => a,
            Err(e) => return Some(report("torchrun", &e)),
        },
        "torch.distributed.launch" => match launch_args(rest) {
            Ok(a) => a,
            Err(e) => return Some(report("torch.distributed.launch", &e)),
        },
        "scontrol" => {
            crate::error::default_sigpipe();
            let out = &mut std::io::stdout().lock();
            return Some(scontrol(rest, out).unwrap_or_else(|e| report("scontrol", &e)));
        }
        _ => return None,
    };
    Some(run(&args).unwrap_or_else(|e| report("flexrun", &e)))
}

/// Run the ranks to the end; returns flexrun's exit code.
pub fn run(a: &Args) -> Result<i32, Error> {
    let (plan, n) = plan_ranks(a)?;
    // Forked while flexrun is still single-threaded.
    let mut watchdog = start_watchdog();
    let live: Live = Arc::new(Mutex::new(vec![None; n]));
    // Set once a terminating signal was passed on: rank deaths are then expected.
    let terminating = Arc::new(AtomicBool::new(false));
    // Registered before any rank starts, so no signal falls between the cracks.
    let (handle, forwarder) = forward_signals(&live, &terminating)?;
    let ranks = start_ranks(a, &plan, &live, watchdog.as_mut());
    let first_failure = reap(a, &ranks, &live, &terminating);
    handle.close();
    let _ = forwarder.join();
    ranks.pumps.drain();
    // Closing the pipe lets the watchdog clear the ranks' groups of what they left behind.
    drop(watchdog);
    if let Some(e) = ranks.spawn_error {
        return Err(e);
    }
    Ok(first_failure.unwrap_or(exit::OK))
}

/// The job's plan cut to the ranks that run (`-n`), so `run` starts from how many there are.
fn plan_ranks(a: &Args) -> Result<(gres_plugin::env::RankPlan, usize), Error> {
    // A Flex job's plan, or inside a Slurm allocation Slurm's (gres_plugin::slurm::step).
    let mut plan =
        gres_plugin::slurm::step::flexrun_plan(&|k| std::env::var(k).ok()).map_err(Error::Input)?;
    if let Some(t) = &a.tasks {
        let n = a.ntasks.unwrap_or(1) as usize;
        let per = |x: Option<u32>| x.map(|x| x as usize);
        let plan = plan
            .into_tasks(n, per(t.gpus), per(t.gpus_per_task), per(t.cpus_per_task))
            .map_err(|e| Error::Input(format!("srun: {e}")))?;
        return Ok((plan, n));
    }
    let n = match a.ntasks {
        Some(n) if n as usize > plan.uuids.len() => {
            return Err(Error::Input(format!(
                "-n {n}: the job holds only {} leaves",
                plan.uuids.len()
            )))
        }
        Some(n) => n as usize,
        None => plan.uuids.len(),
    };
    // Fewer ranks than leaves: the world is the ranks that run (WORLD_SIZE = n).
    plan.uuids.truncate(n);
    plan.cores.truncate(n);
    Ok((plan, n))
}

/// The cleanup watchdog, or a warning: flexrun still runs its ranks without one.
fn start_watchdog() -> Option<watchdog::Watchdog> {
    match watchdog::Watchdog::start() {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("flexrun: warning: no cleanup watchdog ({e}): a rank's children may outlive a killed flexrun");
            None
        }
    }
}

/// Pass the [`FORWARDED`] signals on to every live rank's group from a thread of their own;
/// returns the handle that stops it and the thread to join.
fn forward_signals(
    live: &Live,
    terminating: &Arc<AtomicBool>,
) -> Result<(signal_hook::iterator::Handle, thread::JoinHandle<()>), Error> {
    let mut signals =
        Signals::new(FORWARDED).map_err(|e| Error::Input(format!("cannot handle signals: {e}")))?;
    let handle = signals.handle();
    let live = live.clone();
    let terminating = terminating.clone();
    let forwarder = thread::spawn(move || {
        for sig in signals.forever() {
            if [SIGTERM, SIGINT, SIGHUP].contains(&sig) {
                terminating.store(true, Ordering::SeqCst);
            }
            signal_all(&live, sig);
        }
    });
    Ok((handle, forwarder))
}

/// The ranks once started, for the reaping loop and the output drain.
struct Ranks {
    /// How many started (all of them unless one failed to spawn).
    started: usize,
    /// Each rank's exit status as its waiting thread sees it.
    exits: mpsc::Receiver<(usize, ExitStatus)>,
    pumps: Pumps,
    /// Why a rank could not be started; the ranks after it were not.
    spawn_error: Option<Error>,
}

/// The threads copying labelled ranks' output, counted so flexrun waits for them, briefly.
struct Pumps {
    done_tx: mpsc::Sender<()>,
    done_rx: mpsc::Receiver<()>,
    count: usize,
}

impl Pumps {
    /// Copy a rank's output to `dst` in a thread, each line prefixed with the rank.
    fn spawn(&mut self, src: impl Read + Send + 'static, r: usize, dst: fn() -> Box<dyn Write>) {
        let done = self.done_tx.clone();
        self.count += 1;
        thread::spawn(move || {
            pump(src, format!("{r}: "), dst);
            let _ = done.send(());
        });
    }

    /// Wait up to a second for the pumps to finish.
    fn drain(self) {
        // A rank's background children may hold its output open; do not wait on them for long.
        drop(self.done_tx);
        let until = Instant::now() + Duration::from_secs(1);
        for _ in 0..self.count {
            if self
                .done_rx
                .recv_timeout(until.saturating_duration_since(Instant::now()))
                .is_err()
            {
                break;
            }
        }
    }
}

/// Start one rank per entry of `plan`, each watched by a thread, stopping at the first that
/// cannot be spawned.
fn start_ranks(
    a: &Args,
    plan: &gres_plugin::env::RankPlan,
    live: &Live,
    mut watchdog: Option<&mut watchdog::Watchdog>,
) -> Ranks {
    let online = online_cores();
    let parent = nix::unistd::getpid();
    let step = if a.tasks.is_some() { next_step() } else { 0 };
    let (tx, exits) = mpsc::channel::<(usize, ExitStatus)>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut pumps = Pumps {
        done_tx,
        done_rx,
        count: 0,
    };
    let mut started = 0;
    let mut spawn_error = None;
    for r in 0..plan.uuids.len() {
        let mut child = match spawn_rank(a, plan, r, step, &online, parent) {
            Ok(c) => c,
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        };
        live.lock().expect("rank list lock")[r] = Some(child.id() as i32);
        if let Some(w) = watchdog.as_deref_mut() {
            w.guard(child.id() as i32);
        }
        if let Some(out) = child.stdout.take() {
            pumps.spawn(out, r, || Box::new(std::io::stdout().lock()));
        }
        if let Some(err) = child.stderr.take() {
            pumps.spawn(err, r, || Box::new(std::io::stderr().lock()));
        }
        let tx = tx.clone();
        thread::spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = tx.send((r, status));
            }
        });
        started += 1;
    }
    Ranks {
        started,
        exits,
        pumps,
        spawn_error,
    }
}

/// Wait for every started rank; after the first failure the others get SIGTERM once the grace
/// is over and SIGKILL [`KILL_AFTER`] later. Returns the first failed rank's status code.
fn reap(a: &Args, ranks: &Ranks, live: &Live, terminating: &AtomicBool) -> Option<i32> {
    let started = ranks.started;
    let mut first_failure = None;
    let mut term_at = None;
    let mut kill_at = None;
    if ranks.spawn_error.is_some() {
        signal_all(live, SIGTERM);
        kill_at = Some(Instant::now() + KILL_AFTER);
    }
    let mut reaped = 0;
    while reaped < started {
        let deadline = kill_at.or(term_at);
        let msg = match deadline {
            Some(d) => ranks
                .exits
                .recv_timeout(d.saturating_duration_since(Instant::now())),
            None => ranks
                .exits
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match msg {
            Ok((r, status)) => {
                reaped += 1;
                live.lock().expect("rank list lock")[r] = None;
                if !status.success() && first_failure.is_none() {
                    first_failure = Some(status_code(status));
                    let quiet = terminating.load(Ordering::SeqCst) || ranks.spawn_error.is_some();
                    if reaped < started && !quiet {
                        eprintln!(
                            "flexrun: rank {r} failed ({}); the other ranks get SIGTERM in {} s",
                            describe(status),
                            a.grace
                        );
                    }
                    if reaped < started {
                        term_at = Some(Instant::now() + Duration::from_secs(a.grace));
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let sig = if kill_at.is_none() {
                    SIGTERM
                } else {
                    libc::SIGKILL
                };
                signal_all(live, sig);
                kill_at = Some(Instant::now() + KILL_AFTER);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    first_failure
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(name) => format!("killed by {name}"),
            Err(_) => format!("killed by signal {sig}"),
        },
        _ => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_like_a_shell() {
        assert_eq!(status_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(status_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGTERM)),
            "killed by SIGTERM"
        );
    }

    #[test]
    fn arguments_after_the_command_are_its_own() {
        let a = Args::try_parse_from(["flexrun", "--label", "sh", "-c", "env", "-n", "2"]).unwrap();
        assert!(a.label);
        assert_eq!(a.ntasks, None);
        assert_eq!(a.command, ["sh", "-c", "env", "-n", "2"]);
        assert!(Args::try_parse_from(["flexrun", "-n", "0", "true"]).is_err());
    }
}
