//! Protocol version 2 as it went over the socket: one sample of every message, kept as
//! frames in `tests/fixtures/proto-v2/`. Everything in the compatibility tests that names a
//! protocol type is in this file (the protocol may move to a crate of its own).
//!
//! The files were written once by [`write_missing_frames`] and are never regenerated: a change
//! to the decoder that cannot read them any more fails `protocol_v2_frames_decode`. When a
//! variant is added to version 2 (additive), the exhaustive `match`es below stop compiling;
//! add a sample and run the writer, which writes only the missing files. A new protocol
//! version gets a directory of its own and its own copy of this file.

use flex_proto::{
    self as proto, AcctHost, AcctLeaf, AcctQuery, AcctRecord, AcctReply, AllocView, CancelOutcome,
    ErrorKind, ErrorReply, Hello, HostLeaves, JobSpec, JobState, JobView, LeafMapEntry, LeafView,
    QueueFilter, QueueRow, QueueRows, Request, Response, WouldStart,
};
use gres_plugin::request::Strategy;
use gres_plugin::{JobId, Request as ResourceRequest};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// The protocol version of these frames.
pub const VERSION: u32 = 2;

pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/proto-v2")
}

/// One message of the protocol, any direction. (A handful of samples: their sizes do not matter.)
#[derive(Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Msg {
    Hello(Hello),
    Request(Request),
    Response(Response),
}

/// The file a message's frame is kept in; exhaustive, so a new variant must be named here.
fn file_name(m: &Msg) -> &'static str {
    match m {
        Msg::Hello(_) => "hello.bin",
        Msg::Request(r) => match r {
            Request::Submit(_) => "request-submit.bin",
            Request::TestOnly(_) => "request-test-only.bin",
            Request::Queue(_) => "request-queue.bin",
            Request::QueueRows(_) => "request-queue-rows.bin",
            Request::Cancel(flex_proto::CancelRequest { .. }) => "request-cancel.bin",
            Request::LeafMap => "request-leaf-map.bin",
            Request::Ping => "request-ping.bin",
            Request::JobEnded(flex_proto::JobEndedRequest { .. }) => "request-job-ended.bin",
            Request::Accounting(_) => "request-accounting.bin",
            Request::Priority(_) => "request-priority.bin",
            Request::Shares(_) => "request-shares.bin",
            Request::Control(_) => "request-control.bin",
            Request::Config => "request-config.bin",
        },
        Msg::Response(r) => match r {
            Response::Hello(flex_proto::HelloReply { .. }) => "response-hello.bin",
            Response::Submitted(flex_proto::SubmitReply { .. }) => "response-submitted.bin",
            Response::WouldStart(_) => "response-would-start.bin",
            Response::Queue(flex_proto::QueuePage { .. }) => "response-queue.bin",
            Response::QueueRows(flex_proto::RowsPage { .. }) => "response-queue-rows.bin",
            Response::Cancelled(_) => "response-cancelled.bin",
            Response::LeafMap(_) => "response-leaf-map.bin",
            Response::Pong => "response-pong.bin",
            Response::Error(_) => "response-error.bin",
            Response::Accounting(_) => "response-accounting.bin",
            Response::Priority(_) => "response-priority.bin",
            Response::Shares(_) => "response-shares.bin",
            Response::Controlled(_) => "response-controlled.bin",
            Response::Config(_) => "response-config.bin",
        },
    }
}

fn spec() -> JobSpec {
    JobSpec {
        name: "train-resnet".into(),
        script: "#!/bin/bash\n#SBATCH --gres=gpu:1g.10gb:2\nflexrun python train.py --epochs 3\n"
            .into(),
        args: vec!["--lr".into(), "0.01".into()],
        workdir: "/home/ann/runs/resnet".into(),
        submit_dir: "/home/ann".into(),
        env: vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), "/home/ann".into()),
            ("NOTE".into(), "quote \" and tab\t and é".into()),
        ]
        .into(),
        stdout: Some("out-%j.log".into()),
        stderr: Some("err-%x-%u.log".into()),
        request: ResourceRequest {
            leaves: Some(2),
            leaf_type: Some("1g.10gb".into()),
            gpus: None,
            mem_bytes: None,
            cores_per_leaf: 4,
            time_limit_s: 7200,
            placement: None,
            ..Default::default()
        },
        account: Some("vision".into()),
        qos: None,
        nice: 0,
        options: Default::default(),
        queue: Default::default(),
        umask: None,
        signal: None,
    }
}

