//! Submit: [`prepare_submit`] validates the job and counts it against its user's limit under
//! the state's lock, [`submit`] commits it through the writer and acknowledges it only then,
//! and `State::add_submitted` queues it (or `State::abandon_submission` gives its place back).

use super::{err, Peer};
use crate::config::{MemPerCpu, Settings};
use crate::server::Shared;
use crate::state::{State, Text};
use crate::store::NewJob;
use flex_proto::{DepTerm, ErrorKind, JobSpec, Response};
use flex_sched::{JobKind, Model, PendingJob};
use gres_plugin::{HostMem, JobId, Request as ResourceRequest};

use flex_proto::fname::PATH_MAX;

/// Commit a submission and answer with its id once it is on disk.
pub(crate) async fn submit(shared: &Shared, peer: &Peer, mut spec: JobSpec, now: u64) -> Response {
    default_account(shared, peer, &mut spec);
    let prepared =
        shared.with_core(|c| prepare_submit_warned(&c.settings, &mut c.state, peer, spec, now));
    let (job, warnings) = match prepared {
        Ok(j) => j,
        Err(r) => return r,
    };
    // Kept to give its resources back if the commit fails.
    let (uid, start, tasks, held) = (job.uid, job.start.clone(), task_count(&job.spec), job.held);
    let qos = job.spec.qos.clone();
    match shared.writer.submit(job).await {
        Ok(Ok((id, job))) => {
            tracing::debug!("job {id}: submitted by {} (uid {})", peer.user, peer.uid);
            shared.with_core(|c| c.state.add_submitted(&c.settings, id, *job));
            Response::Submitted(flex_proto::SubmitReply { job: id, warnings })
        }
        failed => {
            let e = match failed {
                Ok(Err(e)) => e,
                _ => "the database writer has stopped".into(),
            };
            shared.with_core(|c| {
                c.state
                    .abandon_submission(uid, qos.as_deref(), tasks, held, start.as_ref())
            });
            Response::error(ErrorKind::Internal, format!("cannot store the job: {e}"))
        }
    }
}

/// The user's default account for a job that names none.
pub(crate) fn default_account(shared: &Shared, peer: &Peer, spec: &mut JobSpec) {
    if spec.account.as_deref().is_none_or(str::is_empty) {
        spec.account = Some(shared.acct.default_account(peer));
    }
}

/// Check a submission and fill in the configured defaults (time limit and cores per leaf of
/// 0 mean "not given").
pub(crate) fn validate(
    s: &Settings,
    st: &State,
    peer: &Peer,
    mut spec: JobSpec,
) -> Result<(JobSpec, Vec<String>), Response> {
    check_peer(st, peer)?;
    check_script_and_paths(s, &spec)?;
    check_names(s, &mut spec)?;
    let warnings = check_host_options(s, st, &mut spec)?;
    fill_time_and_cores(s, &mut spec.request)?;
    fill_memory(s, st, &mut spec.request);
    if let Err(why) = st.cluster.admit(&pending(JobId(u64::MAX), &spec)) {
        return Err(err(
            ErrorKind::Unsatisfiable,
            format!("unsatisfiable: {why}"),
        ));
    }
    Ok((spec, warnings))
}

/// A flexd that does not run as root runs jobs only for its own user.
fn check_peer(st: &State, peer: &Peer) -> Result<(), Response> {
    if st.daemon_uid != 0 && peer.uid != st.daemon_uid {
        return Err(err(
            ErrorKind::PermissionDenied,
            format!(
                "permission denied: flexd runs as uid {} (not root) and runs jobs only for that \
                 user, not for {} (uid {})",
                st.daemon_uid, peer.user, peer.uid
            ),
        ));
    }
    Ok(())
}

