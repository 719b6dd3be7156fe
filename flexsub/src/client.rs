//! The commands' side of a connection to flexd: where its socket is, the Hello handshake, and
//! one blocking request/response call at a time.

use crate::error::Error;
use flex_proto::config::socket_path;
use flex_proto::{
    self as proto, ErrorKind, FrameError, Hello, JobView, QueueFilter, QueueRow, Request, Response,
    PROTOCOL_VERSION,
};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest answer the commands read: far more than flexd accepts from a client, because
/// `flexq` over a queue of 100,000 jobs is a 36 MB answer.
const MAX_REPLY: usize = 1 << 30;

/// How long a call waits for flexd's answer before giving up on it.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// An open, greeted connection to flexd.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    path: PathBuf,
    /// flexd's name and version, from its Hello.
    pub server: String,
}

impl Client {
    /// Connect to the socket [`socket_path`] finds in this process's environment.
    pub fn connect(client: &str) -> Result<Self, Error> {
        let path = socket_path(|k| std::env::var(k).ok())?;
        Self::connect_to(&path, client)
    }

    /// Is the server root, `flexd_user` or this process's own user (SO_PEERCRED)? Checked
    /// before anything else is sent: a user who bound the socket path while flexd was down
    /// would otherwise receive scripts and environments.
    fn check_server(&self, flexd_user: &str) -> Result<(), Error> {
        let cred =
            nix::sys::socket::getsockopt(&self.stream, nix::sys::socket::sockopt::PeerCredentials)
                .map_err(|e| Error::Unreachable {
                    path: self.path.clone(),
                    source: e.into(),
                })?;
        let uid = cred.uid();
        let named = (!flexd_user.is_empty())
            .then(|| nix::unistd::User::from_name(flexd_user).ok().flatten())
            .flatten()
            .map(|u| u.uid.as_raw());
        if uid == 0 || uid == nix::unistd::geteuid().as_raw() || Some(uid) == named {
            return Ok(());
        }
        Err(Error::Impostor {
            path: self.path.clone(),
            uid,
            flexd_user: flexd_user.to_string(),
        })
    }

    /// Connect to `path`, check who serves it, and exchange Hellos.
    pub fn connect_to(path: &Path, client: &str) -> Result<Self, Error> {
        let flexd_user = flex_proto::config::flexd_user(|k| std::env::var(k).ok())?;
        let stream = UnixStream::connect(path).map_err(|source| Error::Unreachable {
            path: path.to_path_buf(),
            source,
        })?;
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|source| Error::Unreachable {
                path: path.to_path_buf(),
                source,
            })?;
        let mut c = Client {
            stream,
            path: path.to_path_buf(),
            server: String::new(),
        };
        c.check_server(&flexd_user)?;
        let hello = Hello {
            version: PROTOCOL_VERSION,
            client: client.to_string(),
        };
        match c.exchange(&hello)? {
            Response::Hello(flex_proto::HelloReply { version, server })
                if version == PROTOCOL_VERSION =>
            {
                c.server = server;
                Ok(c)
            }
            Response::Hello(flex_proto::HelloReply { version, server }) => Err(Error::Daemon {
                kind: ErrorKind::VersionMismatch,
                message: format!(
                    "protocol version mismatch: {client} speaks version {PROTOCOL_VERSION}, \
                     {server} at {} speaks version {version}",
                    path.display()
                ),
            }),
            other => Err(into_error(other)),
        }
    }

    /// Send one frame; the answer's frame body comes back undecoded.
    fn send<T: serde::Serialize>(&mut self, msg: &T) -> Result<Vec<u8>, Error> {
        proto::write_frame(&mut self.stream, msg)
            .and_then(|()| proto::read_body(&mut self.stream, MAX_REPLY))
            .map_err(|source| self.lost(source))
    }

    fn lost(&self, source: FrameError) -> Error {
        Error::Connection {
            path: self.path.clone(),
            source,
        }
    }

    fn exchange<T: serde::Serialize>(&mut self, msg: &T) -> Result<Response, Error> {
        let body = self.send(msg)?;
        self.decode(&body)
    }

    /// Send one request; flexd's error replies come back as [`Error::Daemon`].
    pub fn call(&mut self, req: &Request) -> Result<Response, Error> {
        match self.exchange(req)? {
            Response::Error(e) => Err(Error::Daemon {
                kind: e.kind,
                message: e.message,
            }),
            r => Ok(r),
        }
    }

    /// The next frame's body of an answer in pages.
    fn next_body(&mut self) -> Result<Vec<u8>, Error> {
        proto::read_body(&mut self.stream, MAX_REPLY).map_err(|source| self.lost(source))
    }

    fn decode(&self, body: &[u8]) -> Result<Response, Error> {
        serde_json::from_slice(body).map_err(|e| self.lost(FrameError::Malformed(e.to_string())))
    }

    /// Every job the filter selects, in full, page after page.
    pub fn queue(&mut self, filter: QueueFilter) -> Result<Vec<JobView>, Error> {
        let mut body = self.send(&Request::Queue(filter))?;
        let mut all = Vec::new();
        loop {
            match self.decode(&body)? {
                Response::Queue(flex_proto::QueuePage { jobs, next }) => {
                    all.extend(jobs);
                    if next.is_none() {
                        return Ok(all);
                    }
                }
                other => return Err(into_error(other)),
            }
            body = self.next_body()?;
        }
    }

    /// Hand each of flexq's rows for the filter to `each` as it is read, page after page, its
    /// strings borrowed from the page (a table of 100,000 jobs is made without a copy of them).
    pub fn queue_rows(
        &mut self,
        filter: QueueFilter,
        mut each: impl FnMut(QueueRow<'_>),
    ) -> Result<(), Error> {
        let mut body = self.send(&Request::QueueRows(filter))?;
        loop {
            let page = proto::read_queue_rows(&body, &mut each)
                .map_err(|e| self.lost(FrameError::Malformed(e.to_string())))?;
            match page {
                Some(None) => return Ok(()),
                Some(Some(_)) => body = self.next_body()?,
                None => return Err(into_error(self.decode(&body)?)),
            }
        }
    }
}

