//! flexd under a long queue: 100,000 pending jobs (a first job holds every leaf, so they all
//! wait), then
//!
//! 1. `QueueRows` latency for every pending and running job (what `flexq` asks for with no
//!    option), `Queue` for all of them in full (`flexq --json`), and `QueueRows` for one user's
//!    jobs (`flexq -u nobody`: 100 jobs of uid 65534 among the 100,000; when the benchmark runs
//!    as root) and for one job (`flexq -j`),
//! 2. flexd's memory (VmRSS and VmHWM from /proc/PID/status) and its mean scheduling pass
//!    over 5 s with that queue (from its metrics endpoint),
//! 3. 1,000 more submissions, one at a time on one connection and from 16 clients at once,
//!    each acknowledged only once committed;
//! 4. the flexq binary itself, `flexq -u nobody` and `flexq`, when it is built next to flexd
//!    (`cargo build --release --workspace` first).
//!
//! `cargo bench -p flexd --bench load`; FLEX_LOAD_JOBS (default 100000), FLEX_LOAD_CALLS
//! (default 200) and FLEX_LOAD_CLIENTS (default 16) change the sizes.

mod common;
use common::{connect, env_usize, metrics_addr, pass_mean, percentile, start_daemon_with, Daemon};
use flex_proto::{self as proto, JobSpec, JobState, QueueFilter, Request, Response};
use gres_plugin::Request as ResourceRequest;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const NOBODY_JOBS: usize = 100;

/// One request, one answer (not a listing: see [`listing`]).
fn call(s: &mut UnixStream, req: &Request) -> Response {
    proto::write_frame(s, req).unwrap();
    proto::read_frame(s, usize::MAX).unwrap()
}

/// A Queue or QueueRows listing, page after page, decoded as flexq does (QueueRows row by row
/// with borrowed strings, Queue into JobViews): the jobs, the pages, their bytes and the time
/// until the first page was read.
fn listing(s: &mut UnixStream, req: &Request) -> (usize, usize, usize, Duration) {
    let t0 = Instant::now();
    proto::write_frame(s, req).unwrap();
    let (mut jobs, mut pages, mut bytes, mut first) = (0, 0, 0, None);
    loop {
        let body = proto::read_body(s, usize::MAX).unwrap();
        first.get_or_insert(t0.elapsed());
        pages += 1;
        bytes += 4 + body.len();
        let next = match proto::read_queue_rows(&body, |_| jobs += 1).unwrap() {
            Some(next) => next,
            None => match serde_json::from_slice(&body).unwrap() {
                Response::Queue(flex_proto::QueuePage { jobs: v, next }) => {
                    jobs += v.len();
                    next
                }
                r => panic!("{r:?}"),
            },
        };
        if next.is_none() {
            return (jobs, pages, bytes, first.unwrap());
        }
    }
}

/// A small job as a script-driven user would send it (a short environment).
fn spec(workdir: &Path, name: &str, leaves: u32, script: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        script: script.into(),
        args: vec![],
        workdir: workdir.to_path_buf(),
        submit_dir: workdir.to_path_buf(),
        env: vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), "/root".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ]
        .into(),
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

fn submit(s: &mut UnixStream, sp: JobSpec) {
    match call(s, &Request::Submit(sp)) {
        Response::Submitted(flex_proto::SubmitReply { .. }) => {}
        r => panic!("{r:?}"),
    }
}

/// Submit `n` jobs from `clients` connections at once; returns the seconds it took.
fn submit_many(socket: &Path, workdir: &Path, n: usize, clients: usize, tag: &str) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        for c in 0..clients {
            let share = n / clients + usize::from(c < n % clients);
            scope.spawn(move || {
                let mut s = connect(socket).unwrap();
                for i in 0..share {
                    submit(
                        &mut s,
                        spec(workdir, &format!("{tag}-{c}-{i}"), 1, "#!/bin/sh\ntrue\n"),
                    );
                }
            });
        }
    });
    t0.elapsed().as_secs_f64()
}

/// Submit as uid 65534 from a forked child (the benchmark is single-threaded here).
fn submit_as_nobody(socket: &Path, workdir: &Path, n: usize) -> bool {
    if !nix::unistd::geteuid().is_root() {
        return false;
    }
    // SAFETY: no other thread runs at this point; the child only makes system calls, submits
    // and exits.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            let gid = nix::unistd::Gid::from_raw(NOBODY);
            let ok = nix::unistd::setgroups(&[gid]).is_ok()
                && nix::unistd::setgid(gid).is_ok()
                && nix::unistd::setuid(nix::unistd::Uid::from_raw(NOBODY)).is_ok();
            if ok {
                let mut s = connect(socket).unwrap();
                for i in 0..n {
                    submit(&mut s, spec(workdir, &format!("nobody-{i}"), 1, "true\n"));
                }
            }
            std::process::exit(if ok { 0 } else { 1 });
        }
        nix::unistd::ForkResult::Parent { child } => {
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            matches!(status, nix::sys::wait::WaitStatus::Exited(_, 0))
        }
    }
}

