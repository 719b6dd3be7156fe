//! Hostile clients against the real flexd: random bytes, random JSON and random well-formed
//! requests never crash it or leave it unable to answer, and every limit of its `[limits]` table
//! is enforced where it belongs with an error that names the limit and its value, a non-zero
//! exit of the command, and nothing queued.
//!
//! The request property runs 500 cases in CI; `PROPTEST_CASES` sets more.

use flex_proto::{self, AcctQuery, ErrorKind, JobSpec, JobState, QueueFilter, Request, Response};
use flex_tests::{script_job, Client, Daemon};
use gres_plugin::{JobId, Request as ResourceRequest};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

const A100: &str = "a100-40gb-x2.toml";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The names of every job flexd knows, finished ones included.
fn names(d: &Daemon) -> Vec<String> {
    d.client()
        .queue(QueueFilter {
            include_finished: true,
            ..QueueFilter::default()
        })
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

/// What hostile clients send.
#[derive(Clone, Debug)]
enum Attack {
    /// Raw bytes, before or after the Hello.
    Bytes { hello: bool, bytes: Vec<u8> },
    /// A well-formed frame holding any JSON.
    Json(serde_json::Value),
    /// A request that decodes, with hostile fields.
    Request(Box<Request>),
}

fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,24}",
        "[a-z%/\\.\\-]{0,16}",
        "\\PC{0,4}\u{0}\\PC{0,4}",
        (1usize..20_000).prop_map(|n| "x".repeat(n)),
    ]
}

fn resource_request() -> impl Strategy<Value = ResourceRequest> {
    (
        prop::option::of(prop_oneof![Just(0u32), Just(u32::MAX), 0u32..100]),
        prop::option::of(prop_oneof![Just("1g.5gb".to_string()), any_string()]),
        prop::option::of(prop_oneof![
            Just(0.0f64),
            Just(-1.0),
            Just(f64::MAX),
            Just(1e-300),
            0.0f64..20.0
        ]),
        prop::option::of(prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()]),
        prop_oneof![Just(0u32), Just(u32::MAX), 0u32..200],
        prop_oneof![
            Just(0u64),
            Just(u64::MAX),
            Just(i64::MAX as u64),
            0u64..1_000_000
        ],
    )
        .prop_map(
            |(leaves, leaf_type, gpus, mem, cores, time)| ResourceRequest {
                leaves,
                leaf_type,
                gpus,
                mem_bytes: mem,
                cores_per_leaf: cores,
                time_limit_s: time,
                placement: None,
                ..Default::default()
            },
        )
}

/// A submission with hostile fields, except what would make a job that starts write where it
/// should not: the script is `true`, output patterns are plain relative names, the working
/// directory does not exist.
fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        any_string(),
        prop::collection::vec(any_string(), 0..4),
        prop_oneof![
            Just("/nonexistent/flex-hostile".to_string()),
            Just("relative".to_string()),
            Just(String::new()),
            "/nonexistent/\\PC{0,12}",
        ],
        prop::collection::vec((any_string(), any_string()), 0..4),
        prop::option::of(prop_oneof![Just(String::new()), "[a-z%]{0,8}"]),
        resource_request(),
        prop::option::of(any_string()),
        prop_oneof![
            Just("#!/bin/sh\ntrue\n".to_string()),
            Just(String::new()),
            Just(" \n".to_string())
        ],
    )
        .prop_map(
            |(name, args, dir, env, out, request, account, script)| JobSpec {
                name,
                script,
                args,
                workdir: dir.clone().into(),
                submit_dir: dir.into(),
                env: env.into(),
                stdout: out.clone(),
                stderr: out,
                request,
                account,
                qos: None,
                nice: 0,
                options: Default::default(),
                queue: Default::default(),
                umask: None,
                signal: None,
            },
        )
}

