//! The cleanup process that makes sure no rank outlives flexrun.
//!
//! Ranks lead their own process groups (so a signal reaches each once, through flexrun), which
//! puts them outside the job's process group that flexd's supervisor kills. The parent-death
//! signal ends a rank's first process with flexrun, but not what that process started. So
//! flexrun forks this watchdog first, in its own process group: flexrun sends it each rank's
//! process group id over a pipe, and when the pipe closes (flexrun ended, however it ended,
//! SIGKILL included) it sends SIGKILL to every one of those groups that still has members in
//! the job's session, then exits.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{ForkResult, Pid};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;

/// flexrun's end of the pipe.
#[derive(Debug)]
pub struct Watchdog {
    pipe: File,
}

impl Watchdog {
    /// Fork the watchdog. Call it while flexrun has a single thread: the child runs on after
    /// the fork.
    pub fn start() -> std::io::Result<Watchdog> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        // SAFETY: flexrun has not started any thread yet (see the caller), so the child is an
        // ordinary single-threaded copy and may allocate and use std.
        match unsafe { nix::unistd::fork() }? {
            ForkResult::Child => {
                drop(w);
                watch(r);
            }
            ForkResult::Parent { .. } => {
                drop(r);
                Ok(Watchdog {
                    pipe: File::from(w),
                })
            }
        }
    }

    /// Hand a rank's process group to the watchdog.
    pub fn guard(&mut self, pgid: i32) {
        // If the watchdog is gone there is nobody to tell; the rank still runs.
        let _ = self.pipe.write_all(&pgid.to_le_bytes());
    }
}

/// The watchdog's life: collect process groups until flexrun's end of the pipe closes, then
/// kill what is left of them.
fn watch(r: OwnedFd) -> ! {
    let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
    // Hold neither the job's output nor its input open.
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this single-threaded process.
            unsafe {
                libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd);
            }
        }
    }
    let mut bytes = Vec::new();
    let _ = File::from(r).read_to_end(&mut bytes);
    let session = nix::unistd::getsid(None).map(|p| p.as_raw()).unwrap_or(-1);
    let groups: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    for g in members_in_session(&groups, session) {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
    // SAFETY: _exit ends this process without running the parent's exit handlers twice.
    unsafe { libc::_exit(0) }
}

/// The groups among `groups` that have a live process in `session`: a group whose number was
/// reused by an unrelated process elsewhere is left alone.
pub fn members_in_session(groups: &[i32], session: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        if let Some((state, pgrp, sid)) = parse_stat(&stat) {
            if state != 'Z' && sid == session && groups.contains(&pgrp) && !found.contains(&pgrp) {
                found.push(pgrp);
            }
        }
    }
    found
}

/// State, process group and session from a /proc/PID/stat line.
fn parse_stat(stat: &str) -> Option<(char, i32, i32)> {
    // The command name is in parentheses and may hold spaces or parentheses itself.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    let sid = f.next()?.parse().ok()?;
    Some((state, pgrp, sid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_past_odd_names() {
        let line = "4242 (a) b (c)) S 1 4240 4200 0 -1 4194560 120 0 0 0";
        assert_eq!(parse_stat(line), Some(('S', 4240, 4200)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_group_is_found_in_this_session() {
        let me = nix::unistd::getpgrp().as_raw();
        let sid = nix::unistd::getsid(None).unwrap().as_raw();
        assert_eq!(members_in_session(&[me], sid), [me]);
        assert!(members_in_session(&[me], sid + 1_000_000).is_empty());
    }
}
