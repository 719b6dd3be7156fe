//! The real flexsub, flexq and flexcancel binaries against a scripted stand-in for flexd's
//! socket (which records what it was sent), or against no daemon at all. The end-to-end tests
//! with the real flexd are in tests/tests/commands.rs.

use flex_proto::{
    self, AllocView, ErrorKind, Hello, JobSpec, LeafView, Request, Response, WouldStart,
    PROTOCOL_VERSION,
};
use gres_plugin::JobId;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;

/// A socket that greets like flexd and answers each request with `answer`, for one connection;
/// joining it gives the requests it saw.
struct FakeDaemon {
    path: PathBuf,
    thread: JoinHandle<Vec<Request>>,
}

impl FakeDaemon {
    fn start(dir: &Path, answer: fn(&Request) -> Response) -> Self {
        let path = dir.join("flexd.sock");
        // A stand-in from an earlier step of the same test may have left its socket file.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let thread = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let hello: Hello =
                flex_proto::read_frame(&mut s, flex_proto::DEFAULT_MAX_FRAME).unwrap();
            assert_eq!(hello.version, PROTOCOL_VERSION);
            let greeting = Response::Hello(flex_proto::HelloReply {
                version: PROTOCOL_VERSION,
                server: "fake flexd".into(),
            });
            flex_proto::write_frame(&mut s, &greeting).unwrap();
            let mut seen = Vec::new();
            while let Ok(req) =
                flex_proto::read_frame::<Request>(&mut s, flex_proto::DEFAULT_MAX_FRAME)
            {
                flex_proto::write_frame(&mut s, &answer(&req)).unwrap();
                seen.push(req);
            }
            seen
        });
        FakeDaemon { path, thread }
    }

    fn requests(self) -> Vec<Request> {
        self.thread.join().unwrap()
    }
}

fn cmd(bin: &str, socket: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env("FLEX_SOCKET", socket)
        .env("FLEX_TEST_MARK", "exported")
        .current_dir(cwd)
        .stdin(Stdio::null());
    c
}

fn flexsub(socket: &Path, cwd: &Path, args: &[&str]) -> Output {
    cmd(env!("CARGO_BIN_EXE_flexsub"), socket, cwd)
        .args(args)
        .output()
        .unwrap()
}

fn submitted(req: &Request) -> Response {
    match req {
        Request::Submit(_) => Response::Submitted(flex_proto::SubmitReply {
            job: JobId(17),
            warnings: Vec::new(),
        }),
        other => panic!("unexpected {other:?}"),
    }
}

fn only_spec(reqs: Vec<Request>) -> JobSpec {
    match reqs.as_slice() {
        [Request::Submit(s)] | [Request::TestOnly(s)] => s.clone(),
        other => panic!("expected one job, got {other:?}"),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn an_sbatch_script_is_submitted_with_its_directives_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), submitted);
    std::fs::write(
        dir.path().join("train.sh"),
        "#!/bin/bash\n#SBATCH --job-name=ddp\n#SBATCH --gres=gpu:4 -c 2\n#SBATCH -t 10:00\n\
         #SBATCH -o out-%j.log\nsrun hostname\n",
    )
    .unwrap();
    let out = flexsub(&d.path, dir.path(), &["train.sh", "a1", "--a2"]);
    assert_eq!(text(&out.stdout), "Submitted batch job 17\n", "{out:?}");
    assert!(out.status.success());
    let spec = only_spec(d.requests());
    assert_eq!(spec.name, "ddp");
    assert_eq!(spec.args, ["a1", "--a2"]);
    assert!(spec.script.starts_with("#!/bin/bash\n#SBATCH"));
    assert_eq!(spec.request.leaves, Some(4));
    assert_eq!(spec.request.cpus, 2, "one task of 2 cores, as in Slurm");
    assert_eq!(spec.request.time_limit_s, 600);
    assert_eq!(spec.stdout.as_deref(), Some("out-%j.log"));
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(spec.submit_dir.canonicalize().unwrap(), cwd);
    assert_eq!(spec.workdir.canonicalize().unwrap(), cwd);
    assert!(spec
        .env
        .pairs()
        .unwrap()
        .contains(&("FLEX_TEST_MARK".to_string(), "exported".to_string())));
}

