//! The Slurm test's plumbing: finding the daemons, free ports, the files they need (munge key,
//! device files, flexgres output, the spank plugin) and the daemons' logs for failure messages.

use flex_tests::{bin, bin_dir};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A program on PATH or in the sbin directories, where Debian puts the Slurm daemons.
pub(super) fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// Whether the test can run here; panics under CI=true when it cannot.
pub(super) fn usable() -> bool {
    let missing: Vec<&str> = ["slurmctld", "slurmd", "munged", "srun", "sbatch", "sinfo"]
        .into_iter()
        .filter(|n| find(n).is_none())
        .collect();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if missing.is_empty() && root {
        return true;
    }
    let why = if root {
        format!(
            "{} not installed (apt-get install slurm-wlm munge)",
            missing.join(", ")
        )
    } else {
        "not root (slurmd must run as root)".to_string()
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and Slurm cannot run: {why}"
    );
    eprintln!("skipping the Slurm test: {why}");
    false
}

/// A free TCP port on loopback, for slurmctld and each slurmd.
pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// This machine's short host name: slurmd must run on its node's NodeHostname.
pub(super) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(rc, 0, "gethostname");
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let h = String::from_utf8_lossy(&buf[..end]).into_owned();
    h.split('.').next().unwrap_or(&h).to_string()
}

/// The tails of the daemons' logs under `dir`, for a failure message.
pub(super) fn self_logs(dir: impl AsRef<Path>) -> String {
    let mut s = String::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.as_ref().join("log"))
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        s.push_str(&format!("--- {} (last lines)\n", p.display()));
        for l in tail.into_iter().rev() {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

/// No SLURM_* variable of an outer allocation may leak into the private cluster's commands.
pub(super) fn clean_env(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_") || k.starts_with("SBATCH_") || k.starts_with("SRUN_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// PATH with the workspace's binaries first, so jobs find flexrun.
pub(super) fn path_with_bins() -> String {
    format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Sets the permission bits of `p`.
pub(super) fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A fresh random munge key.
pub(super) fn random_key() -> Vec<u8> {
    let mut key = vec![0u8; 1024];
    let mut f = std::fs::File::open("/dev/urandom").unwrap();
    std::io::Read::read_exact(&mut f, &mut key).unwrap();
    key
}

/// The flex-spank cdylib of this build. `cargo test --workspace` builds it as part of the
/// flex-spank package (in `deps/`; `cargo build` also copies it beside the binaries).
pub(super) fn spank_plugin() -> PathBuf {
    let dir = bin_dir();
    [dir.join("deps/libflex_spank.so"), dir.join("libflex_spank.so")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "libflex_spank.so is not under {}: run `cargo test --workspace` or `cargo build -p flex-spank`",
                dir.display()
            )
        })
}

/// Run flexgres with a topology file; its stdout.
pub(super) fn flexgres(args: &[&str], topology: &Path) -> String {
    let o = Command::new(bin("flexgres"))
        .args(args)
        .arg("--topology")
        .arg(topology)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "flexgres {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Every device path gres.conf names, as a symlink to /dev/null (a character device); how many.
pub(super) fn make_device_files(gres: &str) -> usize {
    let mut n = 0;
    for line in gres.lines().filter(|l| !l.starts_with('#')) {
        for field in line.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            if key != "File" && key != "MultipleFiles" {
                continue;
            }
            for f in value.split(',') {
                let p = Path::new(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                if !p.exists() {
                    std::os::unix::fs::symlink("/dev/null", p).unwrap();
                }
                n += 1;
            }
        }
    }
    n
}
