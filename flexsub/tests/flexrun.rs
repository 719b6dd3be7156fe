//! flexrun as a job script runs it: the real binary under a job environment like the one flexd
//! gives (four MIG leaves), with shell commands as ranks. No daemon is needed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const UUIDS: [&str; 4] = [
    "MIG-11111111-1111-5111-8111-111111111111",
    "MIG-22222222-2222-5222-8222-222222222222",
    "MIG-33333333-3333-5333-8333-333333333333",
    "MIG-44444444-4444-5444-8444-444444444444",
];

/// flexrun with a clean environment holding only a four-leaf job's variables: two cores per
/// leaf, leaves 0-1 on NUMA node 0 (cores 0-3) and 2-3 on node 1 (cores 16-19).
fn flexrun(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flexrun"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLEX_JOB_ID", "42")
        .env("FLEX_MIG_UUIDS", UUIDS.join(","))
        .env("FLEX_CPUS", "0-3,16-19")
        .env("FLEX_CPUS_BY_LEAF", "0,1,2,3,16,17,18,19")
        .env("FLEX_CPUS_PER_LEAF", "2")
        .env("FLEX_MASTER_PORT", "29517")
        .env("FLEX_NCCL_MODE", "upstream")
        .args(args)
        .stdin(Stdio::null());
    c
}

/// Lines `R: text` by rank.
fn by_rank(out: &[u8]) -> BTreeMap<usize, Vec<String>> {
    let mut m: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(out).lines() {
        let (r, rest) = line.split_once(": ").expect("a labelled line");
        m.entry(r.parse().expect("a rank number"))
            .or_default()
            .push(rest.to_string());
    }
    m
}

fn run(c: &mut Command) -> Output {
    c.output().expect("flexrun runs")
}

#[test]
fn each_rank_gets_its_leaf_rank_and_the_shared_port() {
    let out = run(&mut flexrun(&[
        "--label",
        "sh",
        "-c",
        "echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $CUDA_VISIBLE_DEVICES $NCCL_MIG_ID \
         $MASTER_ADDR $MASTER_PORT $NCCL_MULTI_RANK_GPU_ENABLE $NCCL_P2P_DISABLE \
         ${NCCL_SHM_DISABLE:-shm-on} $FLEX_RANK_CPUS $FLEX_JOB_ID",
    ]));
    assert!(out.status.success(), "{out:?}");
    let ranks = by_rank(&out.stdout);
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    let cpus = ["0-1", "2-3", "16-17", "18-19"];
    for (r, lines) in &ranks {
        let w: Vec<&str> = lines[0].split(' ').collect();
        let want = [
            &r.to_string(),
            &r.to_string(),
            "4",
            "4",
            UUIDS[*r],
            UUIDS[*r],
            "127.0.0.1",
            "29517",
            "1",
            "1",
            "shm-on",
            cpus[*r],
            "42",
        ];
        assert_eq!(w, want, "rank {r}");
    }
}

#[test]
fn ranks_are_bound_to_their_cores_or_wrapped_onto_real_ones() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = gres_plugin::topology::parse_cpu_list(online.trim()).unwrap();
    let out = run(&mut flexrun(&[
        "-l",
        "sh",
        "-c",
        "grep Cpus_allowed_list /proc/self/status | cut -f2",
    ]));
    assert!(out.status.success(), "{out:?}");
    let model = [[0, 1], [2, 3], [16, 17], [18, 19]];
    for (r, lines) in by_rank(&out.stdout) {
        let got = gres_plugin::topology::parse_cpu_list(&lines[0]).unwrap();
        assert_eq!(
            got,
            flexsub::commands::run::bind_cores(&model[r], &online),
            "rank {r}"
        );
    }
}

#[test]
fn the_first_failing_rank_sets_the_status_and_the_others_get_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let ready = dir.path().join("ready");
    std::fs::create_dir(&ready).unwrap();
    // Rank 2 fails once the others have set their SIGTERM trap.
    let script = format!(
        "if [ $RANK = 2 ]; then while [ $(ls {ready} | wc -l) -lt 3 ]; do sleep 0.05; done; exit 7; fi; \
         trap 'echo term $RANK >> {log}; exit 0' TERM; touch {ready}/$RANK; sleep 60 & wait",
        log = log.display(),
        ready = ready.display()
    );
    let out = run(&mut flexrun(&["--grace", "0", "sh", "-c", &script]));
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rank 2 failed (exit code 7)"), "{stderr}");
    let mut terms: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    terms.sort();
    assert_eq!(terms, ["term 0", "term 1", "term 3"]);
}

#[test]
fn a_rank_killed_by_a_signal_gives_128_plus_the_signal() {
    let out = run(&mut flexrun(&[
        "sh",
        "-c",
        "if [ $RANK = 1 ]; then kill -KILL $$; fi; exit 0",
    ]));
    assert_eq!(out.status.code(), Some(128 + 9), "{out:?}");
}

