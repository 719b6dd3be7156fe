//! Every path flexd uses, resolved in one place against the working directory it started in.

use crate::config::Settings;
use gres_plugin::JobId;
use std::path::{Path, PathBuf};

/// flexd's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Paths {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    /// The SQLite database.
    pub db: PathBuf,
    /// Supervisors' run and status files.
    pub run_dir: PathBuf,
    /// A file path, or the bare name of a shipped topology (the probe finds its compiled-in
    /// copy when no such file is in the working directory).
    pub topology: PathBuf,
}

impl Paths {
    pub(crate) fn resolve(s: &Settings, cwd: &Path) -> Paths {
        let abs = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                cwd.join(p)
            }
        };
        let state_dir = abs(&s.state_dir);
        let bare = s.topology.components().count() == 1 && s.topology.is_relative();
        let topology = if bare && !cwd.join(&s.topology).exists() {
            s.topology.clone()
        } else {
            abs(&s.topology)
        };
        Paths {
            socket: abs(&s.socket),
            db: state_dir.join("flex.db"),
            run_dir: state_dir.join("run"),
            state_dir,
            topology,
        }
    }
}

/// Where a job's supervisor says it runs (its pid and the job's process group).
pub(crate) fn run_file(run_dir: &Path, job: JobId) -> PathBuf {
    run_dir.join(format!("{job}.run"))
}

/// Where a job's supervisor records how the job ended.
pub(crate) fn status_file(run_dir: &Path, job: JobId) -> PathBuf {
    run_dir.join(format!("{job}.status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_the_start_directory() {
        let mut s = Settings::defaults();
        let p = Paths::resolve(&s, Path::new("/srv"));
        assert_eq!(p.state_dir, PathBuf::from("/srv/flex-state"));
        assert_eq!(p.db, PathBuf::from("/srv/flex-state/flex.db"));
        assert_eq!(p.socket, PathBuf::from("/tmp/flexd.sock"));
        // a shipped name stays bare unless the directory has such a file
        assert_eq!(p.topology, PathBuf::from("a100-40gb-x2.toml"));
        s.topology = "topo/x.toml".into();
        assert_eq!(
            Paths::resolve(&s, Path::new("/srv")).topology,
            PathBuf::from("/srv/topo/x.toml")
        );
        assert_eq!(
            status_file(&p.run_dir, JobId(7)),
            PathBuf::from("/srv/flex-state/run/7.status")
        );
    }
}
