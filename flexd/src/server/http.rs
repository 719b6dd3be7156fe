//! The metrics endpoint: a minimal HTTP/1.1 responder on the `metrics_listen` address. It
//! answers `GET /metrics` with the Prometheus text format, 404 for other paths and 405 for
//! other methods, then closes the connection. Requests are read with a size and time limit.

use super::Shared;
use crate::metrics::Snapshot;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Largest request head read; the rest is refused.
const MAX_HEAD: usize = 8192;
/// A client gets this long to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serve until `stop` turns true.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream, shared.clone()));
                }
                Err(e) => {
                    tracing::warn!("metrics: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

async fn answer(mut stream: TcpStream, shared: Arc<Shared>) {
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
    let (status, body) = route(&head, || {
        let snap = shared.with_core(|c| Snapshot::of(&c.state));
        let mut page = shared.metrics.render(&snap);
        let (source, gauges) = shared.gauges();
        crate::metrics::render_telemetry(&mut page, &source, &gauges);
        if let Some(state_dir) = shared.run_dir.parent() {
            let bytes = crate::metrics::dir_bytes(state_dir);
            crate::metrics::render_state_dir(&mut page, bytes);
        }
        page
    });
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
