//! flexd's side of starting a job: a thread that, for each job whose start is committed,
//! reads its script and environment from the database, builds the job's environment
//! (`gres_plugin::env::job_env`), picks its MASTER_PORT and starts its supervisor.

use super::array::ArraySummary;
use super::cgroup::devices::GpuDevices;
use super::LaunchSpec;
use crate::config::SrunInJobs;
use crate::store::{self, StoreError};
use gres_plugin::env::{job_env, EnvUnit, JobEnvInput, NcclMode, TaskShape};
use gres_plugin::JobId;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A job to start, decided by a scheduling pass and committed as RUNNING.
#[derive(Clone, Debug)]
pub(crate) struct Launch {
    pub job: JobId,
    pub host: String,
    pub units: Vec<EnvUnit>,
    /// The model's cores, `cores_per_unit` per unit in unit order.
    pub cores: Vec<u32>,
    pub cores_per_unit: u32,
    /// The CPUs to bind to (see [`super::affinity::CpuMap`]).
    pub bind_cpus: Vec<u32>,
    pub time_limit_s: u64,
    pub kill_grace: Duration,
    /// `batch_start_timeout`.
    pub start_timeout: Duration,
    pub nccl: NcclMode,
    pub slurm_aliases: bool,
    pub srun_in_jobs: SrunInJobs,
    pub torchrun_in_jobs: bool,
    /// The allocation's host memory in bytes, the job's memory limit (0: none).
    pub mem_bytes: u64,
    /// How the job asked for it (for Slurm's `SLURM_MEM_PER_*`).
    pub host_mem: Option<gres_plugin::HostMem>,
    /// `job_pids_max`.
    pub pids_max: u32,
    /// `job_tmpdir`.
    pub job_tmpdir: Option<PathBuf>,
    /// `propagate_resource_limits`.
    pub propagate_limits: Vec<String>,
}

/// Whether a job gets flexrun's `srun`: never in front of a real Slurm's.
fn srun_function(mode: SrunInJobs) -> bool {
    static SLURM: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    match mode {
        SrunInJobs::Flexrun => true,
        SrunInJobs::Off => false,
        SrunInJobs::Auto => !*SLURM.get_or_init(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs =
                std::env::split_paths(&path).chain(["/usr/bin".into(), "/usr/local/bin".into()]);
            // A configuration for srun: SLURM_CONF, the packages' slurm.conf, or the copy
            // slurmd keeps in configless mode.
            let confs = std::env::var_os("SLURM_CONF")
                .map(PathBuf::from)
                .into_iter()
                .chain(
                    [
                        "/etc/slurm/slurm.conf",
                        "/etc/slurm-llnl/slurm.conf",
                        "/run/slurm/conf/slurm.conf",
                        "/var/spool/slurmd/conf-cache/slurm.conf",
                    ]
                    .map(PathBuf::from),
                );
            real_slurm(dirs, confs)
        }),
    }
}

/// Whether a Slurm srun can run steps here: one is in `dirs` and a configuration is among
/// `confs`. Slurm's client commands installed without a configuration (a Flex host with
/// slurm-wlm for its tools) cannot run a step, so flexrun's srun shadows nothing there.
fn real_slurm(
    mut dirs: impl Iterator<Item = PathBuf>,
    mut confs: impl Iterator<Item = PathBuf>,
) -> bool {
    dirs.any(|d| d.join("srun").is_file()) && confs.any(|c| c.is_file())
}

/// What the launcher reports back.
pub(crate) trait LaunchSink: Send + Sync {
    /// The supervisor of `job` runs as `pid`; the job's rendezvous port is `master_port`.
    fn launched(&self, job: JobId, pid: u32, master_port: u16);
    /// The job could not be started; `why` is shown to its user.
    fn failed(&self, job: JobId, why: String);
}

pub(crate) enum LaunchMsg {
    Launch(Box<Launch>),
    /// Finish the launches before this one, then answer and stop.
    Stop(mpsc::Sender<()>),
}

/// Where supervisors come from and report to.
#[derive(Clone, Debug)]
pub(crate) struct Launcher {
    /// flexd's own binary (executed once as `flexd supervise`, which forks the supervisors).
    pub exe: PathBuf,
    pub db: PathBuf,
    pub run_dir: PathBuf,
    pub socket: PathBuf,
    /// The host's GPU device nodes, denied to the jobs not given them (empty when
    /// `constrain_devices` is off).
    pub devices: Arc<GpuDevices>,
}