/// A script within `max_script_bytes`, absolute directories, and an environment, arguments and
/// output paths that a process can be given.
fn check_script_and_paths(s: &Settings, spec: &JobSpec) -> Result<(), Response> {
    let invalid = |m: String| Err(err(ErrorKind::InvalidRequest, m));
    if spec.script.trim().is_empty() {
        return invalid("the batch script is empty".into());
    }
    let max = s.limits.max_script_bytes;
    if spec.script.len() as u64 > max {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "the batch script is {} bytes, more than max_script_bytes = {max}",
                spec.script.len()
            ),
        ));
    }
    for (what, p) in [
        ("working directory", &spec.workdir),
        ("submit directory", &spec.submit_dir),
    ] {
        if !p.is_absolute() {
            return invalid(format!(
                "the {what} {} is not an absolute path",
                p.display()
            ));
        }
        if p.as_os_str().len() > PATH_MAX {
            return invalid(format!(
                "the {what} is {} bytes, longer than a path may be ({PATH_MAX})",
                p.as_os_str().len()
            ));
        }
    }
    let env = spec.env.check(|k, v| {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(format!("environment variable name {k:?} is not valid"));
        }
        if v.contains('\0') {
            return Err(format!("environment variable {k} contains a NUL byte"));
        }
        Ok(())
    });
    if let Err(e) = env {
        return invalid(e);
    }
    if let Some(a) = spec.args.iter().find(|a| a.contains('\0')) {
        return invalid(format!("script argument {a:?} contains a NUL byte"));
    }
    for (what, p) in [("output", &spec.stdout), ("error", &spec.stderr)] {
        if let Some(p) = p {
            if p.is_empty() || p.contains('\0') {
                return invalid(format!("the {what} path {p:?} is not valid"));
            }
            // Each escape expands to at most a name's length: a pattern longer than a path
            // may be would name no file, and could ask flexd for hundreds of megabytes.
            if p.len() > PATH_MAX {
                return invalid(format!(
                    "the {what} path is {} bytes, longer than a path may be ({PATH_MAX})",
                    p.len()
                ));
            }
        }
    }
    Ok(())
}

/// The job name ("job" when none is given) and the account within `max_name_bytes`.
fn check_names(s: &Settings, spec: &mut JobSpec) -> Result<(), Response> {
    if spec.name.is_empty() {
        spec.name = "job".into();
    }
    let max_name = s.limits.max_name_bytes as usize;
    for (what, text) in [
        ("job name", Some(&spec.name)),
        ("account", spec.account.as_ref()),
        ("comment", spec.options.comment.as_ref()),
    ] {
        if let Some(t) = text.filter(|t| t.len() > max_name) {
            return Err(err(
                ErrorKind::LimitExceeded,
                format!(
                    "the {what} is {} bytes, more than max_name_bytes = {max_name}",
                    t.len()
                ),
            ));
        }
    }
    Ok(())
}

/// `--constraint` against the host's features (an impossible one is refused); the type of
/// `--gres=gpu:TYPE:N` (and `--gpus=TYPE:N`) against the host's MIG profiles and models (a
/// model, `a100`, asks for any leaves of it); both through flexd.toml's `[aliases]`, and a
/// type the host has not refused with the host's own; `--exclusive` (also as an older flexsub
/// sends it, among the job's options) marked on the request: the core gives such a job all of
/// an idle host. Returns what was accepted and ignored, for the user.
fn check_host_options(
    s: &Settings,
    st: &State,
    spec: &mut JobSpec,
) -> Result<Vec<String>, Response> {
    let mut warnings = Vec::new();
    if spec.options.exclusive {
        spec.request.exclusive = true;
    }
    // Most jobs name no type and no feature: nothing more to look at.
    if spec.request.leaf_type.is_none() && spec.options.constraint.is_none() {
        return Ok(warnings);
    }
    let hosts: Vec<&gres_plugin::HostModel> = st.cluster.hosts().map(|(_, h)| h).collect();
    let features: Vec<String> = hosts.iter().flat_map(|h| host_features(h)).collect();
    let alias = |name: &str| {
        let name = name.to_ascii_lowercase();
        s.aliases
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    };
    if let (Some(t), false) = (spec.request.leaf_type.clone(), hosts.is_empty()) {
        let profile = |t: &str| {
            hosts
                .iter()
                .flat_map(|h| h.leaves.iter())
                .find(|l| l.profile.eq_ignore_ascii_case(t))
                .map(|l| l.profile.clone())
        };
        let feature = |t: &str| features.contains(&t.to_ascii_lowercase());
        spec.request.leaf_type = match (profile(&t), feature(&t), alias(&t)) {
            (Some(p), ..) => Some(p),
            (None, true, _) => None,
            (None, false, Some(to)) if to.is_empty() => {
                warnings.push(format!(
                    "GPU type {t} is accepted and ignored (flexd.toml's [aliases]): the job \
                     gets any leaves"
                ));
                None
            }
            (None, false, Some(to)) => match (profile(&to), feature(&to)) {
                (Some(p), _) => Some(p),
                (None, true) => None,
                (None, false) => {
                    return Err(unsatisfiable_type(&t, Some(&to), &hosts, &features));
                }
            },
            (None, false, None) => return Err(unsatisfiable_type(&t, None, &hosts, &features)),
        };
    }
    if let Some(text) = &spec.options.constraint {
        let c =
            flex_proto::Constraint::parse(text).map_err(|e| err(ErrorKind::InvalidRequest, e))?;
        // A feature the host lacks may be another cluster's name for one it has, or one the
        // site accepts ("").
        let ignored = std::cell::RefCell::new(Vec::new());
        let fits = c.holds(&|f| {
            features.iter().any(|h| h == f)
                || alias(f).is_some_and(|to| {
                    if to.is_empty() {
                        ignored.borrow_mut().push(f.to_string());
                    }
                    to.is_empty() || features.contains(&to.to_ascii_lowercase())
                })
        });
        let mut ignored = ignored.into_inner();
        if !fits {
            return Err(err(
                ErrorKind::Unsatisfiable,
                format!(
                    "unsatisfiable: --constraint={text}: this host's features are {}; \
                     flexd.toml's [aliases] can map other clusters' names to them",
                    features.join(", ")
                ),
            ));
        }
        ignored.sort();
        ignored.dedup();
        for f in ignored {
            warnings.push(format!(
                "--constraint feature {f} is accepted and ignored (flexd.toml's [aliases])"
            ));
        }
    }
    Ok(warnings)
}