/// Time `calls` listings (Queue or QueueRows); prints p50/p99 and the answer's size.
fn queue_latency(socket: &Path, what: &str, req: &Request, calls: usize, expect: usize) {
    let mut s = connect(socket).unwrap();
    let mut ms = Vec::with_capacity(calls);
    let mut firsts = Vec::with_capacity(calls);
    let (mut pages, mut bytes) = (0, 0);
    for _ in 0..calls {
        let t0 = Instant::now();
        let (n, p, b, first) = listing(&mut s, req);
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        firsts.push(first.as_secs_f64() * 1e3);
        assert_eq!(n, expect, "{what}");
        (pages, bytes) = (p, b);
    }
    ms.sort_by(f64::total_cmp);
    firsts.sort_by(f64::total_cmp);
    println!(
        "queue {what}: {expect} jobs in {pages} pages, {:.1} MB; {calls} calls (ms): p50 {:.1}  \
         p90 {:.1}  p99 {:.1}  max {:.1}; first page read after (p50) {:.1}",
        bytes as f64 / 1e6,
        percentile(&ms, 0.5),
        percentile(&ms, 0.9),
        percentile(&ms, 0.99),
        ms[calls - 1],
        percentile(&firsts, 0.5),
    );
}

/// The flexq binary as a user runs it (a new process, the table on stdout), when it was built
/// next to flexd (`cargo build --release --workspace`).
fn flexq_latency(d: &Daemon, args: &[&str], calls: usize) {
    let flexq = Path::new(env!("CARGO_BIN_EXE_flexd")).with_file_name("flexq");
    if !flexq.exists() || calls == 0 {
        println!(
            "flexq {args:?}: not measured ({} is not built)",
            flexq.display()
        );
        return;
    }
    let mut ms = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t0 = Instant::now();
        let out = Command::new(&flexq)
            .args(args)
            .env("FLEX_SOCKET", &d.socket)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "flexq {args:?} (the binary, table to /dev/null): {calls} runs (ms): p50 {:.1}  \
         p90 {:.1}  p99 {:.1}",
        percentile(&ms, 0.5),
        percentile(&ms, 0.9),
        percentile(&ms, 0.99)
    );
}

fn memory(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    format!("VmRSS {}, VmHWM {}", field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let jobs = env_usize("FLEX_LOAD_JOBS", 100_000);
    let calls = env_usize("FLEX_LOAD_CALLS", 200);
    let clients = env_usize("FLEX_LOAD_CLIENTS", 16);
    let addr = metrics_addr();
    let d = start_daemon_with(&format!("metrics_listen = \"{addr}\"\n"));
    let work = d.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    println!("flexd idle: {}", memory(d.child.id()));

    let mut c = connect(&d.socket).unwrap();
    submit(
        &mut c,
        spec(&work, "blocker", 14, "#!/bin/sh\nexec sleep 3600\n"),
    );
    let running = QueueFilter {
        states: vec![JobState::Running],
        ..QueueFilter::default()
    };
    while !matches!(call(&mut c, &Request::Queue(running.clone())),
        Response::Queue(flex_proto::QueuePage { jobs, .. }) if jobs.len() == 1)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let nobody = submit_as_nobody(&d.socket, &work, NOBODY_JOBS);
    let secs = submit_many(&d.socket, &work, jobs, clients, "q");
    let queued = jobs + if nobody { NOBODY_JOBS } else { 0 };
    println!(
        "queued {jobs} jobs from {clients} clients in {secs:.1} s ({:.0}/s); \
         {queued} pending, 1 running",
        jobs as f64 / secs
    );
    // Let the scheduling passes over the new queue settle.
    std::thread::sleep(Duration::from_secs(2));
    println!("flexd with {queued} pending: {}", memory(d.child.id()));
    let (n, mean) = pass_mean(&addr, Duration::from_secs(5));
    println!("scheduling pass with {queued} pending: {n} passes in 5 s, mean {mean:.1} ms");

    let rows = |f: QueueFilter| Request::QueueRows(f);
    queue_latency(
        &d.socket,
        "all (flexq)",
        &rows(QueueFilter::default()),
        calls,
        queued + 1,
    );
    queue_latency(
        &d.socket,
        "all in full (flexq --json)",
        &Request::Queue(QueueFilter::default()),
        calls.min(20),
        queued + 1,
    );
    if nobody {
        queue_latency(
            &d.socket,
            "one user (flexq -u nobody)",
            &rows(QueueFilter {
                users: vec!["nobody".into()],
                ..QueueFilter::default()
            }),
            calls,
            NOBODY_JOBS,
        );
    }
    queue_latency(
        &d.socket,
        "one job (flexq -j)",
        &rows(QueueFilter {
            jobs: vec![gres_plugin::JobId(2)],
            ..QueueFilter::default()
        }),
        calls,
        1,
    );
    flexq_latency(&d, &["-u", "nobody"], calls.min(50));
    flexq_latency(&d, &[], calls.min(100));
    println!("flexd after the queries: {}", memory(d.child.id()));

    // Submissions with the long queue in place.
    let mut ms = Vec::with_capacity(1000);
    let t0 = Instant::now();
    for i in 0..1000 {
        let t = Instant::now();
        submit(&mut c, spec(&work, &format!("late-{i}"), 1, "true\n"));
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let one = t0.elapsed().as_secs_f64();
    ms.sort_by(f64::total_cmp);
    println!(
        "1000 more, one at a time: {one:.2} s; ack (ms) p50 {:.2}  p99 {:.2}  max {:.2}",
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms[999]
    );
    let many = submit_many(&d.socket, &work, 1000, clients, "late");
    println!("1000 more from {clients} clients: {many:.2} s");
    println!("flexd at the end: {}", memory(d.child.id()));
    // The blocker's supervisor outlives flexd: cancel it first.
    if let Response::Queue(flex_proto::QueuePage { jobs: v, .. }) =
        call(&mut c, &Request::Queue(running))
    {
        let jobs = v.into_iter().map(|j| j.id).collect();
        call(
            &mut c,
            &Request::Cancel(flex_proto::CancelRequest {
                jobs,
                signal: None,
                tasks: vec![],
            }),
        );
    }
    std::thread::sleep(Duration::from_millis(1500));
}