fn fraction() -> ResourceRequest {
    ResourceRequest {
        leaves: None,
        leaf_type: None,
        gpus: Some(0.25),
        mem_bytes: Some(8 << 30),
        cores_per_leaf: 2,
        time_limit_s: 3600,
        placement: Some(Strategy::BalanceLoad),
        ..Default::default()
    }
}

fn leaf(uuid: &str, profile: &str, gpu: u32, share: u32) -> LeafView {
    LeafView {
        uuid: uuid.into(),
        profile: profile.into(),
        gpu,
        share,
    }
}

fn alloc() -> AllocView {
    AllocView {
        host: "a100-testbed".into(),
        leaves: vec![
            leaf(
                "MIG-12e0af34-4d4f-5f39-aa01-96504fd7c722",
                "1g.10gb",
                0,
                1000,
            ),
            leaf(
                "MIG-7c1d0e55-0b2a-5e8f-9d41-2f6a3c8b1e90",
                "1g.10gb",
                1,
                1000,
            ),
        ],
        cores: vec![0, 1, 2, 3, 16, 17, 18, 19],
        mem_bytes: 0,
    }
}

fn row(
    id: u64,
    name: &'static str,
    state: JobState,
    reason: Option<&'static str>,
) -> QueueRow<'static> {
    QueueRow {
        id: JobId(id),
        name: Cow::Borrowed(name),
        user: Cow::Borrowed("ann"),
        state,
        elapsed_s: if state == JobState::Running { 125 } else { 0 },
        time_limit_s: 7200,
        units: Cow::Borrowed("2"),
        start: Some(1_795_512_600),
        host: (state == JobState::Running).then_some(Cow::Borrowed("a100-testbed")),
        reason: reason.map(Cow::Borrowed),
        array: None,
    }
}

/// The rows in the `QueueRows` sample.
pub fn sample_rows() -> Vec<QueueRow<'static>> {
    vec![
        row(41, "train-resnet", JobState::Running, None),
        row(42, "say \"hi\"", JobState::Pending, Some("Resources")),
    ]
}