/// The refusal of a GPU type the host does not have: its own types, and how to ask.
fn unsatisfiable_type(
    t: &str,
    alias: Option<&str>,
    hosts: &[&gres_plugin::HostModel],
    features: &[String],
) -> Response {
    let mut profiles: Vec<&str> = hosts
        .iter()
        .flat_map(|h| h.leaves.iter().map(|l| l.profile.as_str()))
        .collect();
    profiles.sort_unstable();
    profiles.dedup();
    // The GPUs' own features (model words, memory), not the profiles already listed.
    let models: Vec<&str> = features
        .iter()
        .map(String::as_str)
        .filter(|f| *f != "mig" && !profiles.iter().any(|p| p.eq_ignore_ascii_case(f)))
        .collect();
    let what = match alias {
        Some(to) => format!("GPU type {t} (flexd.toml's [aliases] maps it to {to}, which"),
        None => format!("GPU type {t} (which"),
    };
    err(
        ErrorKind::Unsatisfiable,
        format!(
            "unsatisfiable: {what} this host does not have): this host's GPU types are {} \
             (MIG profiles) and {} (models and features of its GPUs); ask for --gres=gpu:{}:N, or --gres=gpu:N for any \
             leaves, or have flexd.toml's [aliases] map {t}",
            profiles.join(", "),
            if models.is_empty() { "none".to_string() } else { models.join(", ") },
            profiles.first().copied().unwrap_or("TYPE"),
        ),
    )
}

/// What `--constraint` can name on a host, lowercase: the words of its GPUs' model names
/// (`NVIDIA H100 80GB HBM3` → `h100`, `80gb`, `hbm3`), their memory in whole GB (`80gb`),
/// their MIG profiles (`1g.10gb`) and `mig` when it has any.
pub(crate) fn host_features(h: &gres_plugin::HostModel) -> Vec<String> {
    let mut f: Vec<String> = Vec::new();
    for g in &h.gpus {
        f.extend(
            g.name
                .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
                .filter(|w| !w.is_empty() && !w.eq_ignore_ascii_case("nvidia"))
                .map(str::to_ascii_lowercase),
        );
        let gib = (g.memory_bytes as f64 / f64::from(1u32 << 30)).round();
        f.push(format!("{gib}gb"));
    }
    for l in h.leaves.iter().filter(|l| l.is_mig()) {
        f.push(l.profile.to_ascii_lowercase());
        f.push("mig".into());
    }
    f.sort();
    f.dedup();
    f
}

/// The configured default time limit and cores per leaf where none is given; a time limit
/// within `max_time_limit`.
fn fill_time_and_cores(s: &Settings, r: &mut ResourceRequest) -> Result<(), Response> {
    if r.time_limit_s == 0 {
        r.time_limit_s = s.default_time_limit.as_secs().max(1);
    }
    if r.cores_per_leaf == 0 {
        r.cores_per_leaf = s.default_cpus_per_leaf;
    }
    let max_t = s.max_time_limit.as_secs();
    if r.time_limit_s > max_t {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "time limit {} is more than max_time_limit = {}",
                humantime::format_duration(std::time::Duration::from_secs(r.time_limit_s)),
                humantime::format_duration(s.max_time_limit)
            ),
        ));
    }
    Ok(())
}

