//! The budget for requests still arriving (`max_buffered_bytes`, issue 27) against clients
//! that announce large frames and send nothing more: it is charged for the bytes a client has
//! sent, not for the size its header announces, and a frame's body must arrive within
//! `frame_timeout` of its first byte. Real sockets against the real flexd.

use flex_proto::{self as proto, Response};
use flex_tests::{script_job, Daemon};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const A100: &str = "a100-40gb-x2.toml";

/// The header of a frame of the largest size flexd takes (`max_frame_bytes`, 16 MiB, header
/// included), and nothing after it.
fn header_only() -> [u8; 4] {
    ((16u32 << 20) - 4).to_be_bytes()
}

#[test]
fn frame_headers_alone_keep_no_submission_out() {
    // The default budget (256 MiB) is 16 such frames; frames must arrive within 3 s.
    let d = Daemon::start_with(A100, "[limits]\nframe_timeout = \"3s\"");
    let stop = Arc::new(AtomicBool::new(false));
    let closed = Arc::new(AtomicUsize::new(0));
    // 16 clients each send one header, and connect again as soon as flexd closes them.
    let senders: Vec<_> = (0..16)
        .map(|_| {
            let (socket, stop, closed) = (d.socket(), stop.clone(), closed.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(mut s) = UnixStream::connect(&socket) else {
                        continue;
                    };
                    if s.write_all(&header_only()).is_err() {
                        continue;
                    }
                    s.set_read_timeout(Some(Duration::from_millis(200)))
                        .unwrap();
                    let mut sink = Vec::new();
                    loop {
                        match s.read_to_end(&mut sink) {
                            Ok(_) => break,
                            Err(_) if stop.load(Ordering::SeqCst) => return,
                            Err(_) => {}
                        }
                    }
                    closed.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));

    // A submission with a 100 KiB script is taken while they hold their headers, and again
    // after flexd has closed them at frame_timeout and they have come back.
    let dir = d.scratch("budget");
    let script = format!("#!/bin/sh\n{}true\n", "# padding\n".repeat(10 << 10));
    let mut spec = script_job(&script, &dir);
    spec.queue.hold = true;
    let first = d.client().submit(spec.clone());
    flex_tests::wait_for("flexd to close the headers at frame_timeout", || {
        (closed.load(Ordering::SeqCst) >= 16).then_some(())
    });
    std::thread::sleep(Duration::from_secs(1));
    let second = d.client().submit(spec);
    stop.store(true, Ordering::SeqCst);
    for s in senders {
        s.join().unwrap();
    }
    let first = first.unwrap_or_else(|e| panic!("{e}\n{}", d.log()));
    let second = second.unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(first, second);

    // A header alone is answered why at frame_timeout, and closed.
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.write_all(&header_only()).unwrap();
    s.set_read_timeout(Some(flex_tests::WAIT)).unwrap();
    let r: Response = proto::read_frame(&mut s, 1 << 20).unwrap();
    let Response::Error(e) = r else {
        panic!("{r:?}")
    };
    assert!(
        e.message
            .contains("did not arrive whole within frame_timeout = 3s"),
        "{}",
        e.message
    );
}
