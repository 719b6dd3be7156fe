//! Flex's SPANK plugin for Slurm, loaded by one plugstack.conf line:
//!
//! ```text
//! required /usr/lib/flex/libflex_spank.so topology=/etc/flex/%n.toml nccl=upstream
//! ```
//!
//! In each task of a step with GPUs it gives the task its own leaf (the LOCALID-th of the
//! step's devices on this node) as `CUDA_VISIBLE_DEVICES=MIG-...`, Flex's rank and NCCL
//! variables (`gres_plugin::env::slot_env`, the same contract as flexrun), and binds the task
//! to its leaf's near cores unless Slurm's task/affinity bound it already. Steps without GPUs
//! are left alone. The batch step (and the extern and interactive steps) keep every GPU of the
//! job and only learn `FLEX_TOPOLOGY` and the NCCL mode, so flexrun inside them works.
//!
//! A fault fails the task (its message goes to the job's stderr and slurmd's log); it never
//! panics across the C boundary and never takes slurmd down.

pub mod args;
mod ffi;

use args::PluginArgs;
use ffi::Spank;
use gres_plugin::cpus::{bind_cores, online_cores, parse_cpu_list};
use gres_plugin::env::NcclMode;
use gres_plugin::slurm::step::{already_bound, step_devices, step_leaves, task_env, TaskIds};
use gres_plugin::HostModel;
use std::ffi::{c_char, c_int, c_uint, CStr};

/// The symbols Slurm's plugin loader looks up (spank.h's SPANK_PLUGIN macro).
#[no_mangle]
pub static plugin_name: [u8; 5] = *b"flex\0";
#[no_mangle]
pub static plugin_type: [u8; 6] = *b"spank\0";
#[no_mangle]
pub static plugin_version: c_uint = parse_u32(env!("FLEX_SPANK_PLUGIN_VERSION"));

/// The Slurm release series this plugin was built for ("22.05").
pub const SLURM_SERIES: &str = env!("FLEX_SPANK_SLURM_SERIES");

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut v = 0u32;
    let mut i = 0;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

/// Step ids at and above this are Slurm's special steps (batch, extern, interactive, pending).
const FIRST_SPECIAL_STEP: u32 = 0xffff_fff0;