/// Host memory for a job that names none: `default_mem_per_cpu` per core (Slurm's
/// `DefMemPerCPU`); "auto" is the host's schedulable memory over its cores, nothing where the
/// host's RAM is unknown.
fn fill_memory(s: &Settings, st: &State, r: &mut ResourceRequest) {
    if r.host_mem.is_some() {
        return;
    }
    let per_cpu = match s.default_mem_per_cpu {
        MemPerCpu::Bytes(n) => n,
        MemPerCpu::Auto => st
            .cluster
            .hosts()
            .filter_map(|(id, h)| Some(st.cluster.memory(id).0? / (h.cores.len().max(1) as u64)))
            .map(|b| b >> 20 << 20)
            .min()
            .unwrap_or(0),
    };
    if per_cpu > 0 {
        r.host_mem = Some(HostMem::PerCpu(per_cpu));
    }
}

pub(crate) fn pending(id: JobId, spec: &JobSpec) -> PendingJob {
    PendingJob {
        id,
        request: spec.request.clone(),
        priority: 0,
        kind: JobKind::Batch,
    }
}

/// Validate a submission and count it against its user's limit; the dispatcher commits the
/// returned job and then calls `State::add_submitted` (or `State::abandon_submission` when
/// the commit fails). With an empty queue the job may be placed here already (see
/// `State::start_now`).
#[cfg(test)]
pub(crate) fn prepare_submit(
    s: &Settings,
    st: &mut State,
    peer: &Peer,
    spec: JobSpec,
    now: u64,
) -> Result<NewJob, Response> {
    prepare_submit_warned(s, st, peer, spec, now).map(|(job, _)| job)
}

/// [`prepare_submit`], and what was accepted and ignored, for the user.
fn prepare_submit_warned(
    s: &Settings,
    st: &mut State,
    peer: &Peer,
    spec: JobSpec,
    now: u64,
) -> Result<(NewJob, Vec<String>), Response> {
    let Admitted {
        spec,
        tasks,
        texts,
        limited,
        warnings,
    } = admissible(s, st, peer, spec)?;
    let held = st.begin_submission(peer.uid, spec.qos.as_deref(), tasks, texts);
    // A job a limit may hold back goes through a pass, where limits are decided; so does one
    // that waits for eligibility (an array, a dependency, a hold, a begin time).
    let q = &spec.queue;
    let plain = q.array.is_none()
        && q.dependency.is_none()
        && !q.hold
        && q.begin.is_none_or(|t| t <= now)
        && !limited;
    let start = plain.then(|| st.start_now(s, &spec.request, now)).flatten();
    let job = NewJob {
        account: spec.account.clone().unwrap_or_default(),
        uid: peer.uid,
        gid: peer.gid,
        user: peer.user.clone(),
        priority: 0,
        spec,
        submit_time: now,
        start,
        held,
    };
    Ok((job, warnings))
}

/// A submission that passed every check.
pub(crate) struct Admitted {
    pub spec: JobSpec,
    /// How many jobs it queues (an array's tasks).
    pub tasks: u32,
    pub texts: [Text; 2],
    /// A limit may hold it back.
    pub limited: bool,
    /// What was accepted and ignored, for the user.
    pub warnings: Vec<String>,
}

/// Everything a submission is checked against, for Submit and TestOnly alike: the job itself
/// ([`validate`]), its dependencies and queueing options, the user's limits and its QOS.
pub(crate) fn admissible(
    s: &Settings,
    st: &State,
    peer: &Peer,
    spec: JobSpec,
) -> Result<Admitted, Response> {
    let (spec, warnings) = validate(s, st, peer, spec)?;
    check_queueing(s, st, &spec)?;
    let tasks = task_count(&spec);
    let max = s.limits.max_queued_per_user;
    let have = st.queued_by(peer.uid);
    if u64::from(have) + u64::from(tasks) > u64::from(max) {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "{} already has {have} jobs pending or running, and this submission adds \
                 {tasks} (max_queued_per_user = {max})",
                peer.user
            ),
        ));
    }
    let texts = [Text::of(&spec.script), Text::of(spec.env.json())];
    let (have, adds) = st.queued_bytes(peer.uid, texts);
    let max = s.limits.max_queued_bytes_per_user;
    if have + adds > max {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "{}'s pending and running jobs hold {} of scripts and environments, and this \
                 submission adds {} (max_queued_bytes_per_user = {})",
                peer.user,
                bytes(have),
                bytes(adds),
                bytes(max)
            ),
        ));
    }
    let (spec, limited) = check_qos(s, st, peer, spec, tasks)?;
    Ok(Admitted {
        spec,
        tasks,
        texts,
        limited,
        warnings,
    })
}