#[test]
fn the_command_line_overrides_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), submitted);
    std::fs::create_dir(dir.path().join("work")).unwrap();
    std::fs::write(
        dir.path().join("job.sh"),
        "#!/bin/sh\n#FLEX --leaves 2 --time 5\n#FLEX -J first\necho\n",
    )
    .unwrap();
    let out = flexsub(
        &d.path,
        dir.path(),
        &[
            "--leaves=3",
            "-t",
            "2h",
            "-D",
            "work",
            "--parsable",
            "job.sh",
        ],
    );
    assert_eq!(text(&out.stdout), "17\n", "{out:?}");
    let spec = only_spec(d.requests());
    assert_eq!(spec.request.leaves, Some(3));
    assert_eq!(spec.request.time_limit_s, 7200);
    assert_eq!(spec.name, "first");
    assert!(spec.workdir.ends_with("work"));
}

#[test]
fn wrap_runs_a_command_named_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), submitted);
    let out = flexsub(
        &d.path,
        dir.path(),
        &["--gpu-fraction", "0.5", "--wrap", "echo hi"],
    );
    assert!(out.status.success(), "{out:?}");
    let spec = only_spec(d.requests());
    assert_eq!(spec.script, "#!/bin/sh\necho hi\n");
    assert_eq!(spec.name, "wrap");
    assert_eq!((spec.request.leaves, spec.request.gpus), (None, Some(0.5)));
}

#[test]
fn slurm_options_mean_the_same_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), submitted);
    let args = [
        "--exclusive",
        "--comment",
        "from the command line",
        "--begin=now+1hour",
        "--open-mode=append",
        "-C",
        "a100|h100",
        "--mail-type=END",
        "--mail-user",
        "ana@example.org",
        "-n",
        "2",
        "-c",
        "3",
        "--gres=gpu:2",
        "--hint=compute_bound",
        "--wrap",
        "true",
    ];
    let out = flexsub(&d.path, dir.path(), &args);
    assert!(out.status.success(), "{out:?}");
    let err = text(&out.stderr);
    assert_eq!(err.matches("--hint is ignored").count(), 1, "{err}");
    let spec = only_spec(d.requests());
    let o = &spec.options;
    assert!(o.exclusive && o.append, "{o:?}");
    assert_eq!(o.comment.as_deref(), Some("from the command line"));
    assert_eq!(o.constraint.as_deref(), Some("a100|h100"));
    let mail = o.mail.as_ref().unwrap();
    assert_eq!(mail.user.as_deref(), Some("ana@example.org"));
    assert!(mail.events.has(flex_proto::MailEvents::END));
    let begin = spec.queue.begin.unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(begin > now + 3500 && begin <= now + 3600, "{begin} {now}");
    assert_eq!(spec.request.cpus, 6, "2 tasks of 3 cores");
    assert!(spec.request.exclusive);
    // A refused option is refused on the command line too, and an optional value is taken.
    let dir2 = tempfile::tempdir().unwrap();
    let sock = dir2.path().join("none.sock");
    for (arg, want) in [
        ("--uid=0", "--uid is refused"),
        ("--bb=x", "--bb is refused"),
        ("--exclusive=node", "invalid exclusive \"node\""),
    ] {
        let out = flexsub(&sock, dir2.path(), &[arg, "--wrap", "true"]);
        assert_eq!(out.status.code(), Some(1), "{arg}: {out:?}");
        assert!(text(&out.stderr).contains(want), "{arg}: {out:?}");
    }
}

