//! The protocol between the commands and flexd: length-prefixed JSON frames over a Unix socket,
//! and the types both sides share.
//!
//! A connection starts with the client's [`Hello`] (its protocol version); flexd answers
//! [`Response::Hello`] or an [`ErrorKind::VersionMismatch`] error naming both versions. Then
//! the client sends [`Request`]s, one [`Response`] each. Each frame is a 4-byte big-endian
//! length and that many bytes of JSON ([`frame`]). Who is asking comes from the socket
//! (SO_PEERCRED), never from the frames.
//!
//! - [`messages`]: one [`Request`] variant per verb, each carrying one request type, and the
//!   [`Response`] variants that answer them.
//! - [`array`]: job arrays, dependencies and job references (`12_[3-5]`) as Slurm writes them.
//! - [`job`]: [`JobSpec`], [`JobState`], [`JobView`]; [`rows`]: flexq's compact rows.
//! - [`text`]: numbers and sizes as the tables print them.
//! - [`fname`]: sbatch's filename patterns (`%j`, `%3a`, ...) for the output files.
//! - [`config`]: the few keys of flexd.toml the commands read (the socket, the script limits),
//!   and the one parser of sizes in flexd.toml, which flexd uses too.
//!
//! The crate needs neither tokio nor rusqlite, so the commands stay small.
//!
//! # When [`PROTOCOL_VERSION`] moves
//!
//! A change that an older peer would read wrongly or refuse moves the version: a new required
//! field, a field or variant renamed or removed, a changed meaning or unit. A change that an
//! older peer reads correctly does not: a new field with `#[serde(default)]` that old senders
//! may leave out, a new request variant that old servers answer with an error. Every version's
//! frames are kept in `tests/fixtures/proto-v<N>/`, and a test decodes them with today's code;
//! a new version gets its own directory, and the old ones stay.

pub mod array;
pub mod config;
pub mod constraint;
pub mod fname;
pub mod frame;
pub mod job;
pub mod messages;
pub mod rows;
#[cfg(test)]
mod tests;
pub mod text;

pub use array::{ArraySpec, DepKind, DepTerm, Dependency, JobRef, TaskRange};
pub use constraint::Constraint;
pub use frame::{decode, encode, read_body, read_frame, write_frame, FrameError};
pub use job::{
    AllocView, ArrayTask, Env, JobDetails, JobOptions, JobSpec, JobState, JobView, LeafView, Mail,
    MailEvents, QueueOptions, WarnSignal, RLIMIT_NAMES,
};
pub use messages::*;
pub use rows::{read_queue_rows, thousandths, units_text, QueueRow, QueueRows};

pub use gres_plugin::JobId;

/// Bumped whenever a frame's meaning changes incompatibly (see the crate docs for the rule).
pub const PROTOCOL_VERSION: u32 = 2;

/// Largest frame either side accepts unless configured otherwise (scripts travel in frames).
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;
