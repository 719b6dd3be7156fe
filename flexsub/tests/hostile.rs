//! Hostile input for everything flexsub reads from a user or a socket: the job-script directive
//! reader, the value parsers and the frame decoder. Property tests stand in for a fuzzer (cargo
//! fuzz needs a nightly toolchain): no input may panic, and every rejection is a message that
//! says where (file and line) and what (the value, quoted).
//!
//! CI runs a few thousand cases per property in seconds; a long run sets the count:
//! `PROPTEST_CASES=1000000 cargo test --release -p flexsub --test hostile`.

use flex_proto::{
    self, Env, FrameError, Hello, JobSpec, JobState, QueueFilter, QueueRow, QueueRows, Request,
    Response,
};
use flexsub::options::{self, Settings};
use flexsub::script::{apply_directives, check_directive_count};
use flexsub::units::{
    parse_count, parse_fraction, parse_output_pattern, parse_signal, parse_size, parse_time,
    SizeUnit,
};
use gres_plugin::{JobId, Request as ResourceRequest};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// PROPTEST_CASES when set, else `default`.
fn cases(default: u32) -> Config {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases: n,
        // Failures are reported with their input; no files are written into the source tree.
        failure_persistence: None,
        ..Config::default()
    }
}

/// Strings shaped like the values users type, and worse.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        prop::collection::vec(any::<u8>(), 0..64)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "[0-9]{0,30}(\\.[0-9]{0,12})? ?(k|K|m|M|g|G|t|T|KiB|MiB|GiB|TiB|GB|b|B|x|e9|)",
        "[0-9]{0,25}(-[0-9]{0,25})?(:[0-9]{0,25}){0,3}",
        "[0-9]{1,25} ?(s|m|h|d|days|ms|ns|us|y|w|min|months)( [0-9]{1,5}[smhd])?",
        "-?[0-9]{0,5}(\\.[0-9]{0,5})?(e-?[0-9]{1,4})?|NaN|inf|-inf|-0",
        "[a-z%/\\.jxuA\\-]{0,24}",
        ("[1-9]", 20usize..400).prop_map(|(d, n)| d.repeat(n)),
        "\\PC{0,10}\u{0}\\PC{0,10}",
        ("[a-z%:0-9]{1,6}", 200usize..1000).prop_map(|(s, n)| s.repeat(n)),
        "(SIG)?[A-Za-z]{0,8}[0-9]{0,3}",
    ]
}

/// A value parser's error: `invalid <what> "<value>": <why>`, naming the value as given (a
/// path longer than a path may be by its first 64 characters).
fn check_value_error(e: &flexsub::units::ValueError, input: &str) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    let named = if e.why.contains("longer than a path may be") {
        input.chars().take(64).collect::<String>() + "…"
    } else {
        input.to_string()
    };
    prop_assert_eq!(&e.value, &named);
    prop_assert!(msg.starts_with("invalid "), "{}", msg);
    prop_assert!(msg.contains(&format!("{named:?}")), "{}", msg);
    prop_assert!(!e.why.trim().is_empty(), "{}", msg);
    Ok(())
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn value_parsers_never_panic_and_name_the_value(s in value()) {
        match parse_time(&s) {
            Ok(t) => prop_assert!(t > 0),
            Err(e) => check_value_error(&e, &s)?,
        }
        for unit in [SizeUnit::Bytes, SizeUnit::Mebibytes] {
            match parse_size(&s, unit) {
                Ok(b) => prop_assert!(b > 0),
                Err(e) => check_value_error(&e, &s)?,
            }
        }
        match parse_fraction(&s) {
            Ok(f) => prop_assert!(f.is_finite() && f > 0.0),
            Err(e) => check_value_error(&e, &s)?,
        }
        match parse_count("leaves", &s) {
            Ok(n) => prop_assert!(n > 0),
            Err(e) => check_value_error(&e, &s)?,
        }
        match parse_output_pattern(&s) {
            Ok(p) => {
                prop_assert!(!p.is_empty() && !p.contains('\0'));
            }
            Err(e) => check_value_error(&e, &s)?,
        }
        match parse_signal(&s) {
            Ok(n) => prop_assert!(n >= 1),
            Err(e) => check_value_error(&e, &s)?,
        }
    }
}

