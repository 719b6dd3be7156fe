//! The commands' side of a connection to flexd: where its socket is, the Hello handshake, and
//! one blocking request/response call at a time.

use crate::error::Error;
use crate::proto::{
    self, ErrorKind, FrameError, Hello, JobView, QueueFilter, QueueRow, Request, Response,
    PROTOCOL_VERSION,
};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The configuration every host has when `FLEX_CONFIG` names none.
pub const SYSTEM_CONFIG: &str = "/etc/flex/flexd.toml";

/// flexd's commented default configuration, compiled in: its `socket` key is the default.
const DEFAULT_CONFIG: &str = include_str!("../../etc/flexd.toml");

/// The socket of the compiled-in default configuration.
fn default_socket() -> PathBuf {
    socket_key(DEFAULT_CONFIG, Path::new("etc/flexd.toml"))
        .ok()
        .flatten()
        .expect("etc/flexd.toml sets `socket` (a unit test checks it)")
}

/// The largest answer the commands read: far more than flexd accepts from a client, because
/// `flexq` over a queue of 100,000 jobs is a 36 MB answer.
const MAX_REPLY: usize = 1 << 30;

/// How long a call waits for flexd's answer before giving up on it.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// The `socket` key at the top level of a flexd configuration, if it has one.
fn socket_key(text: &str, origin: &Path) -> Result<Option<PathBuf>, Error> {
    let table: toml::Table = text
        .parse()
        .map_err(|e| Error::Config(format!("{}: invalid TOML: {e}", origin.display())))?;
    match table.get("socket") {
        None => Ok(None),
        Some(toml::Value::String(s)) if !s.is_empty() => Ok(Some(PathBuf::from(s))),
        Some(_) => Err(Error::Config(format!(
            "{}: `socket` must be a non-empty path",
            origin.display()
        ))),
    }
}

/// Where flexd listens: `FLEX_SOCKET`; else the `socket` key of the file `FLEX_CONFIG` names,
/// or of /etc/flex/flexd.toml when that exists; else the compiled-in default. `get` reads the
/// environment.
pub fn socket_path(get: impl Fn(&str) -> Option<String>) -> Result<PathBuf, Error> {
    if let Some(s) = get("FLEX_SOCKET").filter(|s| !s.is_empty()) {
        return Ok(PathBuf::from(s));
    }
    if let Some((path, text)) = config_file(&get)? {
        if let Some(socket) = socket_key(&text, &path)? {
            return Ok(socket);
        }
    }
    Ok(default_socket())
}

/// flexd's configuration file as the commands find it: `FLEX_CONFIG`, else
/// /etc/flex/flexd.toml when that exists. Its path and text.
fn config_file(get: &impl Fn(&str) -> Option<String>) -> Result<Option<(PathBuf, String)>, Error> {
    let config = match get("FLEX_CONFIG").filter(|s| !s.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from(SYSTEM_CONFIG)).filter(|p| p.exists()),
    };
    let Some(path) = config else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::Config(format!(
            "cannot read flexd's configuration {}: {e}",
            path.display()
        ))
    })?;
    Ok(Some((path, text)))
}

/// The limits of flexd's `[limits]` table that flexsub checks before it sends a job (flexd
/// checks the script's size again; the directives never reach it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_script_bytes: u64,
    pub max_directives: u32,
}

/// The limits of the configuration [`socket_path`] reads, over the compiled-in defaults.
pub fn limits(get: impl Fn(&str) -> Option<String>) -> Result<Limits, Error> {
    let mut l = Limits {
        max_script_bytes: 0,
        max_directives: 0,
    };
    limits_in(DEFAULT_CONFIG, Path::new("etc/flexd.toml"), &mut l)?;
    if let Some((path, text)) = config_file(&get)? {
        limits_in(&text, &path, &mut l)?;
    }
    Ok(l)
}

/// Take the limits a configuration sets into `l`.
fn limits_in(text: &str, origin: &Path, l: &mut Limits) -> Result<(), Error> {
    let table: toml::Table = text
        .parse()
        .map_err(|e| Error::Config(format!("{}: invalid TOML: {e}", origin.display())))?;
    let Some(limits) = table.get("limits").and_then(|v| v.as_table()) else {
        return Ok(());
    };
    let bad = |key: &str, v: &toml::Value| {
        Error::Config(format!(
            "{}: limits.{key} = {v} is not valid",
            origin.display()
        ))
    };
    if let Some(v) = limits.get("max_script_bytes") {
        l.max_script_bytes = config_size(v).ok_or_else(|| bad("max_script_bytes", v))?;
    }
    if let Some(v) = limits.get("max_directives") {
        l.max_directives = v
            .as_integer()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| bad("max_directives", v))?;
    }
    Ok(())
}