/// A reply that is not what the request expects.
pub fn into_error(r: Response) -> Error {
    match r {
        Response::Error(e) => Error::Daemon {
            kind: e.kind,
            message: e.message,
        },
        other => Error::Unexpected(format!("{other:?}")),
    }
}

/// A one-connection stand-in for flexd on a temporary socket, for tests: it takes the client's
/// Hello, answers it with a Hello of `version` (None: `serve` answers), then runs `serve`.
#[cfg(test)]
pub(crate) fn stand_in<T: Send + 'static>(
    version: Option<u32>,
    serve: impl FnOnce(&mut std::os::unix::net::UnixStream) -> T + Send + 'static,
) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<T>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _: proto::Hello = proto::read_frame(&mut s, 1 << 20).unwrap();
        if let Some(version) = version {
            let hello = Response::Hello(flex_proto::HelloReply {
                version,
                server: "flexd".into(),
            });
            proto::write_frame(&mut s, &hello).unwrap();
        }
        serve(&mut s)
    });
    (dir, path, server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_socket_is_unreachable_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no.sock");
        let e = Client::connect_to(&path, "flexq").unwrap_err();
        assert!(e
            .to_string()
            .starts_with(&format!("cannot reach flexd at {}", path.display())));
        assert_eq!(e.exit_code(), crate::error::exit::UNREACHABLE);
    }

    #[test]
    fn flexd_refusing_the_hello_is_a_version_mismatch_with_its_message() {
        let (_dir, path, server) = stand_in(None, |s| {
            let msg = "protocol version mismatch: client speaks 1, flexd speaks 2";
            proto::write_frame(s, &Response::error(ErrorKind::VersionMismatch, msg)).unwrap();
        });
        let e = Client::connect_to(&path, "flexq").unwrap_err();
        server.join().unwrap();
        assert_eq!(
            e.to_string(),
            "protocol version mismatch: client speaks 1, flexd speaks 2"
        );
        assert_eq!(e.exit_code(), crate::error::exit::VERSION_MISMATCH);
    }

    #[test]
    fn answers_larger_than_a_request_frame_are_read() {
        let big = "x".repeat(proto::DEFAULT_MAX_FRAME + 1);
        let sent = big.clone();
        let (_dir, path, server) = stand_in(Some(PROTOCOL_VERSION), move |s| {
            let _: Request = proto::read_frame(s, 1 << 20).unwrap();
            proto::write_frame(s, &Response::error(ErrorKind::NotFound, sent)).unwrap();
        });
        let mut c = Client::connect_to(&path, "flexq").unwrap();
        let e = c.call(&Request::Ping).unwrap_err();
        server.join().unwrap();
        assert_eq!(e.to_string().len(), big.len(), "the whole answer");
    }

    #[test]
    fn an_older_server_is_a_version_mismatch() {
        let (_dir, path, server) = stand_in(Some(PROTOCOL_VERSION + 1), |_| ());
        let e = Client::connect_to(&path, "flexq").unwrap_err();
        server.join().unwrap();
        let msg = e.to_string();
        assert!(msg.contains("version mismatch"), "{msg}");
        assert!(msg.contains(&PROTOCOL_VERSION.to_string()), "{msg}");
        assert!(msg.contains(&(PROTOCOL_VERSION + 1).to_string()), "{msg}");
        assert_eq!(e.exit_code(), crate::error::exit::VERSION_MISMATCH);
    }
}
