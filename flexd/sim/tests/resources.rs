//! Cores and host memory in traces: the columns become the core's requests, memory binds when
//! the hosts have a size for it, CPU-only jobs run under Flex-MIG alone, and bad values name
//! their line and column.

use flex_sched::Policy;
use flexsim::engine::request_of;
use flexsim::models::{Hardware, ModelKind};
use flexsim::{ExecModel, RunResult, SimConfig, Trace};
use gres_plugin::{HostMem, Request};
use std::process::Command;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn parse(text: &str) -> Trace {
    Trace::from_reader(text.as_bytes(), "t.csv").unwrap()
}

/// No interference, so that a one-leaf job runs exactly its duration.
fn cfg() -> SimConfig {
    SimConfig {
        exec: ExecModel::from_toml("interference = 1.0\n", "t.toml").unwrap(),
        ..SimConfig::new(Policy::fifo())
    }
}

fn run(hw: &Hardware, model: ModelKind, trace: &Trace) -> RunResult {
    hw.run(model, trace, &cfg()).unwrap()
}

/// (job id, start, end) of every job that ran.
fn times(r: &RunResult) -> Vec<(u64, u64, u64)> {
    r.jobs.iter().map(|j| (j.id, j.start_s, j.end_s)).collect()
}

#[test]
fn cores_and_memory_become_the_cores_request() {
    let t = parse(
        "job_id,submit_s,leaves,duration_s,kind,time_limit_s,cpus,host_mem,mem_gb\n\
         1,0,2,600,train,900,8,64G,\n\
         2,0,1,600,infer,900,,4000Mc,4.5\n\
         3,0,0,600,train,900,4,16G,\n\
         4,0,1,600,train,900,0,0,\n\
         5,0,1,600,train,900,2,8G/gpu,\n\
         6,0,1,600,train,900,,,\n",
    );
    let reqs: Vec<Request> = t.jobs.iter().map(request_of).collect();
    assert_eq!(
        reqs[0],
        Request {
            cpus: 8,
            host_mem: Some(HostMem::PerNode(64 * GIB)),
            ..Request::leaves(2, 900)
        }
    );
    assert_eq!(
        reqs[1],
        Request {
            host_mem: Some(HostMem::PerCpu(4000 * MIB)),
            mem_bytes: Some(4_500_000_000),
            ..Request::leaves(1, 900)
        }
    );
    // 0 leaves with cores: a CPU-only job, no leaves at all.
    assert_eq!(
        reqs[2],
        Request {
            host_mem: Some(HostMem::PerNode(16 * GIB)),
            ..Request::cpus(4, 900)
        }
    );
    assert!(!reqs[2].wants_gpu());
    assert_eq!(reqs[3].host_mem, Some(HostMem::All));
    assert_eq!(reqs[3].cpus, 0);
    assert_eq!(reqs[4].host_mem, Some(HostMem::PerGpu(8 * GIB)));
    // A row without them asks for what an old trace's row asks for.
    assert_eq!(reqs[5], Request::leaves(1, 900));
    for r in &reqs {
        r.validate().unwrap();
    }
}

#[test]
fn slurm_column_names_are_read() {
    let t = parse(
        "job_id,submit_s,leaves,duration_s,kind,ReqCPUS,AllocCPUS,ReqMem\n\
         1,0,1,600,train,4,8,64Gn\n\
         2,0,0,600,train,2,0,500Mc\n",
    );
    // ReqCPUS (what the job asked for) before AllocCPUS (what it was given).
    assert_eq!((t.jobs[0].cpus, t.jobs[1].cpus), (4, 2));
    assert_eq!(t.jobs[0].host_mem, Some(HostMem::PerNode(64 * GIB)));
    assert_eq!(t.jobs[1].host_mem, Some(HostMem::PerCpu(500 * MIB)));
    let helios = parse("job_id,submit_s,leaves,duration_s,kind,cpu_num\n1,0,0,60,train,6\n");
    assert_eq!((helios.jobs[0].leaves, helios.jobs[0].cpus), (0, 6));
}