/// The job's QOS (named in the spec from here on), its nice and its submit limit (every task
/// of an array counts); whether a running limit (of its QOS or its account) may hold it back.
fn check_qos(
    s: &Settings,
    st: &State,
    peer: &Peer,
    mut spec: JobSpec,
    tasks: u32,
) -> Result<(JobSpec, bool), Response> {
    let cfg = &s.priority;
    if spec.nice < 0 && peer.uid != 0 {
        return Err(err(
            ErrorKind::PermissionDenied,
            format!("only root may give a negative nice ({})", spec.nice),
        ));
    }
    let (name, q) = cfg
        .qos_for(spec.qos.as_deref(), &peer.user, spec.request.time_limit_s)
        .map_err(|m| err(ErrorKind::InvalidRequest, m))?;
    let max = q.max_submit_jobs_per_user;
    let queued = st.queued_in_qos(peer.uid, name, name == cfg.default_qos);
    if max > 0 && u64::from(queued) + u64::from(tasks) > u64::from(max) {
        return Err(err(
            ErrorKind::LimitExceeded,
            format!(
                "{} already has {queued} jobs in qos {name}, and this submission adds {tasks} \
                 (max_submit_jobs_per_user = {max}; QOSMaxSubmitJobPerUserLimit)",
                peer.user
            ),
        ));
    }
    let limited = q.max_running_leaves_per_user > 0
        || q.max_running_jobs_per_user > 0
        || spec
            .account
            .as_ref()
            .is_some_and(|a| cfg.account_limits.contains_key(a));
    spec.qos = Some(name.to_string());
    Ok((spec, limited))
}

/// How many jobs a submission makes (the tasks of an array; checked against
/// `max_array_size` before).
fn task_count(spec: &JobSpec) -> u32 {
    spec.queue
        .array
        .as_ref()
        .map_or(1, |a| a.indices().len() as u32)
}

/// An array within `max_array_size`, a dependency within `max_dependencies` on jobs flexd
/// knows.
fn check_queueing(s: &Settings, st: &State, spec: &JobSpec) -> Result<(), Response> {
    if let Some(a) = &spec.queue.array {
        let max = u64::from(s.limits.max_array_size);
        // The ranges' sum first (overlaps count twice): it bounds the work of listing them.
        let n = match a.count() {
            n if n <= max => n,
            n if n <= 16 * max => a.indices().len() as u64,
            n => n,
        };
        if n > max {
            return Err(err(
                ErrorKind::LimitExceeded,
                format!("--array={a} has {n} tasks, more than max_array_size = {max}"),
            ));
        }
    }
    if let Some(d) = &spec.queue.dependency {
        let max = s.limits.max_dependencies as usize;
        if d.terms.len() > max {
            return Err(err(
                ErrorKind::LimitExceeded,
                format!(
                    "--dependency names {} jobs, more than max_dependencies = {max}",
                    d.terms.len()
                ),
            ));
        }
    }
    for t in spec.queue.dependency.iter().flat_map(|d| &d.terms) {
        if let DepTerm::On { job, .. } = t {
            if st.resolve(job).is_empty() {
                return Err(err(
                    ErrorKind::InvalidRequest,
                    format!("--dependency: job {job} is unknown"),
                ));
            }
        }
    }
    Ok(())
}

/// A byte count as a person reads it: "4194304 bytes (4.0 MiB)".
fn bytes(n: u64) -> String {
    let unit = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(u, _)| n >= u);
    match unit {
        Some((u, name)) => format!("{n} bytes ({:.1} {name})", n as f64 / u as f64),
        None => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::host_features;

    #[test]
    fn features_come_from_gpu_names_memory_and_profiles() {
        let host = |t: &str| {
            gres_plugin::probe::discover_file(std::path::Path::new(t))
                .unwrap()
                .host
        };
        let h100 = host_features(&host("h100-80gb-x8.toml"));
        for f in ["h100", "80gb", "hbm3"] {
            assert!(h100.contains(&f.to_string()), "{h100:?}");
        }
        assert!(!h100.iter().any(|f| f == "nvidia"), "{h100:?}");
        let a100 = host_features(&host("a100-40gb-x2.toml"));
        assert_eq!(
            a100,
            ["1g.10gb", "1g.5gb", "40gb", "a100", "mig", "pcie"].map(String::from)
        );
    }
}