/// One word of a directive line.
fn word() -> impl Strategy<Value = String> {
    let longs: Vec<&'static str> = options::all().map(|o| o.long).collect();
    let shorts: Vec<char> = options::all().filter_map(|o| o.short).collect();
    prop_oneof![
        3 => (prop::sample::select(longs.clone()), value())
            .prop_map(|(l, v)| format!("--{l}={v}")),
        2 => prop::sample::select(longs).prop_map(|l| format!("--{l}")),
        2 => prop::sample::select(shorts).prop_map(|c| format!("-{c}")),
        3 => value(),
        1 => "['\"#=\\-]{1,3}",
        1 => "--[a-z\\-]{0,12}(=\\PC{0,8})?",
    ]
}

/// One line of a batch script's header, directives mostly.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (
            prop::sample::select(vec!["#FLEX", "#SBATCH", "#FLEX\t", "#SBATCH  ", "#FLEXX", "# SBATCH"]),
            prop::collection::vec(word(), 0..6),
        )
            .prop_map(|(p, ws)| format!("{p} {}", ws.join(" "))),
        1 => "#\\PC{0,40}",
        1 => Just(String::new()),
        1 => Just("#!/bin/bash".to_string()),
        1 => "\\PC{0,40}",
        1 => (5000usize..20000).prop_map(|n| format!("#SBATCH -J {}", "x".repeat(n))),
        1 => "#FLEX[ \u{0}\u{7f}\r\t]\\PC{0,20}",
        1 => prop::collection::vec(any::<u8>(), 0..80)
            .prop_map(|b| format!("#SBATCH {}", String::from_utf8_lossy(&b))),
    ]
}

/// Check what the directive reader said about `script`: errors and warnings start with
/// `job.sh:<line>: <prefix> ` on a line that is that directive.
fn check_directives(script: &str) -> Result<(), TestCaseError> {
    let mut s = Settings::default();
    let lines: Vec<&str> = script.lines().collect();
    let where_ok = |msg: &str| -> Result<(), TestCaseError> {
        let rest = msg.strip_prefix("job.sh:");
        prop_assert!(rest.is_some(), "{}", msg);
        let (n, rest) = rest.unwrap().split_once(": ").unwrap_or(("", ""));
        let n: usize = n
            .parse()
            .map_err(|_| TestCaseError::fail(format!("no line: {msg}")))?;
        prop_assert!(
            (1..=lines.len()).contains(&n),
            "line {} of {}: {}",
            n,
            lines.len(),
            msg
        );
        let prefix = rest.split(' ').next().unwrap_or("");
        prop_assert!(prefix == "#FLEX" || prefix == "#SBATCH", "{}", msg);
        prop_assert!(
            lines[n - 1].starts_with(prefix),
            "line {}: {:?}: {}",
            n,
            lines[n - 1],
            msg
        );
        prop_assert!(
            rest.len() > prefix.len() + 1,
            "nothing after the prefix: {}",
            msg
        );
        Ok(())
    };
    match apply_directives("job.sh", script, &mut s) {
        Ok(warnings) => {
            for w in &warnings {
                where_ok(w)?;
            }
            // What the directives asked for becomes a request or a clear refusal.
            if let Err(e) = s.request(None) {
                prop_assert!(!e.trim().is_empty());
            }
        }
        Err(e) => where_ok(&e)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn directive_scripts_never_panic_and_errors_name_the_line(
        lines in prop::collection::vec(line(), 0..24),
        crlf in any::<bool>(),
    ) {
        let script = lines.join(if crlf { "\r\n" } else { "\n" });
        check_directives(&script)?;
    }

    #[test]
    fn mutated_example_scripts_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..12),
    ) {
        let mut bytes = EXAMPLES[which].as_bytes().to_vec();
        for (at, b, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, b),
                1 if i < bytes.len() => { bytes.remove(i); }
                _ if i < bytes.len() => bytes[i] = b,
                _ => bytes.push(b),
            }
        }
        check_directives(&String::from_utf8_lossy(&bytes))?;
    }
}