/// slurmstepd calls this in each task, as the user, just before it execs the task.
///
/// # Safety
/// Called by slurmstepd with its live handle and `argc` valid C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(
    sp: Spank,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let args: Vec<String> = (0..argc.max(0) as usize)
        .map(|i| {
            // SAFETY: slurmstepd passes `argc` valid NUL-terminated strings in `argv`.
            unsafe { CStr::from_ptr(*argv.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    match std::panic::catch_unwind(|| task_init(sp, &args)) {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => fail(&msg),
        Err(_) => fail("internal error (a panic); please report it"),
    }
}

/// Report a fault: slurmstepd's error log reaches the task's stderr (the job's output) and
/// slurmd's log; -1 makes slurmstepd end this task with an error.
fn fail(msg: &str) -> c_int {
    ffi::log_error(&format!("flex-spank: {msg}"));
    -1
}

fn task_init(sp: Spank, args: &[String]) -> Result<(), String> {
    let get = |k: &str| ffi::getenv(sp, k);
    let Some(devices) = step_devices(&get).map_err(|e| e.to_string())? else {
        return Ok(()); // no GPU in this step: nothing to do
    };
    let a = PluginArgs::parse(args)?;
    let node = get("SLURMD_NODENAME").unwrap_or_default();
    let topology = a.topology_for(&node);
    let host = host_model(topology.as_deref())?;
    if let Some(t) = &topology {
        ffi::setenv(sp, "FLEX_TOPOLOGY", &t.display().to_string())?;
    }
    ffi::setenv(sp, "FLEX_NCCL_MODE", a.nccl.name())?;
    if let NcclMode::Patched { lib_dir } = &a.nccl {
        ffi::setenv(sp, "FLEX_NCCL_LIB_DIR", &lib_dir.display().to_string())?;
    }
    let step = ffi::item_u32(sp, ffi::S_JOB_STEPID)?;
    if step >= FIRST_SPECIAL_STEP {
        return Ok(()); // the batch script keeps all its GPUs (flexrun splits them)
    }
    let leaves = step_leaves(&devices, host.as_ref()).map_err(|e| e.to_string())?;
    let ids = TaskIds {
        job_id: ffi::item_u32(sp, ffi::S_JOB_ID)?.into(),
        rank: ffi::item_u32(sp, ffi::S_TASK_GLOBAL_ID)? as usize,
        local_rank: usize::try_from(ffi::item_int(sp, ffi::S_TASK_ID)?)
            .map_err(|_| "negative local task id".to_string())?,
        world_size: ffi::item_u32(sp, ffi::S_JOB_TOTAL_TASK_COUNT)? as usize,
        local_world_size: ffi::item_u32(sp, ffi::S_JOB_LOCAL_TASK_COUNT)? as usize,
    };
    let nodelist = get("SLURM_STEP_NODELIST")
        .or_else(|| get("SLURM_JOB_NODELIST"))
        .ok_or("neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set")?;
    let ld = get("LD_LIBRARY_PATH");
    let vars =
        task_env(&ids, &leaves, &nodelist, &a.nccl, ld.as_deref()).map_err(|e| e.to_string())?;
    for (k, v) in &vars {
        ffi::setenv(sp, k, v)?;
    }
    let cores = &leaves[ids.local_rank].cores;
    bind(cores, get("SLURM_CPU_BIND_TYPE").as_deref())
}

/// The host model: the topology file when one is named, else NVML (None where NVML finds no
/// GPU: then only MIG UUIDs from Slurm can be used, without near cores).
fn host_model(topology: Option<&std::path::Path>) -> Result<Option<HostModel>, String> {
    use gres_plugin::probe::{build_host, discover_file, Probe, ProbeError};
    if let Some(t) = topology {
        return discover_file(t)
            .map(|d| Some(d.host))
            .map_err(|e| e.to_string());
    }
    match gres_plugin::probe::nvml::NvmlProbe.probe() {
        Ok(raw) => build_host(&raw).map(Some).map_err(|e| e.to_string()),
        Err(ProbeError::Absent(_)) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Bind this process (the task, before its exec) to the leaf's near cores, folded onto the
/// cores that exist here, unless Slurm bound it already.
fn bind(model_cores: &[u32], cpu_bind_type: Option<&str>) -> Result<(), String> {
    let online = online_cores();
    let allowed = allowed_cores()?;
    if model_cores.is_empty() || already_bound(cpu_bind_type, &allowed, &online) {
        return Ok(());
    }
    let cores = bind_cores(model_cores, &online);
    if cores.is_empty() {
        return Ok(());
    }
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set that CPU_ZERO makes.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in &cores {
        if (c as usize) < libc::CPU_SETSIZE as usize {
            // SAFETY: `c` is below CPU_SETSIZE, the size of `set`.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
    }
    // SAFETY: pid 0 is this process; `set` is an initialized cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(format!(
            "cannot bind the task to cores {cores:?}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The cores this process may run on now.
fn allowed_cores() -> Result<Vec<u32>, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or("/proc/self/status has no Cpus_allowed_list")?;
    parse_cpu_list(list.trim())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_stamp_is_a_release_series() {
        let v = super::plugin_version;
        assert_eq!(v & 0xff, 0, "micro is left out");
        let (major, minor) = super::SLURM_SERIES.split_once('.').unwrap();
        assert_eq!(v >> 16, major.parse::<u32>().unwrap());
        assert_eq!((v >> 8) & 0xff, minor.parse::<u32>().unwrap());
    }
}
