//! One connection: its peer from SO_PEERCRED, the Hello, then frames read (`proto::decode`)
//! and answered one at a time through the dispatcher; frames that cannot be read are answered
//! with why, and the connection closed.

use super::dispatch::dispatch;
use super::handlers::{queue, Peer};
use super::Shared;
use flex_proto::{self as proto, ErrorKind, FrameError, Hello, Request, Response};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Serve one connection until the client closes it, is idle for `idle_timeout`, or takes
/// longer than `frame_timeout` to send a frame.
pub(crate) async fn serve(shared: Arc<Shared>, stream: UnixStream, _open: super::OpenConn) {
    let peer = match stream.peer_cred() {
        Ok(c) => Peer {
            uid: c.uid(),
            gid: c.gid(),
            pid: c.pid(),
            user: shared.user_name(c.uid()),
        },
        Err(e) => {
            tracing::warn!("connection without peer credentials refused: {e}");
            return;
        }
    };
    let (mut rd, mut wr) = stream.into_split();
    let _slot = match shared.conn_slot(peer.uid, &peer.user) {
        Ok(s) => s,
        Err(why) => {
            super::health::warn_limited(&format!("connection refused: {why}"));
            let _ = write(&mut wr, &Response::error(ErrorKind::LimitExceeded, why)).await;
            return;
        }
    };
    let mut buf = Vec::with_capacity(8192);
    if !hello(&shared, &peer, &mut rd, &mut wr, &mut buf).await {
        return;
    }
    loop {
        let req: Request = match read(&mut rd, &mut buf, Budget::now(&shared)).await {
            Ok(r) => r,
            Err(ReadError::Frame(FrameError::Closed)) => return,
            Err(e) => {
                refuse(&mut rd, &mut wr, &buf, &e).await;
                return;
            }
        };
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        let sent = answer(&shared, &peer, req, &mut wr).await;
        shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        if sent.is_err() {
            return;
        }
    }
}

/// Read the client's Hello and answer it; a client of another protocol version is told so.
/// Returns whether the connection goes on to requests.
async fn hello(
    shared: &Shared,
    peer: &Peer,
    rd: &mut tokio::net::unix::OwnedReadHalf,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    buf: &mut Vec<u8>,
) -> bool {
    let hello: Hello = match read(rd, buf, Budget::now(shared)).await {
        Ok(h) => h,
        Err(ReadError::Frame(FrameError::Closed)) => return false,
        Err(e) => {
            refuse(rd, wr, buf, &e).await;
            return false;
        }
    };
    if hello.version != proto::PROTOCOL_VERSION {
        tracing::info!(
            "{} (uid {}) speaks protocol version {}; refused",
            hello.client,
            peer.uid,
            hello.version
        );
        let msg = format!(
            "version mismatch: {} speaks protocol version {}, flexd speaks version {}",
            hello.client,
            hello.version,
            proto::PROTOCOL_VERSION
        );
        let _ = write(wr, &Response::error(ErrorKind::VersionMismatch, msg)).await;
        return false;
    }
    let server = format!("flexd {}", env!("CARGO_PKG_VERSION"));
    let ok = Response::Hello(flex_proto::HelloReply {
        version: proto::PROTOCOL_VERSION,
        server,
    });
    write(wr, &ok).await.is_ok()
}

/// Answer one request: one frame, or a listing's pages one after the other (each made under
/// the state's lock on its own, so other clients are served in between).
async fn answer(
    shared: &Shared,
    peer: &Peer,
    req: Request,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
) -> std::io::Result<()> {
    let mut next = Some(req);
    while let Some(req) = next.take() {
        let filter = match &req {
            Request::Queue(f) | Request::QueueRows(f) => Some(f.clone()),
            _ => None,
        };
        let resp = dispatch(shared, peer, req).await;
        next = queue::next_page(filter, &resp);
        let frame = encode(&resp)?;
        drop(resp);
        wr.write_all(&frame).await?;
    }
    Ok(())
}

/// Answer a frame that cannot be read, then close. The rest of a frame refused for its size is
/// read and dropped first (for a while): a client still writing it would otherwise never get to
/// read why.
async fn refuse(
    rd: &mut tokio::net::unix::OwnedReadHalf,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    buf: &[u8],
    e: &ReadError,
) {
    let _ = write(wr, &bad_frame(e)).await;
    if let ReadError::Frame(FrameError::TooLarge { size, .. }) = e {
        let mut left = (size + 4).saturating_sub(buf.len());
        let mut scratch = vec![0u8; 64 << 10];
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while left > 0 {
                match rd.read(&mut scratch[..left.min(64 << 10)]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left -= n,
                }
            }
        })
        .await;
    }
}

fn bad_frame(e: &ReadError) -> Response {
    match e {
        ReadError::Frame(FrameError::TooLarge { size, max }) => Response::error(
            ErrorKind::LimitExceeded,
            format!("the request is {size} bytes, more than max_frame_bytes = {max}"),
        ),
        ReadError::Frame(e) => Response::error(ErrorKind::InvalidRequest, e.to_string()),
        ReadError::Busy { size, max } => Response::error(
            ErrorKind::LimitExceeded,
            format!(
                "flexd cannot hold the request of {size} bytes now: requests still arriving \
                 take max_buffered_bytes = {max}; try again"
            ),
        ),
    }
}

