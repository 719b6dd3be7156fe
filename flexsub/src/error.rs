//! The commands' errors and the one mapping from an error to a documented exit code
//! (docs/commands.md lists them).

use crate::estimate::EstimateError;
use flex_proto::{ErrorKind, FrameError};
use std::path::PathBuf;

/// Exit codes shared by flexsub, flexq and flexcancel (flexrun passes its ranks' status on).
pub mod exit {
    pub const OK: i32 = 0;
    /// Bad input (script, option value) or a request flexd refused.
    pub const REJECTED: i32 = 1;
    /// Command-line usage error (clap's own code).
    pub const USAGE: i32 = 2;
    /// flexd cannot be reached, or the connection broke.
    pub const UNREACHABLE: i32 = 3;
    pub const PERMISSION_DENIED: i32 = 4;
    pub const VERSION_MISMATCH: i32 = 5;
    /// flexd failed internally or answered something this command does not understand.
    pub const INTERNAL: i32 = 6;
    /// flexrun: a rank's program was found but could not be executed.
    pub const CANNOT_EXECUTE: i32 = 126;
    /// flexrun: a rank's program was not found.
    pub const NOT_FOUND: i32 = 127;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input that names where it came from (a script line, an option).
    #[error("{0}")]
    Input(String),
    /// Options that do not go together.
    #[error("{0}")]
    Usage(String),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Estimate(#[from] EstimateError),
    #[error("cannot reach flexd at {}: {source}", path.display())]
    Unreachable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to talk to {}: it is served by uid {uid}, not by root, flexd_user{} or \
         yourself; nothing was sent (is flexd down and another user holding its socket?)",
        path.display(),
        if flexd_user.is_empty() { String::new() } else { format!(" ({flexd_user})") }
    )]
    Impostor {
        path: PathBuf,
        uid: u32,
        flexd_user: String,
    },
    #[error("lost the connection to flexd at {}: {source}", path.display())]
    Connection {
        path: PathBuf,
        #[source]
        source: FrameError,
    },
    /// flexd's own refusal, its message as it wrote it.
    #[error("{message}")]
    Daemon { kind: ErrorKind, message: String },
    #[error("unexpected answer from flexd: {0}")]
    Unexpected(String),
    /// The configuration that names flexd's socket is unreadable.
    #[error("{0}")]
    Config(String),
    /// flexrun could not start a rank.
    #[error("cannot start rank {rank} ({program}): {source}")]
    Spawn {
        rank: usize,
        program: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Writing the command's output failed (a closed pipe, a full disk).
    pub fn output(e: std::io::Error) -> Error {
        Error::Input(format!("cannot write the output: {e}"))
    }

    /// The exit code the commands end with for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) | Error::Read { .. } | Error::Estimate(_) => exit::REJECTED,
            Error::Usage(_) => exit::USAGE,
            Error::Unreachable { .. }
            | Error::Impostor { .. }
            | Error::Connection { .. }
            | Error::Config(_) => exit::UNREACHABLE,
            Error::Daemon { kind, .. } => match kind {
                ErrorKind::VersionMismatch => exit::VERSION_MISMATCH,
                ErrorKind::PermissionDenied => exit::PERMISSION_DENIED,
                ErrorKind::InvalidRequest
                | ErrorKind::NotFound
                | ErrorKind::Unsatisfiable
                | ErrorKind::LimitExceeded => exit::REJECTED,
                ErrorKind::Internal => exit::INTERNAL,
            },
            Error::Unexpected(_) => exit::INTERNAL,
            Error::Spawn { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            },
        }
    }
}

/// For commands whose output is read through pipes (`flexq | head`): end the way squeue does
/// when the reader goes away, killed by SIGPIPE without a message (Rust ignores SIGPIPE, and a
/// write would fail with "Broken pipe" instead).
pub fn default_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: restores the default disposition before any other thread exists.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// Print `prog: error` to stderr and return the exit code: what every binary's `main` ends with.
pub fn report(prog: &str, err: &Error) -> i32 {
    // One line per problem (a script with several bad directives), each naming the command.
    for line in err.to_string().lines() {
        eprintln!("{prog}: {line}");
    }
    err.exit_code()
}

impl From<flex_proto::config::ConfigError> for Error {
    fn from(e: flex_proto::config::ConfigError) -> Self {
        Error::Config(e.0)
    }
}
