//! What the daemon benchmarks share: a real flexd on a temporary socket and state directory,
//! a handshaken connection, percentiles. Each benchmark uses part of it.
#![allow(dead_code)]

use flex_proto::{self as proto, Hello, Response};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// flexd on the a100 testbed; stopped with SIGTERM when dropped.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// Start flexd (log to FLEX_BENCH_DAEMON_LOG, else into its directory; FLEX_LOG passed on; on
/// the topology FLEX_BENCH_TOPOLOGY, else a100-40gb-x2.toml; FLEX_BENCH_FLEXD_TOML: more lines
/// of flexd.toml, such as a telemetry_period) and
/// wait for its socket.
pub fn start_daemon() -> Daemon {
    start_daemon_with("")
}

/// Like [`start_daemon`], with more lines of flexd.toml before the benchmarks' own.
pub fn start_daemon_with(config_lines: &str) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    // Other users' jobs need to reach the working directory.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let config = dir.path().join("flexd.toml");
    std::fs::write(
        &config,
        // One user plays every client: its queue and connection caps are lifted.
        format!(
            "{config_lines}{}kill_grace = \"1s\"\n[limits]\nmax_queued_per_user = 10000000\n\
             max_connections_per_user = 100000\n",
            std::env::var("FLEX_BENCH_FLEXD_TOML").map_or(String::new(), |t| t + "\n")
        ),
    )
    .unwrap();
    let socket = dir.path().join("flexd.sock");
    let log_path = std::env::var_os("FLEX_BENCH_DAEMON_LOG")
        .map_or_else(|| dir.path().join("flexd.log"), PathBuf::from);
    let log = std::fs::File::create(log_path).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_flexd"))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--topology")
        .arg(std::env::var_os("FLEX_BENCH_TOPOLOGY").unwrap_or_else(|| "a100-40gb-x2.toml".into()))
        .arg("--force-topology")
        .env(
            "FLEX_LOG",
            std::env::var("FLEX_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "flexd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, socket, dir }
}

/// A connection past the handshake.
pub fn connect(socket: &Path) -> std::io::Result<UnixStream> {
    let mut s = UnixStream::connect(socket)?;
    proto::write_frame(
        &mut s,
        &Hello {
            version: proto::PROTOCOL_VERSION,
            client: "bench".into(),
        },
    )
    .map_err(std::io::Error::other)?;
    match proto::read_frame::<Response>(&mut s, proto::DEFAULT_MAX_FRAME) {
        Ok(Response::Hello(flex_proto::HelloReply { .. })) => Ok(s),
        other => Err(std::io::Error::other(format!("{other:?}"))),
    }
}

/// The `p` quantile (0..1) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A loopback address for flexd's metrics endpoint, private to this benchmark process.
pub fn metrics_addr() -> String {
    format!("127.0.0.1:{}", 20_000 + std::process::id() % 20_000)
}

/// The pass histogram's (sum in seconds, count) from flexd's metrics endpoint.
fn passes(addr: &str) -> (f64, u64) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let value = |name: &str| {
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        value("flex_sched_pass_seconds_sum "),
        value("flex_sched_pass_seconds_count ") as u64,
    )
}

/// The scheduling passes flexd ran over the next `over`, and their mean time in ms.
pub fn pass_mean(addr: &str, over: Duration) -> (u64, f64) {
    let (s0, n0) = passes(addr);
    std::thread::sleep(over);
    let (s1, n1) = passes(addr);
    let n = n1 - n0;
    (
        n,
        if n == 0 {
            0.0
        } else {
            (s1 - s0) / n as f64 * 1e3
        },
    )
}
