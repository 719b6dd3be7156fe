//! The metrics endpoint: a minimal HTTP/1.1 responder on the `metrics_listen` address. It
//! answers `GET /metrics` with the Prometheus text format, 404 for other paths and 405 for
//! other methods, then closes the connection. Requests are read with a size and time limit.
//!
//! Anyone who can reach the address can connect, so the endpoint is held to a small share of
//! flexd: at most [`MAX_CONNS`] connections at once, each also counted in flexd's descriptor
//! budget (`limits.reserved_fds`), the ones past that closed at once; and pages rendered one
//! at a time, off the async workers (the state directory's size is a walk of the disk).

use super::Shared;
use crate::metrics::Snapshot;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// Largest request head read; the rest is refused.
const MAX_HEAD: usize = 8192;
/// A client gets this long to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; a scraper needs one.
const MAX_CONNS: usize = 16;

/// Serve until `stop` turns true.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let places = Arc::new(Semaphore::new(MAX_CONNS));
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    let Ok(place) = places.clone().try_acquire_owned() else {
                        super::health::warn_limited(&format!(
                            "metrics: {MAX_CONNS} connections open; closing a new one"
                        ));
                        continue;
                    };
                    match shared.open_conn() {
                        Ok(open) => {
                            tokio::spawn(answer(stream, shared.clone(), (place, open)));
                        }
                        Err(why) => super::health::warn_limited(&format!("metrics: {why}")),
                    }
                }
                Err(e) => {
                    super::health::warn_limited(&format!("metrics: accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

/// Read one request and answer it; `_held` is the connection's place, given back at the end.
async fn answer(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    _held: (OwnedSemaphorePermit, super::OpenConn),
) {
    let mut head = Vec::with_capacity(512);
    let read = tokio::time::timeout(READ_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return;
    }
    let routed = tokio::task::spawn_blocking(move || route(&head, || page(&shared))).await;
    let Ok((status, body)) = routed else { return };
    let content_type = if status == 200 {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let reply = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The metrics page, rendered one at a time.
fn page(shared: &Shared) -> String {
    static RENDERING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = RENDERING.lock().unwrap_or_else(|e| e.into_inner());
    let snap = shared.with_core(|c| Snapshot::of(&c.state));
    let mut page = shared.metrics.render(&snap);
    let (source, gauges) = shared.gauges();
    crate::metrics::render_telemetry(&mut page, &source, &gauges);
    if let Some(state_dir) = shared.run_dir.parent() {
        let bytes = crate::metrics::dir_bytes(state_dir);
        crate::metrics::render_state_dir(&mut page, bytes);
    }
    page
}

/// The status and body for a request head; `metrics` renders the page.
fn route(head: &[u8], metrics: impl FnOnce() -> String) -> (u16, String) {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return (400, "bad request\n".into());
    };
    if !version.starts_with("HTTP/1.") {
        return (400, "bad request\n".into());
    }
    let path = target.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET", "/metrics") => (200, metrics()),
        ("GET", _) => (404, "not found: only /metrics is served\n".into()),
        _ => (405, "method not allowed\n".into()),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Method Not Allowed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let page = || "x 1\n".to_string();
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", page),
            (200, "x 1\n".into())
        );
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", page).0, 200);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n", page).0, 404);
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n", page).0, 405);
        assert_eq!(route(b"garbage\r\n\r\n", page).0, 400);
        assert_eq!(route(b"GET /metrics SPDY/3\r\n\r\n", page).0, 400);
    }
}