fn request(blocker: JobId) -> impl Strategy<Value = Request> {
    let ids = prop::collection::vec(
        prop_oneof![Just(0u64), Just(u64::MAX), 2u64..50].prop_map(JobId),
        0..5,
    );
    prop_oneof![
        job_spec().prop_map(Request::Submit),
        job_spec().prop_map(Request::TestOnly),
        (
            prop::collection::vec(any_string(), 0..3),
            prop::collection::vec(prop::sample::select(JobState::ALL.to_vec()), 0..3),
            ids.clone(),
            any::<bool>(),
            prop::option::of(any::<u64>().prop_map(JobId)),
            any::<bool>()
        )
            .prop_map(|(users, states, jobs, include_finished, after, rows)| {
                let f = QueueFilter {
                    users,
                    states,
                    jobs,
                    include_finished,
                    after,
                    arrays: rows.then_some(flex_proto::ArrayRows::Collapse),
                    // A listing of full views reads each job's details from the database.
                    details: !rows,
                };
                if rows {
                    Request::QueueRows(f)
                } else {
                    Request::Queue(f)
                }
            }),
        // Never the job that keeps everything pending.
        (
            ids.clone(),
            prop::option::of(prop_oneof![Just(0), Just(-1), Just(i32::MAX), 0..70])
        )
            .prop_map(
                move |(jobs, signal)| Request::Cancel(flex_proto::CancelRequest {
                    jobs: jobs.into_iter().filter(|j| *j != blocker).collect(),
                    signal,
                    tasks: vec![],
                })
            ),
        Just(Request::LeafMap),
        Just(Request::Ping),
        prop_oneof![Just(0u64), Just(u64::MAX), 2u64..50].prop_map(|j| Request::JobEnded(
            flex_proto::JobEndedRequest {
                job: JobId(j),
                status: None
            }
        )),
        (any::<u64>(), any::<u64>(), ids).prop_map(|(start, end, jobs)| {
            Request::Accounting(AcctQuery {
                start,
                end,
                jobs,
                ..AcctQuery::default()
            })
        }),
    ]
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec!["Submit", "Cancel", "Queue", "Ping", "JobEnded", "x"])
            .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "Submit", "Cancel", "Queue", "JobEnded", "jobs", "signal", "job", "script",
                        "request", "leaves",
                    ]),
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

fn attack(blocker: JobId) -> impl Strategy<Value = Attack> {
    prop_oneof![
        1 => (any::<bool>(), prop::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(hello, bytes)| Attack::Bytes { hello, bytes }),
        1 => json().prop_map(Attack::Json),
        4 => request(blocker).prop_map(|r| Attack::Request(Box::new(r))),
    ]
}

/// A raw connection after a successful Hello.
fn greeted(socket: &Path) -> UnixStream {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    flex_proto::write_frame(
        &mut s,
        &flex_proto::Hello {
            version: flex_proto::PROTOCOL_VERSION,
            client: "hostile".into(),
        },
    )
    .unwrap();
    match flex_proto::read_frame::<Response>(&mut s, flex_proto::DEFAULT_MAX_FRAME).unwrap() {
        Response::Hello(flex_proto::HelloReply { .. }) => s,
        r => panic!("{r:?}"),
    }
}