#[test]
fn cores_and_memory_round_trip_through_write() {
    let t = parse(
        "job_id,submit_s,leaves,duration_s,kind,ReqCPUS,ReqMem\n\
         1,0,1,600,train,4,64G\n\
         2,0,0,600,train,2,500Mc\n\
         3,0,2,600,train,,8G/gpu\n\
         4,0,1,600,train,,0\n\
         5,0,1,600,train,,1000000B\n\
         6,0,1,600,train,,\n",
    );
    let mut out = Vec::new();
    t.write(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("job_id,submit_s,leaves,duration_s,kind,cpus,host_mem\n"));
    assert_eq!(parse(&text), t);
}

fn bad(text: &str) -> String {
    Trace::from_reader(text.as_bytes(), "t.csv")
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_values_name_the_line_and_the_column() {
    let head = "job_id,submit_s,leaves,duration_s,kind,NCPUS,ReqMem\n1,0,1,60,train,1,1G\n";
    let cases = [
        ("2,0,1,60,train,x,", "t.csv:3: NCPUS \"x\" is not a whole number of cores"),
        ("2,0,1,60,train,-2,", "t.csv:3: NCPUS \"-2\" is not a whole number of cores"),
        ("2,0,1,60,train,70000,", "t.csv:3: NCPUS \"70000\" is more than 65536 cores"),
        (
            "2,0,1,60,train,1,4000Xc",
            "t.csv:3: ReqMem \"4000Xc\" is not a host memory size such as 64G, 4000Mc (per core) or 8G/gpu",
        ),
        (
            "2,0,1,60,train,1,0c",
            "t.csv:3: ReqMem \"0c\" must be more than 0 bytes (0 per node is all of the host's memory)",
        ),
        ("2,0,1,60,train,1,2048T", "t.csv:3: ReqMem \"2048T\" is more than 1 PiB"),
        (
            "2,0,0,60,train,,1G",
            "t.csv:3: leaves \"0\" must be at least 1, or NCPUS at least 1 for a CPU-only job",
        ),
        (
            "2,0,0,60,train,2,1G/gpu",
            "t.csv:3: ReqMem \"1G/gpu\" is memory per GPU for a job of 0 leaves",
        ),
    ];
    for (row, want) in cases {
        assert_eq!(bad(&format!("{head}{row}\n")), want);
    }
    assert_eq!(
        bad("job_id,submit_s,leaves,duration_s,kind,cpus,mem_gb\n1,0,0,60,train,2,4\n"),
        "t.csv:2: mem_gb \"4\" is GPU memory for a job of 0 leaves"
    );
    // Without a cores column a 0-leaf row is the error it always was.
    assert_eq!(
        bad("job_id,submit_s,leaves,duration_s,kind\n1,0,0,60,train\n"),
        "t.csv:2: leaves \"0\" must be at least 1"
    );
}

/// Three one-leaf jobs of 40 GiB each: side by side without a memory limit, one after the other
/// on a 64 GiB host.
const MEMORY_TRACE: &str = "job_id,submit_s,leaves,duration_s,kind,host_mem
1,0,1,1000,train,40G
2,0,1,1000,train,40G
3,0,1,1000,train,40G
";

const NO_MEMORY_TRACE: &str = "job_id,submit_s,leaves,duration_s,kind
1,0,1,1000,train
2,0,1,1000,train
3,0,1,1000,train
";

fn testbed() -> Hardware {
    Hardware::load("a100-40gb-x2", 1).unwrap()
}

#[test]
fn memory_binds_only_where_the_host_has_a_size() {
    let with = parse(MEMORY_TRACE);
    let without = parse(NO_MEMORY_TRACE);
    let side_by_side = [(1, 0, 1000), (2, 0, 1000), (3, 0, 1000)];
    // The shipped testbed's 256 GiB hold all three 40 GiB jobs, as a trace without memory.
    assert_eq!(times(&run(&testbed(), ModelKind::Fm, &with)), side_by_side);
    assert_eq!(
        times(&run(&testbed(), ModelKind::Fm, &without)),
        side_by_side
    );

    let ram64 = testbed().with_host_memory(64 * GIB);
    let one_by_one = [(1, 0, 1000), (2, 1000, 2000), (3, 2000, 3000)];
    assert_eq!(times(&run(&ram64, ModelKind::Fm, &with)), one_by_one);
    assert_eq!(times(&run(&ram64, ModelKind::Fm, &without)), side_by_side);
    // The one-to-one baselines ignore host memory.
    for model in [ModelKind::Dm, ModelKind::Sm] {
        let r = run(&ram64, model, &with);
        assert!(
            r.jobs.iter().all(|j| j.start_s == 0),
            "{model}: {:?}",
            times(&r)
        );
    }
}

#[test]
fn cores_bind_and_cpu_only_jobs_run_under_flex_mig_alone() {
    // The testbed has 32 cores: the two 20-core jobs cannot run at once (FIFO: job 3 waits
    // behind job 2). At 1000 the CPU-only job takes the 12 cores left beside job 2, and no
    // leaf; with 13 cores it waits for job 2's end.
    let trace = |cores: u32| {
        parse(&format!(
            "job_id,submit_s,leaves,duration_s,kind,cpus\n\
             1,0,1,1000,train,20\n\
             2,0,1,1000,train,20\n\
             3,0,0,500,train,{cores}\n"
        ))
    };
    let r = run(&testbed(), ModelKind::Fm, &trace(12));
    assert_eq!(times(&r), [(1, 0, 1000), (2, 1000, 2000), (3, 1000, 1500)]);
    let cpu_only = r.jobs.iter().find(|j| j.id == 3).unwrap();
    assert_eq!((cpu_only.leaves, cpu_only.slices, cpu_only.need), (0, 0, 0));
    let r = run(&testbed(), ModelKind::Fm, &trace(13));
    assert_eq!(times(&r), [(1, 0, 1000), (2, 1000, 2000), (3, 2000, 2500)]);
    for model in [ModelKind::Dm, ModelKind::Sm] {
        let r = run(&testbed(), model, &trace(12));
        assert_eq!(r.not_run.len(), 1, "{model}");
        assert_eq!(r.not_run[0].id, 3);
        assert!(
            r.not_run[0].reason.contains("CPU-only"),
            "{}",
            r.not_run[0].reason
        );
        // Cores are ignored: both 20-core jobs start at once.
        assert!(
            r.jobs.iter().all(|j| j.start_s == 0),
            "{model}: {:?}",
            times(&r)
        );
    }
}

fn flexsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flexsim"))
        .args(args)
        .output()
        .expect("flexsim runs")
}