impl Launcher {
    /// Start the launcher thread on `rx`.
    pub(crate) fn spawn(
        self,
        rx: mpsc::Receiver<LaunchMsg>,
        sink: Arc<dyn LaunchSink>,
    ) -> Result<std::thread::JoinHandle<()>, StoreError> {
        let conn = store::open_reader(&self.db)?;
        let handle = std::thread::Builder::new()
            .name("flexd-launcher".into())
            .spawn(move || {
                let mut forker = None;
                // The array of the last task started, summed up once for all its tasks.
                let mut array = None;
                for msg in rx {
                    match msg {
                        LaunchMsg::Launch(l) => {
                            match self.launch(&conn, &mut forker, &mut array, &l) {
                                Ok((pid, port)) => sink.launched(l.job, pid, port),
                                Err(why) => {
                                    tracing::warn!("job {}: cannot start: {why}", l.job);
                                    sink.failed(l.job, why)
                                }
                            }
                        }
                        LaunchMsg::Stop(done) => {
                            let _ = done.send(());
                            break;
                        }
                    }
                }
            })
            .expect("spawn the launcher thread");
        Ok(handle)
    }

    fn launch(
        &self,
        conn: &rusqlite::Connection,
        forker: &mut Option<Forker>,
        array: &mut Option<(JobId, ArraySummary)>,
        l: &Launch,
    ) -> Result<(u32, u16), String> {
        let row = store::launch_row(conn, l.job, array.map(|(a, _)| a))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("job {} is not in the database", l.job))?;
        let port = free_port().map_err(|e| format!("cannot find a free TCP port: {e}"))?;
        let submit_dir = row.submit_dir.display().to_string();
        let mut env = row.env;
        let srun = srun_function(l.srun_in_jobs);
        let o = &row.options;
        let tasks = TaskShape {
            ntasks: o.ntasks,
            ntasks_per_node: o.ntasks_per_node,
            cpus_per_task: o.cpus_per_task,
            gpus_per_task: o.gpus_per_task,
            gpus_per_node: o.gpus_per_node.clone(),
            gpus: o.gpus.clone(),
        };
        env.extend(job_env(&JobEnvInput {
            job_id: l.job.0,
            name: &row.name,
            submit_dir: &submit_dir,
            host: &l.host,
            units: &l.units,
            cores: &l.cores,
            cores_per_unit: l.cores_per_unit,
            master_port: port,
            nccl: &l.nccl,
            slurm_aliases: l.slurm_aliases,
            srun,
            torchrun: l.torchrun_in_jobs,
            mem: (l.mem_bytes, l.host_mem),
            tasks: &tasks,
            restarts: row.restarts,
        }));
        env.push(("MASTER_PORT".into(), port.to_string()));
        if let Some((task, spec)) = &row.array {
            let summary = match (spec, *array) {
                (Some(spec), _) => ArraySummary::of(spec),
                (None, Some((_, known))) => known,
                (None, None) => return Err(format!("array job {}: no spec stored", task.job)),
            };
            *array = Some((task.job, summary));
            env.extend(super::array::array_env(task, &summary, l.slurm_aliases));
        }
        let pattern_job = flex_proto::fname::PatternJob {
            job: l.job.0,
            array: row.array.as_ref().map(|(t, _)| (t.job.0, t.index)),
            name: &row.name,
            user: &row.user,
            host: &l.host,
        };
        let expand = |p: &str| flex_proto::fname::expand(p, &pattern_job);
        let spec = LaunchSpec {
            job: l.job.0,
            uid: row.uid,
            gid: row.gid,
            user: row.user.clone(),
            workdir: row.workdir,
            script: row.script,
            args: row.args,
            env,
            // Slurm's defaults, under Flex's name: slurm-%j.out, slurm-%A_%a.out for an array.
            stdout: expand(
                row.stdout
                    .as_deref()
                    .unwrap_or(if pattern_job.array.is_some() {
                        "flex-%A_%a.out"
                    } else {
                        "flex-%j.out"
                    }),
            ),
            stderr: row.stderr.as_deref().map(expand),
            cpus: l.bind_cpus.clone(),
            time_limit_s: l.time_limit_s,
            kill_grace_ms: l.kill_grace.as_millis() as u64,
            start_timeout_ms: l.start_timeout.as_millis() as u64,
            socket: self.socket.clone(),
            umask: row.umask.unwrap_or(0o022) & 0o777,
            warn: row.signal,
            groups: nix::unistd::geteuid().is_root().then(|| {
                super::spawn::user_groups(&row.user, row.gid)
                    .into_iter()
                    .map(|g| g.as_raw())
                    .collect()
            }),
            append: row.options.append,
            mem_bytes: l.mem_bytes,
            pids_max: l.pids_max,
            tmpdir: l.job_tmpdir.clone(),
            rlimits: row
                .options
                .rlimits
                .iter()
                .filter(|(n, _)| l.propagate_limits.contains(n))
                .cloned()
                .collect(),
            job_commands: self.job_commands(srun, l.torchrun_in_jobs),
            devices: self
                .devices
                .denied(l.units.iter().map(|u| (u.gpu, u.uuid.as_str()))),
        };
        let pid = self.start_supervisor(forker, &spec)?;
        tracing::info!("job {}: started, supervisor pid {pid}", l.job);
        Ok((pid, port))
    }

    /// The commands a job finds first on its PATH, as links to flexrun (which acts by the name
    /// it is called by): `srun` and `scontrol` unless a real Slurm's must win, `torchrun`
    /// where flexd.toml gives jobs flexrun's. None when no flexrun is beside flexd (the bash
    /// functions in the environment still serve bash scripts).
    fn job_commands(&self, srun: bool, torchrun: bool) -> Vec<(String, PathBuf)> {
        let flexrun = self.exe.with_file_name("flexrun");
        if !flexrun.is_file() {
            return Vec::new();
        }
        let names = [("srun", srun), ("scontrol", srun), ("torchrun", torchrun)];
        names
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| (n.to_string(), flexrun.clone()))
            .collect()
    }

    /// Hand the spec to the supervisors' process, which forks the job's supervisor and answers
    /// its pid. The process is started on first use and again when it has gone (a signal, an
    /// error), once per launch.
    fn start_supervisor(
        &self,
        forker: &mut Option<Forker>,
        spec: &LaunchSpec,
    ) -> Result<u32, String> {
        match self.ask(forker, spec) {
            Ok(reply) => reply,
            Err(e) => {
                tracing::warn!("the supervisors' process failed ({e}); starting it again");
                self.ask(forker, spec)
                    .map_err(|e| format!("cannot hand the job to a supervisor: {e}"))?
            }
        }
    }

    /// One spec to the supervisors' process (started when there is none); a process that
    /// cannot be talked to is ended and forgotten.
    fn ask(
        &self,
        forker: &mut Option<Forker>,
        spec: &LaunchSpec,
    ) -> Result<Result<u32, String>, String> {
        let f = match forker {
            Some(f) => f,
            None => forker.insert(self.start_forker()?),
        };
        let reply = f.ask(spec).map_err(|e| e.to_string());
        if reply.is_err() {
            if let Some(mut old) = forker.take() {
                let _ = old.child.kill();
                let _ = old.child.wait();
            }
        }
        reply
    }

    /// Start `flexd supervise`, with an empty environment.
    fn start_forker(&self) -> Result<Forker, String> {
        let mut child = Command::new(&self.exe)
            .arg("supervise")
            .arg("--run-dir")
            .arg(&self.run_dir)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run {} supervise: {e}", self.exe.display()))?;
        let input = child.stdin.take().expect("piped stdin");
        let output = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(Forker {
            child,
            input,
            output,
        })
    }
}

/// The running `flexd supervise` process and its pipes.
pub(crate) struct Forker {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Forker {
    /// Send one spec and read the answer: Err when the process cannot be talked to.
    fn ask(&mut self, spec: &LaunchSpec) -> Result<Result<u32, String>, flex_proto::FrameError> {
        flex_proto::write_frame(&mut self.input, spec)?;
        self.input.flush()?;
        flex_proto::read_frame(&mut self.output, 1 << 16)
    }
}

/// A TCP port free on 127.0.0.1 right now, for the job's rendezvous.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    #[test]
    fn srun_is_real_only_with_a_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let conf = dir.path().join("slurm.conf");
        let real = || super::real_slurm([bin.clone()].into_iter(), [conf.clone()].into_iter());
        assert!(!real(), "neither srun nor slurm.conf");
        std::fs::write(bin.join("srun"), "").unwrap();
        assert!(!real(), "srun without a configuration cannot run a step");
        std::fs::write(&conf, "ClusterName=x\n").unwrap();
        assert!(real());
        std::fs::remove_file(bin.join("srun")).unwrap();
        assert!(!real(), "a configuration without srun");
    }
}
