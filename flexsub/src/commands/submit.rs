//! flexsub: read a batch script (or `--wrap`), merge its directives with the command line,
//! size memory from a model when asked, and queue the job, test where it would start, or only
//! print the estimate.

use crate::client::Client;
use crate::error::Error;
use crate::estimate::{self, Breakdown};
use crate::options::{self, Key, Settings};
use crate::{script, table};
use clap::{Arg, ArgAction, ArgMatches, Command};
use flex_proto::{JobSpec, JobState, QueueFilter, Request, Response, WouldStart};
use gres_plugin::JobId;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

/// flexsub's command line: the job options of [`options::all`] and flexsub's own.
pub fn command() -> Command {
    let mut cmd = Command::new("flexsub")
        .about("Submit a batch script to flexd (like sbatch)")
        .long_about(
            "Submit a batch script to flexd, like sbatch. Options come from #FLEX and #SBATCH \
             lines at the top of the script; the command line overrides them.",
        )
        .version(env!("CARGO_PKG_VERSION"))
        .args_override_self(true)
        .arg(
            Arg::new("usage")
                .long("usage")
                .action(ArgAction::Help)
                .help("Print help (sbatch's --usage)"),
        );
    for o in options::all() {
        cmd = cmd.arg(job_arg(o));
    }
    cmd.arg(
        Arg::new("wrap")
            .long("wrap")
            .value_name("CMD")
            .help("Run CMD with /bin/sh instead of a script")
            .conflicts_with("script"),
    )
    .arg(
        Arg::new("parsable")
            .long("parsable")
            .action(ArgAction::SetTrue)
            .help("Print only the job id"),
    )
    .arg(
        Arg::new("wait")
            .short('W')
            .long("wait")
            .action(ArgAction::SetTrue)
            .help("Return when the job ends, with its exit code (1 when it failed otherwise)"),
    )
    .arg(
        Arg::new("test-only")
            .long("test-only")
            .action(ArgAction::SetTrue)
            .help("Print where and when the job would start; queue nothing"),
    )
    .arg(
        Arg::new("estimate-only")
            .long("estimate-only")
            .action(ArgAction::SetTrue)
            .conflicts_with("test-only")
            .help(
                "Print the --model memory estimate and what it needs on this host; queue nothing",
            ),
    )
    .arg(
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .help("With --test-only or --estimate-only: print JSON"),
    )
    .arg(
        Arg::new("script")
            .value_name("SCRIPT")
            .help("The batch script (stdin when left out and not a terminal)")
            .num_args(1..)
            .trailing_var_arg(true)
            .value_parser(clap::value_parser!(std::ffi::OsString)),
    )
    .group(clap::ArgGroup::new("mode").args(["train", "infer"]))
}

/// One job option as a command-line argument (the ignored and refused Slurm ones hidden).
fn job_arg(o: &options::OptSpec) -> Arg {
    let mut a = Arg::new(o.long).long(o.long).help(o.help);
    if let Some(c) = o.short {
        a = a.short(c);
    }
    a = match o.value {
        None if o.optional_value() => a
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("")
            .action(ArgAction::Set),
        Some(v) => a
            .value_name(v)
            .action(ArgAction::Set)
            .allow_hyphen_values(true),
        None => a.action(ArgAction::SetTrue),
    };
    if matches!(o.key, Key::Ignored | Key::Refused) {
        a = a.hide(true);
    }
    a
}

/// What to do with the job once it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Submit { parsable: bool, wait: bool },
    TestOnly { json: bool },
    EstimateOnly { json: bool },
}

/// `--estimate-only`: the estimate, then whether and when it fits on this host (flexd's
/// `--test-only` answer) or why it cannot be said. As JSON: `{"estimate": {...}, "on_this_host":
/// {...} or null, "error": null or "why"}`.
fn estimate_report(
    out: &mut impl Write,
    b: &Breakdown,
    fit: Result<WouldStart, Error>,
    json: bool,
) -> Result<i32, Error> {
    let w = Error::output;
    // A refusal by flexd (too large for any host) is an answer; an unreachable flexd is not.
    let code = match &fit {
        Err(e @ Error::Daemon { .. }) => e.exit_code(),
        _ => crate::error::exit::OK,
    };
    if json {
        let v = serde_json::json!({
            "estimate": b,
            "on_this_host": fit.as_ref().ok(),
            "error": fit.as_ref().err().map(|e| e.to_string()),
        });
        let text = serde_json::to_string_pretty(&v).expect("the estimate serializes");
        writeln!(out, "{text}").map_err(w)?;
        return Ok(code);
    }
    write!(out, "{}", b.render()).map_err(w)?;
    match fit {
        Ok(ws) => write!(out, "{}", table::estimate_fit(&ws, now())).map_err(w)?,
        Err(e @ Error::Daemon { .. }) => writeln!(out, "on this host: {e}").map_err(w)?,
        Err(e) => writeln!(out, "on this host: unavailable ({e})").map_err(w)?,
    }
    Ok(code)
}