const EXAMPLES: [&str; 4] = [
    include_str!("../../etc/examples/ddp.sh"),
    include_str!("../../etc/examples/fraction.sh"),
    include_str!("../../etc/examples/model-memory.sh"),
    include_str!("../../etc/examples/sbatch-only.sh"),
];

#[test]
fn huge_directive_counts_and_lines_are_read_or_refused_cleanly() {
    let mut script = String::from("#!/bin/sh\n");
    for i in 0..200_000 {
        script.push_str(&format!("#SBATCH -J name-{i}\n"));
    }
    script.push_str("#FLEX --leaves 2\ntrue\n");
    let mut s = Settings::default();
    apply_directives("big.sh", &script, &mut s).unwrap();
    assert_eq!(s.name.as_deref(), Some("name-199999"));
    assert_eq!(s.leaves, Some(2));
    // flexsub refuses such a script under the default max_directives, naming the first line
    // over it (line 1 is the #! line).
    let e = check_directive_count("big.sh", &script, 1000).unwrap_err();
    assert_eq!(
        e,
        "big.sh:1002: more than max_directives = 1000 directive lines (#FLEX and #SBATCH)"
    );
    check_directive_count("big.sh", &script, 200_001).unwrap();

    let long = format!("#!/bin/sh\n#SBATCH --time={}\n", "9".repeat(1 << 20));
    let e = apply_directives("long.sh", &long, &mut Settings::default()).unwrap_err();
    assert!(
        e.starts_with("long.sh:2: #SBATCH --time=999"),
        "{}",
        &e[..80]
    );
    assert!(e.contains("invalid time"), "{}", &e[e.len() - 200..]);
}