#[test]
fn bad_scripts_name_the_line_and_nothing_reaches_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("flexd.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let cases = [
        (
            "#!/bin/sh\n#SBATCH -J x\n\n#SBATCH --time=abc\n",
            "bad.sh:4: #SBATCH --time=abc: invalid time \"abc\"",
        ),
        (
            "#!/bin/sh\n#FLEX --gpu-fraction=NaN\n",
            "bad.sh:2: #FLEX --gpu-fraction=NaN: invalid GPU fraction \"NaN\"",
        ),
        (
            "#!/bin/sh\n#FLEX --leaves x\n",
            "bad.sh:2: #FLEX --leaves x: invalid leaves \"x\"",
        ),
        (
            "#!/bin/sh\n#SBATCH --frobnicate=1\n",
            "bad.sh:2: #SBATCH --frobnicate=1: unknown option \"--frobnicate\"",
        ),
        (
            "#!/bin/sh\n#SBATCH --mem=12Q\n",
            "bad.sh:2: #SBATCH --mem=12Q: invalid size \"12Q\"",
        ),
    ];
    for (script, want) in cases {
        std::fs::write(dir.path().join("bad.sh"), script).unwrap();
        let out = flexsub(&sock, dir.path(), &["bad.sh"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = text(&out.stderr);
        assert!(err.starts_with(&format!("flexsub: {want}")), "{err}");
    }
    let out = flexsub(&sock, dir.path(), &["--gpus", "-1", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("--gpus -1: invalid GPU count \"-1\""));
    let out = flexsub(&sock, dir.path(), &["--gpus", "0.5", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("--gpu-fraction 0.5"));
    let out = flexsub(&sock, dir.path(), &["missing.sh"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("cannot read missing.sh"));
    let out = flexsub(&sock, dir.path(), &["--bogus", "x.sh"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Launchers that give every worker all the leaves, in a job of several leaves.
    let launch = "#!/bin/bash\n#SBATCH --gres=gpu:4\naccelerate launch --multi_gpu t.py\n\
                  srun hostname\n  exec deepspeed --num_gpus 4 t.py\n";
    std::fs::write(dir.path().join("launch.sh"), launch).unwrap();
    let out = flexsub(&sock, dir.path(), &["launch.sh"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("flexsub: launch.sh:3: accelerate launch --multi_gpu t.py:"));
    assert!(lines[0].contains("torchrun --nproc-per-node=gpu"), "{err}");
    assert!(lines[1].starts_with("flexsub: launch.sh:5: exec deepspeed --num_gpus 4 t.py:"));
    assert!(listener.accept().is_err(), "flexsub connected to flexd");
}

#[test]
fn one_leaf_jobs_may_use_any_launcher() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), submitted);
    let script = "#!/bin/bash\n#SBATCH --gres=gpu:1\naccelerate launch t.py\n";
    std::fs::write(dir.path().join("one.sh"), script).unwrap();
    let out = flexsub(&d.path, dir.path(), &["one.sh"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(only_spec(d.requests()).request.leaves, Some(1));
}

#[test]
fn without_a_daemon_the_socket_is_named_and_the_code_is_3() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    let out = flexsub(&sock, dir.path(), &["--wrap", "true"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(text(&out.stderr).starts_with(&format!(
        "flexsub: cannot reach flexd at {}:",
        sock.display()
    )));
    let out = cmd(env!("CARGO_BIN_EXE_flexq"), &sock, dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn refusals_are_printed_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), |_| {
        Response::error(
            ErrorKind::Unsatisfiable,
            "no host has 99 leaves: the largest has 14",
        )
    });
    let out = flexsub(&d.path, dir.path(), &["--leaves", "99", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        "flexsub: no host has 99 leaves: the largest has 14\n"
    );
    d.requests();

    let d = FakeDaemon::start(dir.path(), |_| {
        Response::error(
            ErrorKind::PermissionDenied,
            "permission denied: job 3 belongs to ann",
        )
    });
    let out = cmd(env!("CARGO_BIN_EXE_flexcancel"), &d.path, dir.path())
        .arg("3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(text(&out.stderr).contains("permission denied"));
}

fn would_start(req: &Request) -> Response {
    assert!(matches!(req, Request::TestOnly(_)), "{req:?}");
    Response::WouldStart(Box::new(WouldStart {
        alloc: Some(AllocView {
            host: "a100-testbed".into(),
            leaves: (0..2)
                .map(|i| LeafView {
                    uuid: format!("MIG-000{i}"),
                    profile: "1g.5gb".into(),
                    gpu: i,
                    share: 1000,
                })
                .collect(),
            cores: vec![0, 16],
            mem_bytes: 0,
        }),
        estimated_start: Some(0),
        reason: None,
        warnings: Vec::new(),
    }))
}

#[test]
fn test_only_prints_the_placement_and_queues_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = FakeDaemon::start(dir.path(), would_start);
    let out = flexsub(
        &d.path,
        dir.path(),
        &["--test-only", "--leaves", "2", "--wrap", "true"],
    );
    assert!(out.status.success(), "{out:?}");
    let s = text(&out.stdout);
    assert!(
        s.contains("would start now on a100-testbed using 2 leaves on GPUs 0,1"),
        "{s}"
    );
    assert!(s.contains("MIG-0001") && s.contains("1g.5gb"), "{s}");
    assert!(matches!(d.requests().as_slice(), [Request::TestOnly(_)]));

    let d = FakeDaemon::start(dir.path(), would_start);
    let out = flexsub(
        &d.path,
        dir.path(),
        &["--test-only", "--json", "--wrap", "true"],
    );
    let ws: WouldStart = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ws.alloc.unwrap().leaves.len(), 2);
    d.requests();
}

/// A model directory holding only a LLaMA-shaped config.json.
fn tiny_model(dir: &Path) -> PathBuf {
    let m = dir.join("model");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(
        m.join("config.json"),
        r#"{"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
            "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
            "num_key_value_heads": 4, "torch_dtype": "bfloat16"}"#,
    )
    .unwrap();
    m
}

#[test]
fn estimate_only_prints_the_breakdown_even_without_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let sock = dir.path().join("none.sock");
    let m = model.to_str().unwrap();
    let args = [
        "--model",
        m,
        "--batch-size",
        "4",
        "--seq-len",
        "512",
        "--infer",
        "--estimate-only",
        "--wrap",
        "true",
    ];
    let out = flexsub(&sock, dir.path(), &args);
    assert!(out.status.success(), "{out:?}");
    let s = text(&out.stdout);
    assert!(s.contains("parameters") && s.contains("total"), "{s}");
    assert!(
        s.contains("on this host: unavailable (cannot reach flexd"),
        "{s}"
    );

    let d = FakeDaemon::start(dir.path(), would_start);
    let out = flexsub(&d.path, dir.path(), &args);
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains("on a100-testbed: needs 2 leaves (1g.5gb) on GPUs 0,1"));
    let spec = only_spec(d.requests());
    let mem = spec
        .request
        .mem_bytes
        .expect("the estimate is sent as memory");
    assert!(mem > 1 << 30, "{mem}");
    assert_eq!(spec.request.leaves, None);

    // No script and no --wrap: an estimate reads nothing from standard input; --json.
    let d = FakeDaemon::start(dir.path(), would_start);
    let out = flexsub(
        &d.path,
        dir.path(),
        &[
            "--model",
            m,
            "--infer",
            "--seq-len",
            "512",
            "--estimate-only",
            "--json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        v["estimate"]["total_bytes"].as_u64().unwrap() > 1 << 30,
        "{v}"
    );
    assert_eq!(v["estimate"]["dtype"], "bf16", "{v}");
    assert!(v["on_this_host"].is_object() && v["error"].is_null(), "{v}");
    let spec = only_spec(d.requests());
    assert_eq!(spec.request.leaves, None);
    let out = flexsub(&sock, dir.path(), &["--json", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let out = flexsub(
        &sock,
        dir.path(),
        &[
            "--model",
            "/no/such/model",
            "--batch-size",
            "1",
            "--seq-len",
            "8",
            "--train",
            "--wrap",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("/no/such/model"));
}

#[test]
fn the_example_scripts_parse() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../etc/examples");
    type Check = fn(&JobSpec) -> bool;
    let cases: [(&str, Check); 3] = [
        ("ddp.sh", |s| {
            s.request.leaves == Some(4) && s.request.cores_per_leaf == 4
        }),
        ("sbatch-only.sh", |s| {
            s.request.leaves == Some(2) && s.request.leaf_type.as_deref() == Some("1g.5gb")
        }),
        ("fraction.sh", |s| {
            s.request.gpus == Some(0.25) && s.request.leaves.is_none()
        }),
    ];
    for (name, check) in cases {
        let dir = tempfile::tempdir().unwrap();
        let d = FakeDaemon::start(dir.path(), submitted);
        let script = examples.join(name);
        let out = flexsub(&d.path, dir.path(), &[script.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {out:?}");
        let spec = only_spec(d.requests());
        assert!(check(&spec), "{name}: {:?}", spec.request);
    }
    let dir = tempfile::tempdir().unwrap();
    let script = examples.join("model-memory.sh");
    let out = flexsub(
        &dir.path().join("none.sock"),
        dir.path(),
        &["--estimate-only", script.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("/models/TinyLlama-1.1B"),
        "{out:?}"
    );
}