/// The makespan `flexsim run --csv` prints.
fn makespan(out: &std::process::Output) -> u64 {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8_lossy(&out.stdout);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|&h| h == "makespan_s").unwrap();
    row[i].parse().unwrap()
}

#[test]
fn a_run_names_host_memory_by_flag_or_topology() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    std::fs::write(&trace, MEMORY_TRACE).unwrap();
    let trace = trace.to_str().unwrap();
    let base = ["run", "--trace", trace, "--policy", "fifo", "--csv"];
    // With the default interference, 1.06: 1060 s a job.
    assert_eq!(makespan(&flexsim(&base)), 1060);
    let flag = [&base[..], &["--host-mem-gib", "64"]].concat();
    assert_eq!(makespan(&flexsim(&flag)), 3180);
    let no_limit = [&base[..], &["--host-mem-gib", "0"]].concat();
    assert_eq!(makespan(&flexsim(&no_limit)), 1060);

    // A topology file with memory_gib (the shipped one with 100 GiB instead of its own).
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../etc/topologies/a100-40gb-x2.toml"),
    )
    .unwrap()
    .replacen("\nmemory_gib = 256\n", "\n", 1);
    let topo = d.path().join("ram.toml");
    std::fs::write(&topo, format!("memory_gib = 100\n{shipped}")).unwrap();
    let file = [&base[..], &["--topology", topo.to_str().unwrap()]].concat();
    assert_eq!(makespan(&flexsim(&file)), 2120);
    // The flag wins over the file.
    let both = [&file[..], &["--host-mem-gib", "200"]].concat();
    assert_eq!(makespan(&flexsim(&both)), 1060);

    let out = flexsim(&[&base[..], &["--host-mem-gib", "lots"]].concat());
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_job_no_host_can_hold_is_reported_not_run() {
    let t = parse(
        "job_id,submit_s,leaves,duration_s,kind,host_mem\n1,0,1,60,train,128G\n2,0,1,60,train,1G\n",
    );
    let r = run(&testbed().with_host_memory(64 * GIB), ModelKind::Fm, &t);
    assert_eq!(r.not_run.len(), 1, "{:?}", r.not_run);
    assert_eq!(r.not_run[0].id, 1);
    assert_eq!(times(&r), [(2, 0, 60)]);
}
