//! Slurm's commands by their own names, for the tools that drive Slurm (submitit,
//! dask-jobqueue, Snakemake, Parsl, Open OnDemand): `sbatch`, `squeue`, `scancel`, `sacct`,
//! `scontrol`, `sinfo`, `srun`, and the read-only parts of `sacctmgr` and `sshare` (flexshare).
//! One binary, `flex-slurm`, is each of them when called by its name (the links `flex-slurm links DIR` or `make install-slurm-names` make, in a directory of their own
//! that a user puts first on PATH). Each turns Slurm's arguments into what flexsub, flexq,
//! flexcancel, flexacct, flexcontrol and flexrun do, with Slurm's meanings: they are the same
//! commands under Slurm's names, and long options may be abbreviated as Slurm's getopt allows.

mod sacctmgr;
mod sinfo;

use crate::client::{into_error, Client};
use crate::commands::{acct, queue, run, share, submit};
use crate::error::{exit, report, Error};
use clap::{CommandFactory, FromArgMatches, Parser};
use flex_proto::{JobRef, JobState, QueueFilter, Request, Response};
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

/// The names `flex-slurm` answers to.
pub const NAMES: [&str; 9] = [
    "sbatch", "squeue", "scancel", "sacct", "scontrol", "sinfo", "srun", "sacctmgr", "sshare",
];

/// Run Slurm's command `name` with `args` (`args[0]` is the name it was called by); returns
/// the exit code.
pub fn main(name: &str, args: Vec<OsString>) -> i32 {
    let result = match name {
        "sbatch" => sbatch(args),
        "squeue" => squeue(args),
        "scancel" => scancel(args),
        "sacct" => sacct(args),
        "scontrol" => {
            crate::error::default_sigpipe();
            let out = &mut std::io::stdout().lock();
            run::scontrol(&args[1..], out)
        }
        "sinfo" => sinfo::sinfo(args),
        "sacctmgr" => sacctmgr::sacctmgr(args),
        "sshare" => {
            crate::error::default_sigpipe();
            let a: share::Args = slurm_parse("sshare", args);
            share::run(&a, &mut std::io::stdout().lock())
        }
        "srun" => return srun(args),
        other => Err(Error::Usage(format!(
            "flex-slurm is {}, called by one of those names (not {other:?}); \
             `flex-slurm links DIR` makes the links",
            NAMES.join(", ")
        ))),
    };
    result.unwrap_or_else(|e| report(name, &e))
}

/// A flex command's parser under Slurm's name, taking abbreviated long options.
pub(crate) fn slurm_parse<T: CommandFactory + FromArgMatches>(
    name: &'static str,
    args: Vec<OsString>,
) -> T {
    let m = T::command()
        .name(name)
        .bin_name(name)
        .infer_long_args(true)
        .get_matches_from(args);
    T::from_arg_matches(&m).unwrap_or_else(|e| e.exit())
}

/// sbatch: flexsub, which reads sbatch's options with their meaning already.
fn sbatch(args: Vec<OsString>) -> Result<i32, Error> {
    let m = submit::command()
        .name("sbatch")
        .bin_name("sbatch")
        .infer_long_args(true)
        .get_matches_from(args);
    submit::run(&m, &mut std::io::stdout().lock())
}

/// squeue's own default format.
const DEFAULT_SQUEUE: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";

/// squeue: flexq, which takes squeue's options and formats (squeue's default one unless asked).
fn squeue(args: Vec<OsString>) -> Result<i32, Error> {
    crate::error::default_sigpipe();
    let mut a: queue::Args = slurm_parse("squeue", args);
    // squeue shows the jobs it is given in its default states only (flexq shows them in any).
    if !a.jobs.is_empty() && a.states.is_empty() {
        a.states = vec!["PENDING".into(), "RUNNING".into()];
    }
    if a.format.is_none() && a.format_long.is_none() && !a.long && !a.start && !a.json {
        a.format = Some(DEFAULT_SQUEUE.into());
    }
    queue::run(&a, &mut std::io::stdout().lock())
}

/// sacct: flexacct, whose fields and flags are sacct's.
fn sacct(args: Vec<OsString>) -> Result<i32, Error> {
    crate::error::default_sigpipe();
    let a: acct::Args = slurm_parse("sacct", args);
    acct::run(&a, &mut std::io::stdout().lock())
}

/// scancel's options.
#[derive(Debug, Parser)]
#[command(name = "scancel", infer_long_args = true)]
struct Scancel {
    /// The signal to send instead of cancelling.
    #[arg(short = 's', long = "signal")]
    signal: Option<String>,
    /// Only jobs of this name.
    #[arg(short = 'n', long = "name", alias = "jobname")]
    name: Option<String>,
    /// Only this user's jobs.
    #[arg(short = 'u', long = "user")]
    user: Option<String>,
    /// Only jobs in this state (PENDING, RUNNING, SUSPENDED).
    #[arg(short = 't', long = "state")]
    state: Option<String>,
    /// Only your own jobs.
    #[arg(long = "me")]
    me: bool,
    /// Signal the batch shell only / every step: a Flex job's signal goes to its whole group.
    #[arg(short = 'b', long = "batch")]
    batch: bool,
    #[arg(short = 'f', long = "full")]
    full: bool,
    #[arg(short = 'Q', long = "quiet")]
    quiet: bool,
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// This host's cluster, or `all`.
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    /// The jobs: `12`, `12_3`, `12.batch`.
    jobs: Vec<String>,
}