/// JSON values of any shape, up to a few levels deep.
fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::String),
        prop::sample::select(vec![
            "Submit",
            "TestOnly",
            "Queue",
            "Cancel",
            "LeafMap",
            "Ping",
            "JobEnded",
            "Accounting",
            "name",
            "script",
            "request",
            "leaves",
            "jobs",
            "signal",
            "PENDING",
        ])
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        prop::sample::select(vec![
                            "Submit",
                            "TestOnly",
                            "Queue",
                            "Cancel",
                            "JobEnded",
                            "Accounting",
                            "name",
                            "script",
                            "args",
                            "workdir",
                            "submit_dir",
                            "env",
                            "stdout",
                            "stderr",
                            "request",
                            "account",
                            "leaves",
                            "gpus",
                            "mem_bytes",
                            "cores_per_leaf",
                            "time_limit_s",
                            "users",
                            "states",
                            "jobs",
                            "include_finished",
                            "signal",
                            "job",
                            "version",
                            "client",
                        ])
                        .prop_map(String::from),
                        "\\PC{0,8}",
                    ],
                    inner,
                ),
                0..8,
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn a_submission() -> Request {
    Request::Submit(JobSpec {
        name: "train".into(),
        script: "#!/bin/sh\n#FLEX --leaves 2\ntrue\n".into(),
        args: vec!["a".into()],
        workdir: "/tmp".into(),
        submit_dir: "/tmp".into(),
        env: vec![("PATH".into(), "/bin".into())].into(),
        stdout: Some("out-%j".into()),
        stderr: None,
        request: ResourceRequest::leaves(2, 60),
        account: None,
        qos: None,
        nice: 0,
        options: Default::default(),
        queue: Default::default(),
        umask: None,
        signal: None,
    })
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn well_formed_frames_of_any_json_decode_or_are_malformed(v in json()) {
        let body = serde_json::to_vec(&v).unwrap();
        let f = frame(&body);
        match flex_proto::decode::<Request>(&f, flex_proto::DEFAULT_MAX_FRAME) {
            Ok(Some((_, used))) => prop_assert_eq!(used, f.len()),
            Ok(None) => prop_assert!(false, "a whole frame is not incomplete"),
            Err(FrameError::Malformed(m)) => prop_assert!(!m.is_empty()),
            Err(e) => prop_assert!(false, "unexpected {}", e),
        }
        let _ = flex_proto::decode::<Hello>(&f, flex_proto::DEFAULT_MAX_FRAME);
        let too_large = matches!(
            flex_proto::decode::<Request>(&f, body.len().saturating_sub(1)),
            Err(FrameError::TooLarge { .. })
        );
        prop_assert!(too_large || body.is_empty(), "the limit is the body's length");
    }

    #[test]
    fn request_shaped_json_never_panics(
        variant in prop::sample::select(vec![
            "Submit", "TestOnly", "Queue", "Cancel", "JobEnded", "Accounting", "LeafMap", "Ping",
        ]),
        v in json(),
    ) {
        let body = serde_json::to_vec(&serde_json::json!({ variant: v })).unwrap();
        let mut r = std::io::Cursor::new(frame(&body));
        match flex_proto::read_frame::<Request>(&mut r, flex_proto::DEFAULT_MAX_FRAME) {
            Ok(_) => {}
            Err(e) => prop_assert!(e.to_string().starts_with("malformed frame: "), "{}", e),
        }
    }

    #[test]
    fn mutated_request_frames_never_panic(
        which in 0usize..3,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let reqs = [
            a_submission(),
            Request::Cancel(flex_proto::CancelRequest { jobs: vec![JobId(3), JobId(u64::MAX)], signal: Some(10), tasks: vec![] }),
            Request::Queue(QueueFilter { users: vec!["ana".into()], ..QueueFilter::default() }),
        ];
        let mut f = flex_proto::encode(&reqs[which]);
        for (at, b) in edits {
            let i = at.index(f.len());
            f[i] = b;
        }
        let f = &f[..cut.index(f.len() + 1)];
        match flex_proto::decode::<Request>(f, 1 << 16) {
            Ok(Some((_, used))) => prop_assert!(used <= f.len()),
            Ok(None) => {}
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        let mut r = std::io::Cursor::new(f);
        let _ = flex_proto::read_frame::<Request>(&mut r, 1 << 16);
    }

    #[test]
    fn mutated_answers_and_environments_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        // A page of flexq's rows as flexd writes it, damaged: read row by row, or refused.
        let rows = vec![QueueRow {
            id: JobId(7),
            name: "say \"hi\"".into(),
            user: "ana".into(),
            state: JobState::Pending,
            elapsed_s: 0,
            time_limit_s: 60,
            units: "gpu=0.5".into(),
            start: Some(1),
            host: None,
            reason: Some("Resources".into()),
            array: Some("[1-3%2]".into()),
        }];
        let page = Response::QueueRows(flex_proto::RowsPage { rows: QueueRows::new(rows.into_iter()), next: Some(JobId(7)) });
        let mut body = serde_json::to_vec(&page).unwrap();
        for (at, b) in &edits {
            let i = at.index(body.len());
            body[i] = *b;
        }
        let body = &body[..cut.index(body.len() + 1)];
        let mut n = 0;
        if let Err(e) = flex_proto::read_queue_rows(body, |_| n += 1) {
            prop_assert!(!e.to_string().is_empty());
        }
        // An environment as a client may send it, damaged: checked, or refused with a message.
        let mut env = br#"[["PATH","/bin"],["A","x\u0000y"]]"#.to_vec();
        for (at, b) in edits {
            let i = at.index(env.len());
            env[i] = b;
        }
        if let Ok(env) = Env::from_json(String::from_utf8_lossy(&env).into_owned()) {
            if let Err(e) = env.check(|_, _| Ok(())) {
                prop_assert!(e.contains("not a list of [name, value] pairs"), "{}", e);
            }
        }
    }
}
