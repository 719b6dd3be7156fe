//! Each job's private temporary directory, as Slurm's job_container/tmpfs gives a job a /tmp
//! of its own: made by the supervisor in flexd.toml's `job_tmpdir` under a name no other user
//! can guess or take (`flex-job-<id>.<random>`, created exclusively in a sticky directory),
//! mode 0700 and the job's user's, named by `TMPDIR` (and `SLURM_TMPDIR` for Slurm scripts),
//! and removed with everything in it when the job ends. The job's `srun`, `scontrol` and
//! `torchrun` are links in its `.flex-bin`, first on the job's PATH, so a Python
//! `subprocess` or `sh -c` finds them as well as bash does.

use super::LaunchSpec;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where the job's commands live inside its temporary directory.
const BIN: &str = ".flex-bin";

/// A job's temporary directory, made and not yet removed.
#[derive(Debug)]
pub(crate) struct JobTmp {
    path: PathBuf,
}

impl JobTmp {
    /// Make the job's directory (None when flexd.toml's `job_tmpdir` is empty) and its
    /// commands, owned by the job's user.
    pub(crate) fn create(spec: &LaunchSpec) -> Result<Option<JobTmp>, String> {
        let Some(base) = &spec.tmpdir else {
            return Ok(None);
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("flex-job-{}.", spec.job))
            .rand_bytes(8)
            .tempdir_in(base)
            .map_err(|e| {
                format!(
                    "cannot make the job's temporary directory in {}: {e}",
                    base.display()
                )
            })?
            .keep();
        let tmp = JobTmp { path: dir };
        // From here on, a failure removes what was made.
        match tmp.fill(spec) {
            Ok(()) => Ok(Some(tmp)),
            Err(e) => {
                tmp.remove();
                Err(e)
            }
        }
    }

    fn fill(&self, spec: &LaunchSpec) -> Result<(), String> {
        let fail =
            |what: &str, p: &Path, e: std::io::Error| format!("cannot {what} {}: {e}", p.display());
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| fail("chmod", &self.path, e))?;
        let mut owned = vec![self.path.clone()];
        if !spec.job_commands.is_empty() {
            let bin = self.path.join(BIN);
            std::fs::create_dir(&bin).map_err(|e| fail("create", &bin, e))?;
            owned.push(bin.clone());
            for (name, target) in &spec.job_commands {
                let link = bin.join(name);
                std::os::unix::fs::symlink(target, &link).map_err(|e| fail("link", &link, e))?;
                owned.push(link);
            }
        }
        let me = nix::unistd::geteuid();
        if me.is_root() && me.as_raw() != spec.uid {
            for p in owned {
                std::os::unix::fs::lchown(&p, Some(spec.uid), Some(spec.gid))
                    .map_err(|e| fail("chown", &p, e))?;
            }
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The job's environment with `TMPDIR` (and, in a job with Slurm's variables,
    /// `SLURM_TMPDIR`) naming the directory and its commands first on `PATH`.
    pub(crate) fn environment(
        &self,
        env: &[(String, String)],
        commands: bool,
    ) -> Vec<(String, String)> {
        let dir = self.path.display().to_string();
        let slurm = env.iter().any(|(k, _)| k == "SLURM_JOB_ID");
        let mut out: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| k != "TMPDIR" && k != "SLURM_TMPDIR" && !(commands && k == "PATH"))
            .cloned()
            .collect();
        out.push(("TMPDIR".into(), dir.clone()));
        if slurm {
            out.push(("SLURM_TMPDIR".into(), dir));
        }
        if commands {
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map_or("/usr/local/bin:/usr/bin:/bin", |(_, v)| v.as_str());
            let bin = self.path.join(BIN).display().to_string();
            out.push(("PATH".into(), format!("{bin}:{path}")));
        }
        out
    }

    /// Remove the directory and everything the job left in it (links are removed, never
    /// followed).
    pub(crate) fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(base: &Path) -> LaunchSpec {
        LaunchSpec {
            job: 12,
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            user: "u".into(),
            workdir: "/".into(),
            script: String::new(),
            args: Vec::new(),
            env: Vec::new(),
            stdout: "o".into(),
            stderr: None,
            cpus: Vec::new(),
            time_limit_s: 1,
            kill_grace_ms: 1,
            start_timeout_ms: 10_000,
            socket: "/s".into(),
            umask: 0o22,
            warn: None,
            groups: None,
            append: false,
            mem_bytes: 0,
            pids_max: 0,
            tmpdir: Some(base.to_path_buf()),
            job_commands: vec![("srun".into(), "/opt/flex/bin/flexrun".into())],
            rlimits: Vec::new(),
            devices: Vec::new(),
        }
    }

    #[test]
    fn a_private_directory_with_the_commands_first_on_path_and_gone_at_the_end() {
        let base = tempfile::tempdir().unwrap();
        let t = JobTmp::create(&spec(base.path())).unwrap().unwrap();
        let name = t.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("flex-job-12."), "{name}");
        let meta = std::fs::metadata(t.path()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        let link = t.path().join(".flex-bin/srun");
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("/opt/flex/bin/flexrun")
        );
        let env = vec![
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("TMPDIR".to_string(), "/old".to_string()),
            ("SLURM_JOB_ID".to_string(), "12".to_string()),
        ];
        let e: std::collections::HashMap<_, _> = t.environment(&env, true).into_iter().collect();
        let dir = t.path().display().to_string();
        assert_eq!(e["TMPDIR"], dir);
        assert_eq!(e["SLURM_TMPDIR"], dir);
        assert_eq!(e["PATH"], format!("{dir}/.flex-bin:/usr/bin"));
        let p = t.path().to_path_buf();
        std::fs::write(p.join("scratch"), "x").unwrap();
        t.remove();
        assert!(!p.exists());
        // Two jobs of the same id (a requeued one) never share a directory.
        let a = JobTmp::create(&spec(base.path())).unwrap().unwrap();
        let b = JobTmp::create(&spec(base.path())).unwrap().unwrap();
        assert_ne!(a.path(), b.path());
    }

    #[test]
    fn no_base_no_directory_and_a_missing_base_is_a_clear_error() {
        let mut s = spec(Path::new("/"));
        s.tmpdir = None;
        assert!(JobTmp::create(&s).unwrap().is_none());
        s.tmpdir = Some("/nonexistent/base".into());
        let e = JobTmp::create(&s).unwrap_err();
        assert!(e.contains("/nonexistent/base"), "{e}");
    }
}
