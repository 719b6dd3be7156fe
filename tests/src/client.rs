//! A tiny protocol client for the tests: the Hello, one request and its answer, a listing's
//! pages gathered, errors kept apart by kind.

use flex_proto::{
    self as proto, ErrorKind, Hello, JobSpec, JobView, QueueFilter, Request, Response,
    PROTOCOL_VERSION,
};
use gres_plugin::JobId;
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::WAIT;

/// What a failed request returned.
#[derive(Debug)]
pub enum ClientError {
    Io(std::io::Error),
    Frame(proto::FrameError),
    /// flexd answered with an error.
    Daemon {
        kind: ErrorKind,
        message: String,
    },
    /// flexd answered with a response of another kind.
    Unexpected(Box<Response>),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Frame(e) => write!(f, "{e}"),
            ClientError::Daemon { kind, message } => write!(f, "{kind:?}: {message}"),
            ClientError::Unexpected(r) => write!(f, "unexpected response {r:?}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<proto::FrameError> for ClientError {
    fn from(e: proto::FrameError) -> Self {
        ClientError::Frame(e)
    }
}

/// The largest answer the client reads (as the commands: a queue of 100,000 jobs is a 36 MB
/// answer, more than a request frame may be).
const MAX_REPLY: usize = 1 << 30;

/// A blocking protocol connection for tests.
pub struct Client {
    stream: UnixStream,
}

impl Client {
    /// Connect and do the handshake with the current protocol version.
    pub fn connect(socket: impl AsRef<Path>) -> Result<Client, ClientError> {
        let mut c = Self::connect_raw(socket)?;
        match c.hello(PROTOCOL_VERSION)? {
            Response::Hello(flex_proto::HelloReply { .. }) => Ok(c),
            Response::Error(e) => Err(ClientError::Daemon {
                kind: e.kind,
                message: e.message,
            }),
            other => Err(ClientError::Unexpected(Box::new(other))),
        }
    }

    /// Connect without a handshake (to send one by hand with [`Client::hello`]).
    pub fn connect_raw(socket: impl AsRef<Path>) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(ClientError::Io)?;
        stream
            .set_read_timeout(Some(WAIT))
            .map_err(ClientError::Io)?;
        Ok(Client { stream })
    }

    /// Send a Hello with any version; returns flexd's answer as it is.
    pub fn hello(&mut self, version: u32) -> Result<Response, ClientError> {
        proto::write_frame(
            &mut self.stream,
            &Hello {
                version,
                client: "flex-tests".into(),
            },
        )?;
        Ok(proto::read_frame(&mut self.stream, MAX_REPLY)?)
    }

    /// One request, one response (errors come back as `Response::Error`); the pages of a
    /// `Queue` listing are read and joined into one.
    pub fn request(&mut self, req: &Request) -> Result<Response, ClientError> {
        proto::write_frame(&mut self.stream, req)?;
        let mut r = proto::read_frame(&mut self.stream, MAX_REPLY)?;
        while let Response::Queue(flex_proto::QueuePage {
            jobs,
            next: Some(_),
        }) = &mut r
        {
            let mut all = std::mem::take(jobs);
            r = proto::read_frame(&mut self.stream, MAX_REPLY)?;
            if let Response::Queue(flex_proto::QueuePage { jobs, .. }) = &mut r {
                all.append(jobs);
                *jobs = all;
            }
        }
        Ok(r)
    }

    /// A request whose error answers become `ClientError::Daemon`.
    pub fn call(&mut self, req: &Request) -> Result<Response, ClientError> {
        match self.request(req)? {
            Response::Error(e) => Err(ClientError::Daemon {
                kind: e.kind,
                message: e.message,
            }),
            r => Ok(r),
        }
    }

    pub fn submit(&mut self, spec: JobSpec) -> Result<JobId, ClientError> {
        match self.call(&Request::Submit(spec))? {
            Response::Submitted(flex_proto::SubmitReply { job, .. }) => Ok(job),
            other => Err(ClientError::Unexpected(Box::new(other))),
        }
    }

    pub fn queue(&mut self, filter: QueueFilter) -> Result<Vec<JobView>, ClientError> {
        match self.call(&Request::Queue(filter))? {
            Response::Queue(flex_proto::QueuePage { jobs, .. }) => Ok(jobs),
            other => Err(ClientError::Unexpected(Box::new(other))),
        }
    }

    pub fn cancel(
        &mut self,
        jobs: Vec<JobId>,
        signal: Option<i32>,
    ) -> Result<Response, ClientError> {
        self.call(&Request::Cancel(flex_proto::CancelRequest {
            jobs,
            signal,
            tasks: vec![],
        }))
    }
}
