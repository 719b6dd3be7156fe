//! Config (`flexcontrol show config`): flexd's settings, the host's resources as the scheduler
//! counts them, and where each job limit is enforced, as `KEY`, value pairs.

use crate::config::Settings;
use crate::state::State;
use flex_proto::Response;

pub(crate) fn config(s: &Settings, st: &State, enforced: &[(String, String)]) -> Response {
    let mut out: Vec<(String, String)> = s
        .shown()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for (id, h) in st.cluster.hosts() {
        let (mem, _) = st.cluster.memory(id);
        out.push((format!("host {}", h.hostname), host_line(h, mem)));
        out.push((
            format!("features {}", h.hostname),
            super::submit::host_features(h).join(","),
        ));
        // The same in numbers, for programs (sinfo's %c and %m: Slurm's CPUs and RealMemory).
        out.push((format!("cores {}", h.hostname), h.cores.len().to_string()));
        if let Some(m) = mem {
            out.push((format!("memory_mb {}", h.hostname), (m >> 20).to_string()));
        }
    }
    // Each QOS in Slurm's words, for sacctmgr's `show qos` and the QOS of an association.
    for (name, q) in &s.priority.qos {
        out.push((format!("qos {name}"), qos_line(q)));
    }
    out.push(("default_qos".into(), s.priority.default_qos.clone()));
    out.extend(enforced.iter().cloned());
    Response::Config(out)
}

/// `Priority=100 MaxWall=3600 MaxJobsPU=2 MaxSubmitPU=0 MaxTRESPU=gres/gpu=4 Users=ann,bob`:
/// 0 for no limit, `Users=ALL` when everyone may use it.
fn qos_line(q: &crate::fairshare::Qos) -> String {
    let users = if q.users.is_empty() {
        "ALL".to_string()
    } else {
        q.users.join(",")
    };
    format!(
        "Priority={} MaxWall={} MaxJobsPU={} MaxSubmitPU={} MaxTRESPU=gres/gpu={} Users={users}",
        q.priority,
        q.max_time_limit,
        q.max_running_jobs_per_user,
        q.max_submit_jobs_per_user,
        q.max_running_leaves_per_user
    )
}

/// `14 leaves on 2 GPUs, 32 cores, 256.0 GiB of RAM (254.0 GiB for jobs)`.
fn host_line(h: &gres_plugin::HostModel, schedulable: Option<u64>) -> String {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let mem = match schedulable {
        Some(m) => format!(
            "{:.1} GiB of RAM ({:.1} GiB for jobs)",
            gib(h.memory_bytes),
            gib(m)
        ),
        None => "RAM unknown (host memory is not limited)".into(),
    };
    format!(
        "{} leaves on {} GPUs, {} cores, {mem}",
        h.leaves.len(),
        h.gpus.len(),
        h.cores.len()
    )
}