/// scancel: flexcancel's request for the jobs named, or those its filters select. A job that
/// has already ended, or that flexd does not know, is passed over silently, as Slurm 22.05
/// does.
fn scancel(args: Vec<OsString>) -> Result<i32, Error> {
    let a: Scancel = slurm_parse("scancel", args);
    check_cluster(a.clusters.as_deref())?;
    let signal = a
        .signal
        .as_deref()
        .map(|s| crate::units::parse_signal(s).map_err(|e| Error::Input(e.to_string())))
        .transpose()?;
    let refs: Vec<JobRef> = a
        .jobs
        .iter()
        .map(|j| {
            let j = j.split_once('.').map_or(j.as_str(), |(job, _)| job);
            JobRef::parse(j).map_err(|e| Error::Input(format!("invalid job id {j:?}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let filtered = a.name.is_some() || a.user.is_some() || a.state.is_some() || a.me;
    if refs.is_empty() && !filtered {
        return Err(Error::Usage("no job identification provided".into()));
    }
    let mut client = Client::connect("scancel")?;
    let mut f = QueueFilter {
        jobs: refs.iter().map(|r| r.job).collect(),
        include_finished: true,
        states: JobState::ALL.to_vec(),
        ..QueueFilter::default()
    };
    if let Some(u) = &a.user {
        f.users.push(u.clone());
    }
    if a.me {
        f.users.push(nix::unistd::getuid().to_string());
    }
    let views = client.queue(f)?;
    let wanted_state = match a.state.as_deref() {
        Some(s) => Some(JobState::parse(s).ok_or_else(|| {
            Error::Input(format!(
                "invalid job state {s:?}: PENDING, RUNNING or SUSPENDED"
            ))
        })?),
        None => None,
    };
    let selected = |v: &flex_proto::JobView| {
        !v.state.is_finished()
            && a.name.as_ref().is_none_or(|n| *n == v.name)
            && wanted_state.is_none_or(|s| s == v.state)
    };
    let mut code = exit::OK;
    let mut to_cancel: Vec<JobRef> = Vec::new();
    if refs.is_empty() {
        to_cancel.extend(views.iter().filter(|v| selected(v)).map(|v| JobRef {
            job: v.array.map_or(v.id, |t| t.job),
            tasks: v.array.map(|t| {
                vec![flex_proto::TaskRange {
                    first: t.index,
                    last: t.index,
                    step: 1,
                }]
            }),
        }));
    }
    for r in &refs {
        let known: Vec<&flex_proto::JobView> = views
            .iter()
            .filter(|v| v.id == r.job || v.array.is_some_and(|t| t.job == r.job))
            .collect();
        // A job flexd does not know (long gone) is passed over silently, as Slurm 22.05's
        // scancel does.
        if known.iter().any(|v| selected(v)) {
            to_cancel.push(r.clone());
        }
    }
    if to_cancel.is_empty() {
        return Ok(code);
    }
    let (plain, tasks): (Vec<JobRef>, Vec<JobRef>) =
        to_cancel.into_iter().partition(|r| r.tasks.is_none());
    let req = Request::Cancel(flex_proto::CancelRequest {
        jobs: plain.into_iter().map(|r| r.job).collect(),
        signal,
        tasks,
    });
    let outcomes = match client.call(&req)? {
        Response::Cancelled(o) => o,
        other => return Err(into_error(other)),
    };
    for o in outcomes {
        // A job that ended meanwhile is not an error to scancel.
        if let Some(e) = o
            .error
            .filter(|e| !e.contains("not running") && !e.contains("ended"))
        {
            eprintln!("scancel: error: Kill job error on job id {}: {e}", o.job);
            code = 1;
        }
    }
    Ok(code)
}

/// The name of the user `uid` (its number when it has none).
pub(crate) fn user_name(uid: nix::unistd::Uid) -> String {
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// The account flexd charges `user`'s jobs that name none: its primary group's name (the
/// group's number when it has no name, the user's name when the user is unknown here).
pub(crate) fn default_account(user: &str) -> String {
    use nix::unistd::{Group, User};
    let Some(u) = User::from_name(user).ok().flatten() else {
        return user.to_string();
    };
    Group::from_gid(u.gid)
        .ok()
        .flatten()
        .map_or_else(|| u.gid.to_string(), |g| g.name)
}

/// `-M`: this host's cluster, or all of them.
pub(crate) fn check_cluster(c: Option<&str>) -> Result<(), Error> {
    crate::options::check_clusters(c.unwrap_or_default()).map_err(Error::Input)
}

/// srun: inside a job, flexrun's srun (the job's tasks); on the submit host, a job of its own
/// that runs the command and waits for it, its output copied to this terminal, as srun's
/// allocation and step do.
fn srun(args: Vec<OsString>) -> i32 {
    if std::env::var_os("FLEX_JOB_ID").is_some() {
        return run::personality("srun", &args[1..]).unwrap_or(exit::INTERNAL);
    }
    srun_outside(args).unwrap_or_else(|e| report("srun", &e))
}

/// srun on the submit host: `sbatch --wait --wrap` of the command with the job options given,
/// then its output.
fn srun_outside(args: Vec<OsString>) -> Result<i32, Error> {
    let words: Vec<String> = args[1..]
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    // Options up to the command, as srun reads them (the ones flexsub knows take their value).
    let mut i = 0;
    let mut opts: Vec<String> = Vec::new();
    while i < words.len() && words[i].starts_with('-') && words[i] != "--" {
        let w = &words[i];
        opts.push(w.clone());
        let long = w
            .strip_prefix("--")
            .map(|l| l.split('=').next().unwrap_or(l));
        let spec = match long {
            Some(name) => crate::options::by_long(name).filter(|_| !w.contains('=')),
            None => w
                .chars()
                .nth(1)
                .and_then(crate::options::by_short)
                .filter(|_| w.len() == 2),
        };
        if spec.is_some_and(|s| s.value.is_some()) {
            i += 1;
            if let Some(v) = words.get(i) {
                opts.push(v.clone());
            }
        }
        i += 1;
    }
    if words.get(i).is_some_and(|w| w == "--") {
        i += 1;
    }
    let command = &words[i..];
    if command.is_empty() {
        return Err(Error::Usage("srun: no command given".into()));
    }
    let dir = tempfile::Builder::new()
        .prefix("flex-srun.")
        .tempdir()
        .map_err(|e| Error::Input(format!("srun: cannot make a directory for the output: {e}")))?;
    let output = dir.path().join("out");
    let quoted: Vec<String> = command.iter().map(|w| shell_quote(w)).collect();
    let mut sbatch: Vec<String> = vec!["sbatch".into(), "--wait".into(), "--parsable".into()];
    sbatch.extend(opts);
    sbatch.push(format!("--output={}", output.display()));
    sbatch.push(format!("--wrap={}", quoted.join(" ")));
    let m = submit::command()
        .name("srun")
        .bin_name("srun")
        .infer_long_args(true)
        .try_get_matches_from(&sbatch)
        .map_err(|e| Error::Usage(e.to_string()))?;
    // The job id on stdout would be srun's output; it goes nowhere.
    let code = submit::run(&m, &mut std::io::sink())?;
    if let Ok(text) = std::fs::read(&output) {
        let _ = std::io::stdout().lock().write_all(&text);
    }
    Ok(code)
}

/// `w` as one word for the shell.
fn shell_quote(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// `flex-slurm links DIR`: make DIR (if need be) and in it a link named after each Slurm
/// command to `target` (flex-slurm itself). A name already there that is not such a link is
/// left alone and reported: a real Slurm's commands are never replaced.
pub fn links(dir: &Path, target: &Path) -> Result<Vec<String>, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut refused = Vec::new();
    for name in NAMES {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&link).unwrap_or_default();
                if to.file_name() != target.file_name() {
                    refused.push(format!("{} (a link to {})", link.display(), to.display()));
                    continue;
                }
                let _ = std::fs::remove_file(&link);
            }
            Ok(_) => {
                refused.push(format!("{} (not a link of flex-slurm's)", link.display()));
                continue;
            }
            Err(_) => {}
        }
        std::os::unix::fs::symlink(target, &link).map_err(|source| Error::Read {
            path: link.clone(),
            source,
        })?;
    }
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_never_replace_another_command() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("flex-slurm");
        std::fs::write(&target, "").unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("sbatch"), "real slurm").unwrap();
        let refused = links(&bin, &target).unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("sbatch"));
        assert_eq!(std::fs::read_link(bin.join("squeue")).unwrap(), target);
        assert_eq!(
            std::fs::read_to_string(bin.join("sbatch")).unwrap(),
            "real slurm"
        );
        // Again: the links are ours, and stay.
        assert_eq!(links(&bin, &target).unwrap().len(), 1);
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("python"), "python");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn slurm_flags_parse_abbreviated() {
        let a: queue::Args = slurm_parse(
            "squeue",
            [
                "squeue",
                "--noh",
                "--form=%i %t",
                "--job",
                "3",
                "-p",
                "flex",
            ]
            .map(OsString::from)
            .to_vec(),
        );
        assert!(a.noheader);
        assert_eq!(a.format.as_deref(), Some("%i %t"));
        assert_eq!(a.jobs, ["3"]);
        let a: acct::Args = slurm_parse(
            "sacct",
            [
                "sacct",
                "-X",
                "--parsable2",
                "--noheader",
                "--format=JobIdRaw,State",
                "--name",
                "x",
                "--job",
                "4.batch",
            ]
            .map(OsString::from)
            .to_vec(),
        );
        assert_eq!(
            (a.names.clone(), a.jobs.clone()),
            (vec!["x".to_string()], vec!["4.batch".to_string()])
        );
        assert_eq!(acct::parse_jobs(&a.jobs).unwrap(), [gres_plugin::JobId(4)]);
    }
}