/// One message of each kind, with realistic values.
pub fn samples() -> Vec<Msg> {
    let running = JobView {
        id: JobId(41),
        name: "train-resnet".into(),
        user: "ann".into(),
        uid: 1000,
        account: "vision".into(),
        state: JobState::Running,
        submit_time: 1_795_512_500,
        start_time: Some(1_795_512_600),
        end_time: None,
        request: spec().request,
        alloc: Some(alloc()),
        reason: None,
        estimated_start: None,
        exit_code: None,
        signal: None,
        array: None,
        dependency: None,
        restarts: 0,
        requeue: false,
        priority: 0,
        nice: 0,
        qos: None,
        comment: None,
        // Later than the frames: left out of them, read back as none.
        pending_tasks: None,
        details: None,
    };
    let ended = JobView {
        id: JobId(40),
        name: "eval".into(),
        state: JobState::Timeout,
        end_time: Some(1_795_512_590),
        request: fraction(),
        alloc: None,
        reason: Some("time limit".into()),
        estimated_start: Some(1_795_512_400),
        signal: Some(15),
        exit_code: None,
        ..running.clone()
    };
    let record = AcctRecord {
        id: JobId(41),
        name: "train-resnet".into(),
        user: "ann".into(),
        uid: 1000,
        gid: 1000,
        account: "vision".into(),
        state: JobState::Completed,
        submit_time: 1_795_512_500,
        eligible_time: 1_795_512_500,
        start_time: Some(1_795_512_600),
        end_time: Some(1_795_516_200),
        exit_code: Some(0),
        signal: None,
        reason: None,
        request: spec().request,
        host: Some("a100-testbed".into()),
        leaves: vec![AcctLeaf {
            uuid: "MIG-12e0af34-4d4f-5f39-aa01-96504fd7c722".into(),
            profile: "1g.10gb".into(),
            gpu: 0,
            share: 1000,
            sm_slices: 1,
            memory_bytes: Some(10_334_765_056),
        }],
        cores: vec![0, 1, 2, 3],
        mem_bytes: 0,
        array: None,
        restarts: 0,
        max_rss: None,
        cpu_usec: None,
        gpu_usage: None,
        comment: None,
    };
    let filter = QueueFilter {
        users: vec!["ann".into()],
        states: vec![JobState::Pending, JobState::Running],
        jobs: vec![JobId(41), JobId(42)],
        include_finished: true,
        after: Some(JobId(40)),
        arrays: None,
        details: false,
    };
    vec![
        Msg::Hello(Hello {
            version: VERSION,
            client: "flexsub".into(),
        }),
        Msg::Request(Request::Submit(spec())),
        Msg::Request(Request::TestOnly(JobSpec {
            request: fraction(),
            account: None,
            qos: None,
            nice: 0,
            options: Default::default(),
            umask: None,
            signal: None,
            stdout: None,
            stderr: None,
            ..spec()
        })),
        Msg::Request(Request::Queue(filter.clone())),
        Msg::Request(Request::QueueRows(QueueFilter {
            users: Vec::new(),
            after: None,
            ..filter
        })),
        Msg::Request(Request::Cancel(flex_proto::CancelRequest {
            jobs: vec![JobId(41), JobId(42)],
            signal: Some(10),
            tasks: vec![],
        })),
        Msg::Request(Request::LeafMap),
        Msg::Request(Request::Ping),
        Msg::Request(Request::JobEnded(flex_proto::JobEndedRequest {
            job: JobId(41),
            status: None,
        })),
        Msg::Request(Request::Config),
        Msg::Request(Request::Control(flex_proto::ControlRequest {
            action: flex_proto::ControlAction::Update(vec![("TimeLimit".into(), "600".into())]),
            jobs: vec![flex_proto::JobRef::parse("41_[1-3]").expect("a job reference")],
        })),
        Msg::Request(Request::Accounting(AcctQuery {
            start: 1_795_420_800,
            end: 1_795_507_200,
            users: vec!["ann".into(), "1001".into()],
            accounts: vec!["vision".into()],
            states: vec![JobState::Completed, JobState::NodeFail],
            jobs: vec![JobId(41)],
            after: Some(JobId(7)),
        })),
        Msg::Response(Response::Hello(flex_proto::HelloReply {
            version: VERSION,
            server: "flexd 0.1.0".into(),
        })),
        Msg::Response(Response::Submitted(flex_proto::SubmitReply {
            job: JobId(42),
            warnings: Vec::new(),
        })),
        Msg::Response(Response::WouldStart(Box::new(WouldStart {
            alloc: Some(alloc()),
            estimated_start: Some(1_795_516_200),
            reason: Some("Resources".into()),
            warnings: Vec::new(),
        }))),
        Msg::Response(Response::Queue(flex_proto::QueuePage {
            jobs: vec![ended, running],
            next: Some(JobId(41)),
        })),
        Msg::Response(Response::QueueRows(flex_proto::RowsPage {
            rows: QueueRows::new(sample_rows().into_iter()),
            next: None,
        })),
        Msg::Response(Response::Cancelled(vec![
            CancelOutcome {
                job: JobId(41),
                error: None,
            },
            CancelOutcome {
                job: JobId(42),
                error: Some("job 42 belongs to bob".into()),
            },
        ])),
        Msg::Response(Response::LeafMap(vec![HostLeaves {
            host: "a100-testbed".into(),
            leaves: vec![
                LeafMapEntry {
                    uuid: "MIG-12e0af34-4d4f-5f39-aa01-96504fd7c722".into(),
                    profile: "1g.10gb".into(),
                    gpu: 0,
                    gpu_name: "NVIDIA A100-PCIE-40GB".into(),
                    numa_node: 0,
                    free: 0,
                    jobs: vec![JobId(41)],
                },
                LeafMapEntry {
                    uuid: "MIG-3b9f2c41-6a7e-5d10-8c2b-4e5f6a7b8c9d".into(),
                    profile: "1g.5gb".into(),
                    gpu: 1,
                    gpu_name: "NVIDIA A100-PCIE-40GB".into(),
                    numa_node: 1,
                    free: 750,
                    jobs: vec![JobId(43)],
                },
            ],
        }])),
        Msg::Response(Response::Controlled(vec![flex_proto::ControlOutcome {
            job: "41_2".into(),
            error: Some("permission denied: job 41_2 belongs to ann".into()),
        }])),
        Msg::Response(Response::Config(vec![
            ("default_mem_per_cpu".into(), "auto".into()),
            (
                "cgroup_memory".into(),
                "on cgroup v1 below /sys/fs/cgroup/memory/flex".into(),
            ),
        ])),
        Msg::Response(Response::Pong),
        Msg::Response(Response::Error(ErrorReply {
            kind: ErrorKind::VersionMismatch,
            message: "protocol version 1 is not this flexd's 2".into(),
        })),
        Msg::Response(Response::Accounting(AcctReply {
            now: 1_795_520_000,
            hosts: vec![AcctHost {
                host: "a100-testbed".into(),
                gpus: 2,
                leaves: 14,
                cores: 32,
            }],
            jobs: vec![record],
            more: true,
        })),
        Msg::Request(Request::Priority(flex_proto::PrioQuery {
            users: vec!["ann".into()],
            jobs: vec![JobId(42)],
        })),
        Msg::Request(Request::Shares(flex_proto::ShareQuery {
            users: vec!["ann".into()],
        })),
        Msg::Response(Response::Priority(flex_proto::PrioReply {
            weights: flex_proto::PrioWeights {
                age: 1000,
                fairshare: 10000,
                job_size: 0,
                qos: 10000,
            },
            jobs: vec![flex_proto::PrioRow {
                job: JobId(42),
                user: "ann".into(),
                account: "vision".into(),
                qos: "normal".into(),
                priority: 5500,
                age: 500.0,
                fairshare: 5000.0,
                job_size: 0.0,
                qos_part: 0.0,
                nice: 0,
            }],
        })),
        Msg::Response(Response::Shares(vec![flex_proto::ShareRow {
            account: String::new(),
            user: Some("ann".into()),
            raw_shares: 1,
            norm_shares: 0.5,
            raw_usage: 2.5,
            effective_usage: 0.25,
            fairshare: 0.625,
        }])),
    ]
}

