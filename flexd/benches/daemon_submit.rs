//! flexd end to end, through its socket:
//!
//! 1. submit-to-running latency on an idle daemon: the time from just before the Submit frame
//!    is written to the job script's first command (bash's $EPOCHREALTIME, a builtin, written
//!    to a file), one job at a time;
//! 2. durable submissions per second from many concurrent clients, each waiting for its
//!    acknowledgement (sent only after the job is committed with synchronous=FULL), while a
//!    job holding every leaf keeps them all pending (so the queue grows and scheduling passes
//!    run over it as they would in production).
//!
//! `cargo bench -p flexd --bench daemon_submit`; FLEX_BENCH_LATENCY_N (default 200, 0 skips
//! it), FLEX_BENCH_CLIENTS (default 64) and FLEX_BENCH_JOBS (default 60000) change the sizes;
//! FLEX_LOG is passed to flexd, whose log goes to FLEX_BENCH_DAEMON_LOG when set.

mod common;
use common::{connect, env_usize, percentile, start_daemon};
use flex_proto::{self as proto, JobSpec, JobState, QueueFilter, Request, Response};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn call(s: &mut UnixStream, req: &Request) -> Response {
    proto::write_frame(s, req).unwrap();
    proto::read_frame(s, 1 << 30).unwrap()
}

fn spec(script: String, workdir: &Path, leaves: u32) -> JobSpec {
    JobSpec {
        name: "bench".into(),
        script,
        args: vec![],
        workdir: workdir.to_path_buf(),
        submit_dir: workdir.to_path_buf(),
        // What flexsub sends: the submitter's whole environment.
        env: std::env::vars().collect(),
        stdout: Some("/dev/null".into()),
        stderr: None,
        request: ResourceRequest::leaves(leaves, 3600),
        account: None,
        qos: None,
        nice: 0,
        options: Default::default(),
        queue: Default::default(),
        umask: None,
        signal: None,
    }
}

fn job_state(s: &mut UnixStream, job: JobId) -> Option<JobState> {
    let f = QueueFilter {
        jobs: vec![job],
        include_finished: true,
        ..QueueFilter::default()
    };
    match call(s, &Request::Queue(f)) {
        Response::Queue(flex_proto::QueuePage { jobs, .. }) => jobs.first().map(|j| j.state),
        r => panic!("{r:?}"),
    }
}

fn latency(n: usize) {
    let d = start_daemon();
    let work = tempfile::tempdir().unwrap();
    let mut c = connect(&d.socket).unwrap();
    let mut lat = Vec::with_capacity(n);
    let mut ack = Vec::with_capacity(n);
    for i in 0..n {
        let stamp = work.path().join(format!("t{i}"));
        let script = format!(
            "#!/bin/bash\necho $EPOCHREALTIME > {}.tmp && mv {0}.tmp {0}\n",
            stamp.display()
        );
        let mut sp = spec(script, work.path(), 1);
        sp.env = std::env::vars()
            .chain([("LC_ALL".into(), "C".into())])
            .collect();
        let t0 = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let job = match call(&mut c, &Request::Submit(sp)) {
            Response::Submitted(flex_proto::SubmitReply { job, .. }) => job,
            r => panic!("{r:?}"),
        };
        let t_ack = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let t1: f64 = loop {
            if let Ok(text) = std::fs::read_to_string(&stamp) {
                break text.trim().parse().unwrap();
            }
            std::thread::sleep(Duration::from_micros(100));
        };
        lat.push((t1 - t0.as_secs_f64()) * 1e3);
        ack.push((t_ack - t0).as_secs_f64() * 1e3);
        // Idle again before the next one.
        while job_state(&mut c, job).is_some_and(|s| !s.is_finished()) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    lat.sort_by(f64::total_cmp);
    ack.sort_by(f64::total_cmp);
    println!(
        "latency: {n} jobs one at a time; submit -> first command of the job script (ms): \
         p50 {:.2}  p90 {:.2}  p99 {:.2}  min {:.2}  max {:.2}",
        percentile(&lat, 0.5),
        percentile(&lat, 0.9),
        percentile(&lat, 0.99),
        lat[0],
        lat[n - 1]
    );
    println!(
        "latency: submit -> acknowledgement (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}",
        percentile(&ack, 0.5),
        percentile(&ack, 0.9),
        percentile(&ack, 0.99)
    );
}

fn throughput(clients: usize, total: usize) {
    let d = start_daemon();
    let work = tempfile::tempdir().unwrap();
    let mut c = connect(&d.socket).unwrap();
    let blocker = match call(
        &mut c,
        &Request::Submit(spec("#!/bin/sh\nexec sleep 3600\n".into(), work.path(), 14)),
    ) {
        Response::Submitted(flex_proto::SubmitReply { job, .. }) => job,
        r => panic!("{r:?}"),
    };
    while job_state(&mut c, blocker) != Some(JobState::Running) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let frame = proto::encode(&Request::Submit(spec(
        "#!/bin/sh\necho never runs\n".into(),
        work.path(),
        1,
    )));
    let per = total / clients;
    let start = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let socket = d.socket.clone();
            let frame = frame.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let mut s = connect(&socket).unwrap();
                let mut ids = Vec::with_capacity(per);
                start.wait();
                for _ in 0..per {
                    s.write_all(&frame).unwrap();
                    match proto::read_frame::<Response>(&mut s, 1 << 20).unwrap() {
                        Response::Submitted(flex_proto::SubmitReply { job, .. }) => ids.push(job),
                        r => panic!("{r:?}"),
                    }
                }
                ids
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let ids: Vec<JobId> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let took = t0.elapsed();
    println!(
        "throughput: {} durable submissions ({} bytes each) from {clients} clients in {:.2} s: \
         {:.0} per second",
        ids.len(),
        frame.len(),
        took.as_secs_f64(),
        ids.len() as f64 / took.as_secs_f64()
    );
    let mut all = ids;
    all.push(blocker);
    call(
        &mut c,
        &Request::Cancel(flex_proto::CancelRequest {
            jobs: all,
            signal: None,
            tasks: vec![],
        }),
    );
    while job_state(&mut c, blocker).is_some_and(|s| !s.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    println!(
        "machine: {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let n = env_usize("FLEX_BENCH_LATENCY_N", 200);
    if n > 0 {
        latency(n);
    }
    throughput(
        env_usize("FLEX_BENCH_CLIENTS", 64),
        env_usize("FLEX_BENCH_JOBS", 60_000),
    );
}
