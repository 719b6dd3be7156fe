//! Job arrays in the real flexd: how long one submission of a 10,000-task array takes to be
//! acknowledged (all tasks committed in one transaction), and how long a scheduling pass takes
//! with 100,000 pending tasks of one array behind a job that holds every leaf (flexd's own
//! pass histogram, read from its metrics endpoint, over the passes of a few seconds).
//!
//! Then, on a second flexd with every leaf free, how long the first 300 tasks of an array take
//! to run when its 50,000 indices are listed one by one (`0,3,6,…`, a 1.9 MB spec) and when
//! they are one range, side by side: what a task's start pays for its array's spec.
//!
//! `cargo bench -p flexd --bench arrays`; FLEX_ARRAY_TASKS (default 10000),
//! FLEX_ARRAY_PENDING (default 100000) and FLEX_ARRAY_LISTED (default 50000) change the sizes.

mod common;
use common::{connect, env_usize, metrics_addr, pass_mean, percentile, start_daemon_with};
use flex_proto::{self as proto, ArraySpec, JobSpec, QueueOptions, Request, Response};
use gres_plugin::Request as ResourceRequest;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn call(s: &mut UnixStream, req: &Request) -> Response {
    proto::write_frame(s, req).unwrap();
    proto::read_frame(s, usize::MAX).unwrap()
}

fn spec(workdir: &Path, leaves: u32, array: Option<&str>) -> JobSpec {
    JobSpec {
        name: "bench".into(),
        script: "#!/bin/sh\nsleep 3600\n".into(),
        args: vec![],
        workdir: workdir.to_path_buf(),
        submit_dir: workdir.to_path_buf(),
        env: vec![("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
        stdout: Some("/dev/null".into()),
        stderr: None,
        request: ResourceRequest::leaves(leaves, 3600),
        account: None,
        queue: Box::new(QueueOptions {
            array: array.map(|a| ArraySpec::parse(a).unwrap()),
            ..QueueOptions::default()
        }),
        umask: None,
        signal: None,
        qos: None,
        nice: 0,
        options: Default::default(),
    }
}

fn main() {
    let tasks = env_usize("FLEX_ARRAY_TASKS", 10_000);
    let pending = env_usize("FLEX_ARRAY_PENDING", 100_000);
    let addr = metrics_addr();
    let d = start_daemon_with(&format!("metrics_listen = \"{addr}\"\n"));
    let mut c = connect(&d.socket).unwrap();
    let work = d.dir.path();
    // Every leaf busy: the arrays stay pending.
    assert!(matches!(
        call(&mut c, &Request::Submit(spec(work, 14, None))),
        Response::Submitted(_)
    ));
    let mut took = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let r = call(
            &mut c,
            &Request::Submit(spec(work, 1, Some(&format!("0-{}", tasks - 1)))),
        );
        took.push(t0.elapsed().as_secs_f64() * 1e3);
        assert!(matches!(r, Response::Submitted(_)), "{r:?}");
    }
    took.sort_by(f64::total_cmp);
    println!(
        "submit one {tasks}-task array (acknowledged once committed): median {:.1} ms, \
         min {:.1} ms, max {:.1} ms (5 runs)",
        percentile(&took, 0.5),
        took[0],
        took[4]
    );
    report_passes(&addr, 5 * tasks, 5);
    // One array of `pending` tasks besides (5 × tasks already wait).
    let t0 = Instant::now();
    let r = call(
        &mut c,
        &Request::Submit(spec(work, 1, Some(&format!("0-{}", pending - 1)))),
    );
    assert!(matches!(r, Response::Submitted(_)), "{r:?}");
    println!(
        "submit one {pending}-task array: {:.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    report_passes(&addr, 5 * tasks + pending, 6);
    drop(c);
    drop(d);
    starts_of_listed_and_ranged_arrays(env_usize("FLEX_ARRAY_LISTED", 50_000));
}

/// The first 300 tasks of an array of `n` indices run, listed one by one and as one range.
fn starts_of_listed_and_ranged_arrays(n: usize) {
    let d = start_daemon_with("");
    let mut c = connect(&d.socket).unwrap();
    let work = d.dir.path();
    let listed: Vec<String> = (0..n).map(|i| (i * 3).to_string()).collect();
    for (what, array) in [
        ("listed one by one", listed.join(",")),
        ("as one range", format!("0-{}:3", (n - 1) * 3)),
    ] {
        let mut s = spec(work, 1, Some(&array));
        s.script = "#!/bin/sh\ntrue\n".into();
        let t0 = Instant::now();
        let Response::Submitted(proto::SubmitReply { job: first, .. }) =
            call(&mut c, &Request::Submit(s))
        else {
            panic!("not submitted")
        };
        let acked = t0.elapsed().as_secs_f64();
        let last = proto::JobId(first.0 + 299);
        loop {
            let filter = proto::QueueFilter {
                jobs: vec![last],
                include_finished: true,
                ..Default::default()
            };
            if let Response::Queue(p) = call(&mut c, &Request::Queue(filter)) {
                if p.jobs.iter().any(|j| j.state.is_finished()) {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        println!(
            "the first 300 tasks of an array of {n} indices {what}: {:.2} s \
             (submission acknowledged after {acked:.2} s)",
            t0.elapsed().as_secs_f64()
        );
        let cancel = proto::CancelRequest {
            jobs: vec![first],
            signal: None,
            tasks: vec![],
        };
        call(&mut c, &Request::Cancel(cancel));
    }
}

/// flexd's mean pass time over 6 s, once the last submission has been seen by a pass.
fn report_passes(addr: &str, pending: usize, arrays: usize) {
    std::thread::sleep(Duration::from_secs(2));
    let (n, mean) = pass_mean(addr, Duration::from_secs(6));
    println!(
        "scheduling pass with {pending} pending tasks ({arrays} arrays): {n} passes in 6 s, \
         mean {mean:.3} ms"
    );
}