fn encode(m: &Msg) -> Vec<u8> {
    match m {
        Msg::Hello(h) => proto::encode(h),
        Msg::Request(r) => proto::encode(r),
        Msg::Response(r) => proto::encode(r),
    }
}

/// Decode a kept frame as the kind of message `like` is, with today's decoder; the frame
/// must be whole and nothing may follow it.
fn decode(bytes: &[u8], like: &Msg) -> Result<Msg, String> {
    fn whole<T>(
        bytes: &[u8],
        decoded: Result<Option<(T, usize)>, proto::FrameError>,
    ) -> Result<T, String> {
        match decoded {
            Ok(Some((m, used))) if used == bytes.len() => Ok(m),
            Ok(Some((_, used))) => Err(format!("{} bytes after the frame", bytes.len() - used)),
            Ok(None) => Err("not a whole frame".into()),
            Err(e) => Err(e.to_string()),
        }
    }
    let max = proto::DEFAULT_MAX_FRAME;
    Ok(match like {
        Msg::Hello(_) => Msg::Hello(whole(bytes, proto::decode(bytes, max))?),
        Msg::Request(_) => Msg::Request(whole(bytes, proto::decode(bytes, max))?),
        Msg::Response(_) => Msg::Response(whole(bytes, proto::decode(bytes, max))?),
    })
}

/// Every kept frame decodes to its sample; returns the files checked.
pub fn check_frames() -> Vec<String> {
    let dir = dir();
    let mut checked = Vec::new();
    for m in samples() {
        let name = file_name(&m);
        let path = dir.join(name);
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (a v2 message without a frame)", path.display()));
        let len = u32::from_be_bytes(bytes[..4].try_into().expect("a 4-byte header")) as usize;
        assert_eq!(len + 4, bytes.len(), "{name}: the header's length");
        let back = decode(&bytes, &m).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            back, m,
            "{name} decodes to other values than it was written with"
        );
        // flexq reads rows straight from the frame body, not through Response.
        if let Msg::Response(Response::QueueRows(flex_proto::RowsPage { .. })) = &m {
            let mut rows = Vec::new();
            let next = proto::read_queue_rows(&bytes[4..], |r| rows.push(r.clone()))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(next, Some(None), "{name}: the last page");
            assert_eq!(rows, sample_rows(), "{name}: rows");
        }
        checked.push(name.to_string());
    }
    checked
}

/// The frame of every sample that has none yet; returns the files written. Never rewrites a
/// file: the frames are what protocol v2 was, whatever today's encoder makes.
pub fn write_missing_frames() -> Vec<String> {
    assert_eq!(
        proto::PROTOCOL_VERSION,
        VERSION,
        "today's protocol is not v2: copy this file for the new version instead"
    );
    let dir = dir();
    std::fs::create_dir_all(&dir).expect("create the frame directory");
    let mut written = Vec::new();
    for m in samples() {
        let path = dir.join(file_name(&m));
        if !path.exists() {
            std::fs::write(&path, encode(&m)).expect("write a frame");
            written.push(file_name(&m).to_string());
        }
    }
    written
}