/// Wait until `dir` holds `n` files (the ranks' "ready" marks).
fn wait_for_files(dir: &Path, n: usize) {
    let start = Instant::now();
    while std::fs::read_dir(dir).unwrap().count() < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "ranks never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn forwarded(signal: &str, trap_exit: i32) -> (Output, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    std::fs::create_dir(&ready).unwrap();
    let log = dir.path().join("log");
    let script = format!(
        "trap 'echo got $RANK >> {log}; exit {trap_exit}' {signal}; \
         touch {ready}/$RANK; sleep 60 & wait",
        log = log.display(),
        ready = ready.display()
    );
    let child = flexrun(&["sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_files(&ready, 4);
    let sig: nix::sys::signal::Signal = format!("SIG{signal}").parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let out = child.wait_with_output().unwrap();
    let mut got: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    (out, got)
}

#[test]
fn usr1_reaches_every_rank() {
    let (out, got) = forwarded("USR1", 0);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(got, ["got 0", "got 1", "got 2", "got 3"]);
}

#[test]
fn term_reaches_every_rank_and_sets_the_status() {
    let (out, got) = forwarded("TERM", 143);
    assert_eq!(out.status.code(), Some(143), "{out:?}");
    assert_eq!(got, ["got 0", "got 1", "got 2", "got 3"]);
}

#[test]
fn labels_prefix_every_line_of_stdout_and_stderr() {
    let out = run(&mut flexrun(&[
        "--label",
        "sh",
        "-c",
        "printf 'a\\nb\\nno-newline'; echo err >&2",
    ]));
    assert!(out.status.success(), "{out:?}");
    for (r, lines) in by_rank(&out.stdout) {
        assert_eq!(lines, ["a", "b", "no-newline"], "rank {r}");
    }
    let err = by_rank(&out.stderr);
    assert_eq!(err.len(), 4);
    assert!(err.values().all(|l| l == &["err"]));
}

#[test]
fn fewer_ranks_with_n() {
    let out = run(&mut flexrun(&[
        "-l",
        "-n",
        "2",
        "sh",
        "-c",
        "echo $WORLD_SIZE",
    ]));
    assert!(out.status.success(), "{out:?}");
    let ranks = by_rank(&out.stdout);
    assert_eq!(ranks.keys().copied().collect::<Vec<_>>(), [0, 1]);
    let out = run(&mut flexrun(&["-n", "5", "true"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only 4 leaves"));
}

#[test]
fn patched_nccl_goes_first_on_the_library_path() {
    let out = run(
        flexrun(&["-l", "-n", "1", "sh", "-c", "echo $LD_LIBRARY_PATH"])
            .env("FLEX_NCCL_MODE", "patched")
            .env("FLEX_NCCL_LIB_DIR", "/opt/nccl-mig/lib")
            .env("LD_LIBRARY_PATH", "/usr/local/cuda/lib64"),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        by_rank(&out.stdout)[&0],
        ["/opt/nccl-mig/lib:/usr/local/cuda/lib64"]
    );
}

#[test]
fn outside_a_job_or_without_a_program_it_says_so() {
    let out = run(Command::new(env!("CARGO_BIN_EXE_flexrun"))
        .env_clear()
        .arg("true"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("FLEX_MIG_UUIDS is not set: flexrun runs inside a Flex job"),
        "{err}"
    );
    let out = run(&mut flexrun(&["/no/such/program"]));
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start rank 0 (/no/such/program)"),
        "{err}"
    );
}

/// Whether a process is alive (a zombie is not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            rest.split_whitespace().next() != Some("Z")
        }
        Err(_) => false,
    }
}

fn wait_dead(pids: &[i32]) {
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "processes {pids:?} outlived flexrun"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn what_ranks_leave_behind_ends_with_flexrun() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "sleep 300 & echo $! > {}/$RANK.tmp && mv {0}/$RANK.tmp {0}/$RANK",
        dir.path().display()
    );
    let out = run(&mut flexrun(&["sh", "-c", &script]));
    assert!(out.status.success(), "{out:?}");
    let pids = pids_in(dir.path());
    assert_eq!(pids.len(), 4);
    wait_dead(&pids);
}

#[test]
fn ranks_and_their_children_die_with_a_killed_flexrun() {
    let dir = tempfile::tempdir().unwrap();
    // Ranks that ignore SIGTERM, with a child each: only SIGKILL ends them.
    let script = format!(
        "trap '' TERM; sleep 300 & echo $$ $! > {}/$RANK.tmp && mv {0}/$RANK.tmp {0}/$RANK; wait",
        dir.path().display()
    );
    let mut child = flexrun(&["sh", "-c", &script]).spawn().unwrap();
    wait_for_files(dir.path(), 4);
    let pids: Vec<i32> = std::fs::read_dir(dir.path())
        .unwrap()
        .flat_map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .split_whitespace()
                .map(|p| p.parse::<i32>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(pids.len(), 8);
    assert!(pids.iter().all(|&p| alive(p)));
    child.kill().unwrap();
    child.wait().unwrap();
    wait_dead(&pids);
}