/// Send one attack; the answer to a request that decodes must be a response.
fn send(socket: &Path, a: &Attack) -> Result<(), TestCaseError> {
    match a {
        Attack::Bytes { hello, bytes } => {
            let mut s = if *hello {
                greeted(socket)
            } else {
                UnixStream::connect(socket).unwrap()
            };
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let _ = s.write_all(bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            // Whatever comes back (an error, or nothing for an incomplete frame) is fine.
            let _ = flex_proto::read_frame::<Response>(&mut s, flex_proto::DEFAULT_MAX_FRAME);
        }
        Attack::Json(v) => {
            let mut s = greeted(socket);
            let body = serde_json::to_vec(v).unwrap();
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(&body);
            s.write_all(&f).unwrap();
            let r = flex_proto::read_frame::<Response>(&mut s, flex_proto::DEFAULT_MAX_FRAME);
            prop_assert!(r.is_ok(), "no answer to {}: {:?}", v, r.err());
        }
        Attack::Request(req) => {
            let r = Client::connect(socket).unwrap().request(req);
            match r {
                Ok(Response::Error(e)) => prop_assert!(!e.message.trim().is_empty()),
                Ok(_) => {}
                Err(e) => prop_assert!(false, "no answer to {:?}: {}", req, e),
            }
        }
    }
    Ok(())
}

#[test]
fn random_bytes_json_and_requests_never_bring_flexd_down() {
    let d = Daemon::start_with(A100, "policy = \"fifo\"");
    let w = d.scratch("hostile");
    let mut blocker = script_job("#!/bin/sh\nexec sleep 3600\n", &w);
    blocker.request = ResourceRequest::leaves(14, 3600);
    let blocker = d.client().submit(blocker).unwrap();
    d.wait_state(blocker, &[JobState::Running]);

    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let socket = d.socket();
    runner
        .run(&attack(blocker), |a| {
            send(&socket, &a)?;
            // Still up and answering.
            let pong = Client::connect(&socket).and_then(|mut c| c.request(&Request::Ping));
            prop_assert!(
                matches!(pong, Ok(Response::Pong)),
                "after {:?}: {:?}",
                a,
                pong
            );
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}\nflexd log:\n{}", d.log()));
    assert_eq!(d.job(blocker).unwrap().state, JobState::Running);
    let log = d.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn requests_at_the_edges_of_their_types_are_answered() {
    let d = Daemon::start(A100);
    let w = d.scratch("edges");
    let edges: [fn(&mut ResourceRequest); 7] = [
        |r| r.cores_per_leaf = u32::MAX,
        |r| r.leaves = Some(u32::MAX),
        |r| r.mem_bytes = Some(u64::MAX),
        |r| r.time_limit_s = u64::MAX,
        |r| r.gpus = Some(f64::MAX),
        |r| r.gpus = Some(1e-300),
        |r| {
            r.leaves = None;
            r.gpus = Some(-1.0)
        },
    ];
    for (i, edge) in edges.iter().enumerate() {
        let mut spec = script_job("true\n", &w);
        edge(&mut spec.request);
        spec.name = format!("edge-{i}");
        for req in [
            Request::TestOnly(spec.clone()),
            Request::Submit(spec.clone()),
        ] {
            match d.client().request(&req) {
                Ok(Response::Error(e)) => assert!(!e.message.is_empty()),
                Ok(Response::Submitted(flex_proto::SubmitReply { job, .. })) => {
                    d.wait_finished(job);
                }
                Ok(_) => {}
                Err(e) => panic!("edge {i}: {e:?}\n{}", d.log()),
            }
        }
    }
    assert!(!d.log().contains("panicked"), "{}", d.log());
}

#[test]
fn an_oversized_frame_is_refused_by_name_and_flexd_carries_on() {
    let d = Daemon::start_with(A100, "[limits]\nmax_frame_bytes = \"64 KiB\"");
    let w = d.scratch("frame");
    // Through flexsub: a submission whose environment makes the frame 800 KiB, more than a
    // socket buffer, so flexsub is still writing when flexd refuses it.
    std::fs::write(w.join("job.sh"), "#!/bin/sh\n#FLEX -J big-frame\ntrue\n").unwrap();
    let out = d
        .cmd("flexsub")
        .current_dir(&w)
        .envs((0..8).map(|i| (format!("HUGE{i}"), "y".repeat(100 << 10))))
        .arg("job.sh")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("max_frame_bytes = 65536") && err.contains("bytes, more than"),
        "{err}"
    );
    assert!(!names(&d).iter().any(|n| n == "big-frame"));

    // A client that declares a huge frame and sends nothing more is answered the same way.
    let mut s = greeted(&d.socket());
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    match flex_proto::read_frame::<Response>(&mut s, flex_proto::DEFAULT_MAX_FRAME).unwrap() {
        Response::Error(e) => {
            assert_eq!(e.kind, ErrorKind::LimitExceeded);
            assert!(
                e.message.contains("max_frame_bytes = 65536"),
                "{}",
                e.message
            );
        }
        r => panic!("{r:?}"),
    }
    drop(s);
    let job = d.client().submit(script_job("true\n", &w)).unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
}

#[test]
fn flexd_refuses_an_oversized_script_whatever_the_client_checks() {
    let d = Daemon::start_with(A100, "[limits]\nmax_script_bytes = 1000");
    let w = d.scratch("script");
    let mut spec = script_job(&format!("#!/bin/sh\n#{}\ntrue\n", "x".repeat(2000)), &w);
    spec.name = "big-script".into();
    match d.client().submit(spec) {
        Err(flex_tests::ClientError::Daemon { kind, message }) => {
            assert_eq!(kind, ErrorKind::LimitExceeded);
            assert!(message.contains("max_script_bytes = 1000"), "{message}");
            assert!(message.contains("2017 bytes"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    assert!(!names(&d).iter().any(|n| n == "big-script"));
}

#[test]
fn the_queued_jobs_limit_is_named_and_nothing_more_is_queued() {
    let d = Daemon::start_with(A100, "[limits]\nmax_queued_per_user = 3");
    let w = d.scratch("queued");
    let submit = |name: &str| {
        std::fs::write(
            w.join(format!("{name}.sh")),
            format!("#!/bin/sh\n#FLEX -J {name} --leaves 14\nexec sleep 300\n"),
        )
        .unwrap();
        d.cmd("flexsub")
            .current_dir(&w)
            .arg(format!("{name}.sh"))
            .output()
            .unwrap()
    };
    for i in 0..3 {
        let out = submit(&format!("q{i}"));
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = submit("q3");
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("max_queued_per_user = 3"), "{err}");
    let names = names(&d);
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(!names.iter().any(|n| n == "q3"));
    let ids: Vec<JobId> = d
        .client()
        .queue(QueueFilter::default())
        .unwrap()
        .into_iter()
        .map(|v| v.id)
        .collect();
    d.client().cancel(ids.clone(), None).unwrap();
    for id in ids {
        d.wait_finished(id);
    }
}

#[test]
fn flexsub_refuses_too_many_directives_and_too_big_a_script_before_sending() {
    let d = Daemon::start_with(
        A100,
        "[limits]\nmax_directives = 5\nmax_script_bytes = \"1 KiB\"",
    );
    let w = d.scratch("flexsub-limits");
    let run = |script: &str| {
        std::fs::write(w.join("job.sh"), script).unwrap();
        let out = d
            .cmd("flexsub")
            .current_dir(&w)
            .arg("job.sh")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let mut many = String::from("#!/bin/sh\n#FLEX -J too-many\n");
    for _ in 0..5 {
        many.push_str("#SBATCH --time=10\n");
    }
    many.push_str("true\n");
    let (code, err) = run(&many);
    assert!(code.is_some_and(|c| c != 0), "{err}");
    assert!(
        err.contains("job.sh:7: more than max_directives = 5 directive lines"),
        "{err}"
    );
    // Five are fine.
    let five = many
        .replacen("#SBATCH --time=10\n", "", 1)
        .replace("too-many", "five");
    let (code, err) = run(&five);
    assert_eq!(code, Some(0), "{err}");

    let big = format!("#!/bin/sh\n#FLEX -J too-big\n#{}\ntrue\n", "x".repeat(1100));
    let (code, err) = run(&big);
    assert!(code.is_some_and(|c| c != 0), "{err}");
    assert!(
        err.contains("job.sh: the script is 1134 bytes, more than max_script_bytes = 1024"),
        "{err}"
    );
    let names = names(&d);
    assert!(
        !names.iter().any(|n| n == "too-many" || n == "too-big"),
        "{names:?}"
    );

    // A flexsub that does not know the limit (its config says nothing) is refused by flexd.
    std::fs::write(w.join("other.toml"), "# no limits here\n").unwrap();
    std::fs::write(w.join("job.sh"), &big).unwrap();
    let out = d
        .cmd("flexsub")
        .current_dir(&w)
        .env("FLEX_CONFIG", w.join("other.toml"))
        .arg("job.sh")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("max_script_bytes = 1024"), "{err}");
    assert!(!self::names(&d).iter().any(|n| n == "too-big"));
}