/// A size as flexd's configuration writes it: bytes, or a number and a unit (KB, MB, GB in
/// powers of 1000; KiB, MiB, GiB in powers of 1024).
fn config_size(v: &toml::Value) -> Option<u64> {
    let s = match v {
        toml::Value::Integer(i) => return u64::try_from(*i).ok(),
        toml::Value::String(s) => s.trim(),
        _ => return None,
    };
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let num: f64 = s[..split].parse().ok()?;
    let mult: f64 = match s[split..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1_048_576.0,
        "g" | "gb" => 1e9,
        "gib" => 1_073_741_824.0,
        _ => return None,
    };
    let n = (num * mult).round();
    (n.is_finite() && n >= 0.0 && n < u64::MAX as f64).then_some(n as u64)
}

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

    /// Connect to `path` and exchange Hellos.
    pub fn connect_to(path: &Path, client: &str) -> Result<Self, Error> {
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
        let hello = Hello {
            version: PROTOCOL_VERSION,
            client: client.to_string(),
        };
        match c.exchange(&hello)? {
            Response::Hello { version, server } if version == PROTOCOL_VERSION => {
                c.server = server;
                Ok(c)
            }
            Response::Hello { version, server } => Err(Error::Daemon {
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
                Response::Queue { jobs, next } => {
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
            let hello = Response::Hello {
                version,
                server: "flexd".into(),
            };
            proto::write_frame(&mut s, &hello).unwrap();
        }
        serve(&mut s)
    });
    (dir, path, server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(env: &[(&str, &str)]) -> Result<PathBuf, Error> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        socket_path(|k| env.get(k).cloned())
    }

    #[test]
    fn limits_come_from_the_config_over_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("flexd.toml");
        let get = |k: &str| (k == "FLEX_CONFIG").then(|| cfg.to_str().unwrap().to_string());
        std::fs::write(&cfg, "socket = \"/x\"\n").unwrap();
        let d = limits(get).unwrap();
        assert_eq!((d.max_script_bytes, d.max_directives), (4 << 20, 1000));
        std::fs::write(&cfg, "[limits]\nmax_script_bytes = \"1.5 KB\"\n").unwrap();
        assert_eq!(limits(get).unwrap().max_script_bytes, 1500);
        std::fs::write(
            &cfg,
            "[limits]\nmax_script_bytes = 70\nmax_directives = 3\n",
        )
        .unwrap();
        assert_eq!(
            limits(get).unwrap(),
            Limits {
                max_script_bytes: 70,
                max_directives: 3
            }
        );
        std::fs::write(&cfg, "[limits]\nmax_directives = \"many\"\n").unwrap();
        let e = limits(get).unwrap_err().to_string();
        assert!(e.contains("limits.max_directives = \"many\""), "{e}");
    }

    #[test]
    fn socket_comes_from_env_then_config_then_default() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("flexd.toml");
        std::fs::write(
            &cfg,
            "# comment\nsocket = \"/run/x.sock\"\n[limits]\nsocket = 3\n",
        )
        .unwrap();
        let cfg_s = cfg.to_str().unwrap();
        assert_eq!(
            resolve(&[("FLEX_SOCKET", "/a.sock"), ("FLEX_CONFIG", cfg_s)]).unwrap(),
            PathBuf::from("/a.sock")
        );
        assert_eq!(
            resolve(&[("FLEX_CONFIG", cfg_s)]).unwrap(),
            PathBuf::from("/run/x.sock")
        );

        std::fs::write(&cfg, "[other]\nx = 1\n").unwrap();
        assert_eq!(
            resolve(&[("FLEX_CONFIG", cfg_s)]).unwrap(),
            default_socket()
        );

        std::fs::write(&cfg, "socket = [").unwrap();
        let e = resolve(&[("FLEX_CONFIG", cfg_s)]).unwrap_err().to_string();
        assert!(
            e.contains("flexd.toml") && e.contains("invalid TOML"),
            "{e}"
        );

        let missing = dir.path().join("none.toml");
        let e = resolve(&[("FLEX_CONFIG", missing.to_str().unwrap())]).unwrap_err();
        assert!(e.to_string().contains("none.toml"), "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::UNREACHABLE);
    }

    #[test]
    fn the_compiled_in_configuration_names_the_socket() {
        assert_eq!(
            socket_key(DEFAULT_CONFIG, Path::new("etc/flexd.toml")).unwrap(),
            Some(PathBuf::from("/tmp/flexd.sock"))
        );
    }

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
