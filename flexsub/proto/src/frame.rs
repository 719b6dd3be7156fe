//! Frames: a 4-byte big-endian length and that many bytes of JSON, read and written blocking
//! (the commands) or decoded from a buffer (flexd's async reader, the fuzzer).

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{Read, Write};

/// A frame that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("frame of {size} bytes is larger than the limit of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Encode one frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("protocol types always serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decode one frame from the front of `buf`: the message and the bytes it used, or None when
/// `buf` does not hold a whole frame yet. Pure, so the daemon's async reader and the fuzzer
/// share it.
pub fn decode<T: DeserializeOwned>(
    buf: &[u8],
    max: usize,
) -> Result<Option<(T, usize)>, FrameError> {
    let Some(len) = buf.get(..4) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    let Some(body) = buf.get(4..4 + size) else {
        return Ok(None);
    };
    let msg = serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))?;
    Ok(Some((msg, 4 + size)))
}

/// Read one frame (blocking).
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read, max: usize) -> Result<T, FrameError> {
    let body = read_body(r, max)?;
    serde_json::from_slice(&body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Read one frame's body, undecoded (blocking).
pub fn read_body(r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    if let Err(e) = r.read_exact(&mut len) {
        return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Closed
        } else {
            e.into()
        });
    }
    let size = u32::from_be_bytes(len) as usize;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    let mut body = vec![0u8; size];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// Write one frame (blocking).
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), FrameError> {
    w.write_all(&encode(msg))?;
    w.flush()?;
    Ok(())
}