/// Why a frame was not read.
enum ReadError {
    Frame(FrameError),
    /// The budget for bytes of unfinished frames is spent.
    Busy {
        size: usize,
        max: usize,
    },
}

impl From<FrameError> for ReadError {
    fn from(e: FrameError) -> Self {
        ReadError::Frame(e)
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Frame(e.into())
    }
}

/// What one frame may take: bytes, time waiting for it to begin, time for it to arrive.
struct Budget {
    max_frame: usize,
    idle: Duration,
    frame: Duration,
    /// Bytes of unfinished frames all connections may hold, as permits.
    buffered: Arc<tokio::sync::Semaphore>,
    max_buffered: usize,
}

impl Budget {
    /// The budget for the next frame, from the limits in force now (a reload may change them).
    fn now(shared: &Shared) -> Budget {
        let l = shared.limits();
        Budget {
            max_frame: shared.max_frame.load(Ordering::Relaxed),
            idle: l.idle_timeout,
            frame: l.frame_timeout,
            buffered: shared.buffered.clone(),
            max_buffered: shared.max_buffered,
        }
    }
}

/// How much of a frame is read at once: the budget is charged for each piece as it arrives.
const PIECE: usize = 64 << 10;

/// Read one frame. The budget for bytes still arriving is charged for what has arrived, not
/// for what the header announces: a header alone holds 4 bytes of it, so clients that send
/// only headers cannot keep others out; the body must arrive within `frame_timeout` of the
/// frame's first byte.
async fn read<T: serde::de::DeserializeOwned>(
    rd: &mut tokio::net::unix::OwnedReadHalf,
    buf: &mut Vec<u8>,
    max: Budget,
) -> Result<T, ReadError> {
    let idle_until = tokio::time::Instant::now() + max.idle;
    let mut frame_until = None;
    // This frame's share of the buffering budget, held until it is read whole.
    let mut held: Option<tokio::sync::OwnedSemaphorePermit> = None;
    loop {
        if let Some((msg, used)) = proto::decode(buf, max.max_frame)? {
            buf.drain(..used);
            if buf.capacity() > 64 << 10 {
                buf.shrink_to(8192);
            }
            return Ok(msg);
        }
        let size = (buf.len() >= 4)
            .then(|| u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize + 4);
        let charged = held.as_ref().map_or(0, |p| p.num_permits());
        if buf.len() > charged {
            let more = u32::try_from(buf.len() - charged)
                .ok()
                .and_then(|n| max.buffered.clone().try_acquire_many_owned(n).ok());
            let Some(more) = more else {
                return Err(ReadError::Busy {
                    size: size.unwrap_or(buf.len()),
                    max: max.max_buffered,
                });
            };
            match &mut held {
                Some(p) => p.merge(more),
                None => held = Some(more),
            }
        }
        if !buf.is_empty() && frame_until.is_none() {
            frame_until = Some(tokio::time::Instant::now() + max.frame);
        }
        let until = frame_until.unwrap_or(idle_until);
        // Never more than a piece beyond what is charged, and nothing past this frame.
        let want = size.map_or(PIECE, |s| s.saturating_sub(buf.len()).clamp(1, PIECE));
        buf.reserve(want);
        let mut piece = (&mut *rd).take(want as u64);
        let Ok(got) = tokio::time::timeout_at(until, piece.read_buf(buf)).await else {
            return Err(match frame_until {
                None => FrameError::Closed,
                Some(_) => FrameError::Malformed(format!(
                    "the request did not arrive whole within frame_timeout = {}",
                    humantime::format_duration(max.frame)
                )),
            }
            .into());
        };
        if got? == 0 {
            return Err(if buf.is_empty() {
                FrameError::Closed
            } else {
                FrameError::Malformed("connection closed inside a frame".into())
            }
            .into());
        }
    }
}

async fn write(wr: &mut tokio::net::unix::OwnedWriteHalf, msg: &Response) -> std::io::Result<()> {
    wr.write_all(&encode(msg)?).await
}

/// [`proto::encode`] into one buffer: the body is serialized after a placeholder for its
/// length, not copied behind it (a page of a `Queue` listing is ~1.5 MB).
pub(crate) fn encode(msg: &Response) -> std::io::Result<Vec<u8>> {
    let hint = match msg {
        Response::QueueRows(flex_proto::RowsPage { rows, .. }) => rows.text_len() + 64,
        _ => 256,
    };
    let mut frame = Vec::with_capacity(4 + hint);
    frame.extend_from_slice(&[0; 4]);
    serde_json::to_writer(&mut frame, msg).expect("protocol types always serialize");
    let len = u32::try_from(frame.len() - 4)
        .map_err(|_| std::io::Error::other("an answer of 4 GiB or more cannot be framed"))?;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    Ok(frame)
}