/// sbatch's `--wait`: poll flexd until the job has ended, then exit as the job did: its exit
/// code when it completed or failed with one, 1 when it ended otherwise (cancelled, timed out,
/// killed by a signal, lost with its node). Polls twice a second, as sbatch does.
fn wait_for_end(client: &mut Client, job: JobId) -> Result<i32, Error> {
    let filter = QueueFilter {
        jobs: vec![job],
        include_finished: true,
        ..QueueFilter::default()
    };
    loop {
        let views = client.queue(filter.clone())?;
        let Some(v) = views.into_iter().find(|v| v.id == job) else {
            return Err(Error::Input(format!(
                "job {job} is no longer known to flexd; see flexacct -j {job}"
            )));
        };
        if v.state.is_finished() {
            let code = match (v.state, v.exit_code, v.signal) {
                (JobState::Completed | JobState::Failed, Some(c), None) => c,
                _ => 1,
            };
            return Ok(code);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// A job built from the command line and its script.
#[derive(Debug)]
pub struct Built {
    pub spec: JobSpec,
    pub estimate: Option<Breakdown>,
    pub warnings: Vec<String>,
    /// What flexsub filled in for the user (said on stderr, not a problem).
    pub notes: Vec<String>,
    /// The script lines that set options (`job.sh:3: #SBATCH --qos=x`), for flexd's answers.
    pub origins: Vec<(Key, String)>,
}

/// The script: its text, the name it is known by in messages, its arguments and the file it
/// was read from (None for standard input and `--wrap`).
pub struct Loaded {
    pub text: String,
    pub shown: String,
    pub args: Vec<String>,
    pub path: Option<PathBuf>,
}

fn load_script(m: &ArgMatches) -> Result<Loaded, Error> {
    let made = |text: String, shown: &str| Loaded {
        text,
        shown: shown.into(),
        args: Vec::new(),
        path: None,
    };
    if let Some(cmd) = m.get_one::<String>("wrap") {
        return Ok(made(script::wrap(cmd), "wrap"));
    }
    // An estimate needs no script: never wait for one on standard input.
    if m.get_flag("estimate-only") && !m.contains_id("script") {
        return Ok(made(script::wrap("true"), "estimate"));
    }
    let mut words = m
        .get_many::<std::ffi::OsString>("script")
        .map(|v| v.cloned().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter();
    let args = |rest: std::vec::IntoIter<std::ffi::OsString>| -> Result<Vec<String>, Error> {
        rest.map(|a| {
            a.into_string()
                .map_err(|a| Error::Input(format!("script argument {a:?} is not UTF-8")))
        })
        .collect()
    };
    let (text, name, path) = match words.next() {
        Some(p) if p != "-" => {
            let path = PathBuf::from(&p);
            let bytes = std::fs::read(&path).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
            let shown = path.display().to_string();
            let text = String::from_utf8(bytes)
                .map_err(|_| Error::Input(format!("{shown}: the script is not UTF-8 text")))?;
            (text, shown, Some(path))
        }
        other => {
            if other.is_none() && std::io::stdin().is_terminal() {
                return Err(Error::Usage(
                    "give a batch script, --wrap CMD, or a script on standard input".into(),
                ));
            }
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|source| Error::Read {
                    path: "standard input".into(),
                    source,
                })?;
            (text, "stdin".to_string(), None)
        }
    };
    Ok(Loaded {
        text,
        shown: name,
        args: args(words)?,
        path,
    })
}

/// Apply the command line's job options after the script's.
fn apply_command_line(m: &ArgMatches, s: &mut Settings) -> Result<Vec<String>, Error> {
    let mut warnings = Vec::new();
    // As sbatch: one host-memory spelling on the command line, which overrides the script's.
    let mem: Vec<&str> = ["mem", "mem-per-cpu", "mem-per-gpu"]
        .into_iter()
        .filter(|o| m.get_one::<String>(o).is_some())
        .collect();
    if mem.len() > 1 {
        return Err(Error::Input(format!(
            "--{} are mutually exclusive: give one",
            mem.join(", --")
        )));
    }
    for o in options::all() {
        let value = match o.value {
            None if o.optional_value() => match m.get_one::<String>(o.long) {
                Some(v) => (!v.is_empty()).then_some(v.as_str()),
                None => continue,
            },
            Some(_) => match m.get_one::<String>(o.long) {
                Some(v) => Some(v.as_str()),
                None => continue,
            },
            None if m.get_flag(o.long) => None,
            None => continue,
        };
        let shown = match value {
            Some(v) => format!("--{} {v}", o.long),
            None => format!("--{}", o.long),
        };
        match s.apply(o, value) {
            Ok(Some(w)) => warnings.push(format!("{shown}: {w}")),
            Ok(None) => {}
            Err(e) => return Err(Error::Input(format!("{shown}: {e}"))),
        }
    }
    // A job that asks for host memory and no GPU may have meant GPU memory.
    if let Some(v) = m.get_one::<String>("mem") {
        if s.leaves.unwrap_or(0) == 0
            && s.gpu_fraction.is_none()
            && s.gpus_per_task.is_none()
            && s.mem_bytes.is_none()
            && s.model.is_none()
        {
            warnings.push(format!(
                "--mem {v}: the job asks for no GPU; {}",
                crate::script::MEM_IS_HOST_MEMORY
            ));
        }
    }
    Ok(warnings)
}

/// Build the job: script, directives, command line, estimate, environment.
pub fn build(m: &ArgMatches, env: Vec<(String, String)>, cwd: &Path) -> Result<Built, Error> {
    build_loaded(m, load_script(m)?, env, cwd)
}

/// [`build`] with the script already read (the fuzzer enters here, with no file to read).
pub fn build_loaded(
    m: &ArgMatches,
    loaded: Loaded,
    env: Vec<(String, String)>,
    cwd: &Path,
) -> Result<Built, Error> {
    let Loaded {
        text,
        shown,
        args,
        path,
    } = loaded;
    if text.trim().is_empty() {
        return Err(Error::Input(format!("{shown}: the script is empty")));
    }
    if text.contains('\0') {
        return Err(Error::Input(format!(
            "{shown}: the script holds NUL bytes; is it a binary?"
        )));
    }
    // flexd's limits, from the configuration in the submitting environment.
    let limits = flex_proto::config::limits(|k| {
        env.iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    })?;
    if text.len() as u64 > limits.max_script_bytes {
        return Err(Error::Input(format!(
            "{shown}: the script is {} bytes, more than max_script_bytes = {}",
            text.len(),
            limits.max_script_bytes
        )));
    }
    script::check_directive_count(&shown, &text, limits.max_directives).map_err(Error::Input)?;
    let mut s = Settings::default();
    let mut origins = Vec::new();
    let mut warnings = script::apply_directives_noting(&shown, &text, &mut s, &mut origins)
        .map_err(Error::Input)?;
    warnings.extend(apply_command_line(m, &mut s)?);
    let mut notes = Vec::new();
    if s.time_limit_s.is_none() {
        // flexd fills in its default; say which, as a Slurm user reading the queue would ask.
        notes.push(format!(
            "no --time given; the job gets default_time_limit = {} from flexd's configuration",
            crate::units::format_duration(limits.default_time_limit_s)
        ));
    }
    if s.options.mail.as_ref().is_some_and(|m| m.events.0 != 0) && !limits.sendmail {
        warnings.push(
            "--mail-type: flexd's configuration names no sendmail program, so no mail is sent"
                .into(),
        );
    }
    let estimate = match s.estimate_input().map_err(Error::Input)? {
        Some(input) => Some(estimate::estimate(&input)?),
        None => None,
    };
    let request = s
        .request(estimate.as_ref().map(|b| b.total_bytes))
        .map_err(|e| Error::Input(format!("{shown}: {e}")))?;
    // Several leaves for sure (a leaf count, or whole GPUs): one process per leaf is needed.
    if request.leaves.is_some_and(|n| n > 1) || request.gpus.is_some_and(|g| g >= 2.0) {
        let bad = script::launchers_needing_torchrun(&shown, &text);
        if !bad.is_empty() {
            return Err(Error::Input(bad.join("\n")));
        }
    }
    let name = s.name.clone().unwrap_or_else(|| {
        Path::new(&shown)
            .file_name()
            .map_or_else(|| shown.clone(), |f| f.to_string_lossy().into_owned())
    });
    let workdir = match &s.chdir {
        Some(d) => cwd.join(d),
        None => cwd.to_path_buf(),
    };
    if m.get_flag("test-only") {
        notes.extend(missing_output_dirs(&s, &workdir, &origins));
    }
    let spec = JobSpec {
        name,
        script: text,
        args,
        workdir,
        submit_dir: cwd.to_path_buf(),
        env: match &s.export {
            Some(e) => e.apply(env),
            None => env,
        }
        .into(),
        stdout: s.stdout.clone(),
        stderr: s.stderr.clone(),
        request,
        account: s.account.clone(),
        qos: s.qos.clone(),
        nice: s.nice.unwrap_or(0),
        options: Box::new(flex_proto::JobOptions {
            ntasks: s.tasks(),
            ntasks_per_node: s.ntasks_per_node,
            cpus_per_task: s.cpus_per_task,
            gpus_per_task: s.gpus_per_task,
            gpus_per_node: s.gpus_per_node_spec.clone(),
            gpus: s.gpus_spec.clone(),
            rlimits: submit_rlimits(),
            command: path.map(|p| cwd.join(p).display().to_string()),
            ..s.options.clone()
        }),
        queue: Box::new(s.queue.clone()),
        umask: Some(submit_umask()),
        signal: s.signal.map(Box::new),
    };
    Ok(Built {
        spec,
        estimate,
        warnings,
        notes,
        origins,
    })
}

/// The submitting environment, as sbatch's `--export=ALL` (variables that are not UTF-8 are
/// left out: the protocol carries text).
pub fn current_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Run flexsub with parsed arguments; returns the exit code.
pub fn run(m: &ArgMatches, out: &mut impl Write) -> Result<i32, Error> {
    let json = m.get_flag("json");
    if json && !m.get_flag("estimate-only") && !m.get_flag("test-only") {
        return Err(Error::Usage(
            "--json goes with --test-only or --estimate-only".into(),
        ));
    }
    let action = if m.get_flag("estimate-only") {
        Action::EstimateOnly { json }
    } else if m.get_flag("test-only") {
        Action::TestOnly { json }
    } else {
        Action::Submit {
            parsable: m.get_flag("parsable"),
            wait: m.get_flag("wait"),
        }
    };
    let cwd = std::env::current_dir().map_err(|source| Error::Read {
        path: ".".into(),
        source,
    })?;
    let mut built = build(m, current_env(), &cwd)?;
    for w in &built.warnings {
        eprintln!("flexsub: warning: {w}");
    }
    // Said once the job is accepted: a refused job needs no note about its defaults.
    let notes = std::mem::take(&mut built.notes);
    let say_notes = || notes.iter().for_each(|n| eprintln!("flexsub: note: {n}"));
    let w = Error::output;
    match action {
        Action::Submit { parsable, wait } => {
            let mut client = Client::connect("flexsub")?;
            let reply = client.call(&Request::Submit(built.spec));
            let job = match reply.map_err(|e| locate(e, &built.origins))? {
                Response::Submitted(flex_proto::SubmitReply { job, warnings }) => {
                    warn(&warnings, &built.origins);
                    job
                }
                other => return Err(locate(crate::client::into_error(other), &built.origins)),
            };
            say_notes();
            if parsable {
                writeln!(out, "{job}").map_err(w)?;
            } else {
                writeln!(out, "Submitted batch job {job}").map_err(w)?;
            }
            if wait {
                out.flush().map_err(w)?;
                return wait_for_end(&mut client, job);
            }
        }
        Action::TestOnly { json } => {
            let ws = test_only(built.spec).map_err(|e| locate(e, &built.origins))?;
            warn(&ws.warnings, &built.origins);
            say_notes();
            if json {
                let text = serde_json::to_string_pretty(&ws).expect("protocol types serialize");
                writeln!(out, "{text}").map_err(w)?;
            } else {
                write!(out, "{}", table::would_start(&ws, now())).map_err(w)?;
            }
        }
        Action::EstimateOnly { json } => {
            let Some(b) = built.estimate else {
                return Err(Error::Usage(
                    "--estimate-only needs --model, on the command line or in a directive".into(),
                ));
            };
            let fit = Client::connect("flexsub")
                .and_then(|mut c| c.call(&Request::TestOnly(built.spec)))
                .and_then(|r| match r {
                    Response::WouldStart(ws) => Ok(*ws),
                    other => Err(crate::client::into_error(other)),
                });
            return estimate_report(out, &b, fit, json);
        }
    }
    Ok(crate::error::exit::OK)
}

/// For `--test-only`, a note for each output file whose directory does not exist yet (where the
/// pattern's directory part has no `%` escapes to wait for): flexd makes it when the job
/// starts, as Slurm 23.02 and later do (22.05 fails such a job). Named after the line that
/// gave it.
fn missing_output_dirs(s: &Settings, workdir: &Path, origins: &[(Key, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (key, pattern) in [(Key::Output, &s.stdout), (Key::Error, &s.stderr)] {
        let Some(dir) = pattern.as_deref().and_then(|p| Path::new(p).parent()) else {
            continue;
        };
        if dir.as_os_str().is_empty() || dir.to_string_lossy().contains('%') {
            continue;
        }
        if !workdir.join(dir).is_dir() {
            let at = origins.iter().rev().find(|(k, _)| *k == key).map_or_else(
                || {
                    format!(
                        "--{}",
                        if key == Key::Output {
                            "output"
                        } else {
                            "error"
                        }
                    )
                },
                |(_, at)| at.clone(),
            );
            out.push(format!(
                "{at}: the directory {} does not exist yet; it is made when the job starts",
                dir.display()
            ));
        }
    }
    out
}

/// flexd's warnings, each after the script line it is about.
fn warn(warnings: &[String], origins: &[(Key, String)]) {
    for w in warnings {
        eprintln!("flexsub: warning: {}", locate_text(w, origins));
    }
}

/// The options a message from flexd is about, by the words it uses.
fn implicated(message: &str) -> &'static [Key] {
    const GPU: &[Key] = &[
        Key::Gres,
        Key::Gpus,
        Key::GpusPerNode,
        Key::GpusPerTask,
        Key::LeafType,
    ];
    let m = message.to_ascii_lowercase();
    let table: [(&str, &'static [Key]); 7] = [
        ("gpu type", GPU),
        ("--constraint", &[Key::Constraint]),
        ("qos", &[Key::Qos]),
        ("account", &[Key::Account]),
        ("time limit", &[Key::Time]),
        ("depend", &[Key::Dependency]),
        ("array", &[Key::Array]),
    ];
    table
        .into_iter()
        .find(|(word, _)| m.contains(word))
        .map_or(&[], |(_, keys)| keys)
}

/// `message` after the script line that set the option it is about, when a line did.
fn locate_text(message: &str, origins: &[(Key, String)]) -> String {
    let keys = implicated(message);
    match origins.iter().rev().find(|(k, _)| keys.contains(k)) {
        Some((_, at)) => format!("{at}: {message}"),
        None => message.to_string(),
    }
}

/// flexd's refusal of a script's job, naming the line it is about.
fn locate(e: Error, origins: &[(Key, String)]) -> Error {
    match e {
        Error::Daemon { kind, message } => Error::Daemon {
            kind,
            message: locate_text(&message, origins),
        },
        other => other,
    }
}

fn test_only(spec: JobSpec) -> Result<WouldStart, Error> {
    match Client::connect("flexsub")?.call(&Request::TestOnly(spec))? {
        Response::WouldStart(ws) => Ok(*ws),
        other => Err(crate::client::into_error(other)),
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// This process's soft resource limits, by Slurm's names (None: unlimited).
fn submit_rlimits() -> Vec<(String, Option<u64>)> {
    use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
    let all = [
        ("AS", Resource::RLIMIT_AS),
        ("CORE", Resource::RLIMIT_CORE),
        ("CPU", Resource::RLIMIT_CPU),
        ("DATA", Resource::RLIMIT_DATA),
        ("FSIZE", Resource::RLIMIT_FSIZE),
        ("MEMLOCK", Resource::RLIMIT_MEMLOCK),
        ("NOFILE", Resource::RLIMIT_NOFILE),
        ("NPROC", Resource::RLIMIT_NPROC),
        ("RSS", Resource::RLIMIT_RSS),
        ("STACK", Resource::RLIMIT_STACK),
    ];
    all.into_iter()
        .filter_map(|(name, r)| {
            let (soft, _) = getrlimit(r).ok()?;
            Some((name.to_string(), (soft != RLIM_INFINITY).then_some(soft)))
        })
        .collect()
}

/// This process's umask, from /proc (reading it through umask(2) would set it meanwhile);
/// 022 where /proc does not say.
fn submit_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}
