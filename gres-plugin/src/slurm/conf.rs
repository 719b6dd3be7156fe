//! What `flexgres` prints for slurmd and slurmctld: gres.conf, the node line, job_submit.lua.

use super::{gres_order, gres_type, near_cores, SlurmError};
use crate::cpus::format_cpu_list;
use crate::model::{HostModel, Leaf};
use std::collections::HashMap;
use std::path::Path;

/// The driver's table of nvidia-caps minors (`/proc/driver/nvidia-caps/mig-minors`): lines
/// such as `gpu0/gi7/access 66` and `gpu0/gi7/ci0/access 67`.
#[derive(Clone, Debug, PartialEq)]
pub struct MigMinors(HashMap<String, u32>);

impl MigMinors {
    /// Parse the table's text.
    pub fn parse(text: &str) -> Result<Self, SlurmError> {
        let mut m = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let bad = || SlurmError::MigMinors {
                line: i + 1,
                text: line.to_string(),
            };
            let (name, minor) = line.split_once(char::is_whitespace).ok_or_else(bad)?;
            let minor: u32 = minor.trim().parse().map_err(|_| bad())?;
            m.insert(name.to_string(), minor);
        }
        Ok(Self(m))
    }

    /// The table the driver would write: `config 1`, `monitor 2`, then for each GPU (0..32)
    /// and GPU instance (0..15) the instance's `access` minor followed by those of its eight
    /// compute instances. Used for simulated hosts, which have no driver.
    pub fn driver_layout() -> Self {
        let mut m = HashMap::new();
        let mut minor = 3;
        for g in 0..32 {
            for gi in 0..15 {
                m.insert(format!("gpu{g}/gi{gi}/access"), minor);
                minor += 1;
                for ci in 0..8 {
                    m.insert(format!("gpu{g}/gi{gi}/ci{ci}/access"), minor);
                    minor += 1;
                }
            }
        }
        Self(m)
    }

    fn get(&self, name: &str) -> Option<u32> {
        self.0.get(name).copied()
    }
}

/// The driver's mig-minors table at `path`; `None` when the file does not exist (no driver).
pub fn read_mig_minors(path: &Path) -> Result<Option<MigMinors>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => MigMinors::parse(&t)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// How `flexgres conf` writes the lines.
#[derive(Clone, Debug)]
pub struct GresConfOptions<'a> {
    /// Prefix every line with `NodeName=`.
    pub node: Option<&'a str>,
    /// Prefix every device path (a simulated host's device files live under a directory).
    pub device_root: &'a str,
    /// One `Count=` line per type and GPU instead of device files (Slurm then sets no
    /// CUDA_VISIBLE_DEVICES; for trying a configuration out).
    pub count_only: bool,
}

/// The device files Slurm must hand a job for one leaf: the parent GPU, and for a MIG leaf the
/// capability files of its GPU instance and compute instance.
pub fn leaf_files(leaf: &Leaf, minors: &MigMinors, root: &str) -> Result<Vec<String>, SlurmError> {
    let g = leaf.gpu.0;
    let mut files = vec![format!("{root}/dev/nvidia{g}")];
    if leaf.is_mig() {
        let gi = leaf.gpu_instance.unwrap_or(u32::MAX);
        let ci = leaf.compute_instance.unwrap_or(0);
        let missing = |what| SlurmError::NoMinor {
            gpu: g,
            gi,
            ci,
            what,
        };
        let gi_minor = minors
            .get(&format!("gpu{g}/gi{gi}/access"))
            .ok_or_else(|| missing("gpu instance"))?;
        let ci_minor = minors
            .get(&format!("gpu{g}/gi{gi}/ci{ci}/access"))
            .ok_or_else(|| missing("compute instance"))?;
        files.push(format!("{root}/dev/nvidia-caps/nvidia-cap{gi_minor}"));
        files.push(format!("{root}/dev/nvidia-caps/nvidia-cap{ci_minor}"));
    }
    Ok(files)
}

/// gres.conf for this host: `AutoDetect=off` (Flex names the devices), then one `Name=gpu`
/// line per leaf in [`gres_order`], with its device files and near cores.
pub fn gres_conf(
    host: &HostModel,
    minors: &MigMinors,
    o: &GresConfOptions,
) -> Result<String, SlurmError> {
    let node = o.node.map(|n| format!("NodeName={n} ")).unwrap_or_default();
    let mut out = format!("{node}AutoDetect=off\n");
    if o.count_only {
        let mut groups: Vec<(String, u32, usize)> = Vec::new();
        for l in gres_order(host) {
            let t = gres_type(host, l);
            match groups
                .iter_mut()
                .find(|(gt, g, _)| *gt == t && *g == l.gpu.0)
            {
                Some(e) => e.2 += 1,
                None => groups.push((t, l.gpu.0, 1)),
            }
        }
        for (t, _, n) in groups {
            out.push_str(&format!("{node}Name=gpu Type={t} Count={n}\n"));
        }
        return Ok(out);
    }
    for l in gres_order(host) {
        let files = leaf_files(l, minors, o.device_root)?;
        let key = if files.len() == 1 {
            "File"
        } else {
            "MultipleFiles"
        };
        out.push_str(&format!(
            "{node}Name=gpu Type={} {key}={} Cores={}\n",
            gres_type(host, l),
            files.join(","),
            format_cpu_list(&near_cores(host, l))
        ));
    }
    Ok(out)
}

/// The `Gres=` value of the node line: `gpu:1g.5gb:12,gpu:1g.10gb:2`.
pub fn node_gres(host: &HostModel) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for l in gres_order(host) {
        let t = gres_type(host, l);
        match counts.iter_mut().find(|(c, _)| *c == t) {
            Some(e) => e.1 += 1,
            None => counts.push((t, 1)),
        }
    }
    counts
        .iter()
        .map(|(t, n)| format!("gpu:{t}:{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// slurm.conf's node line for this host, as `slurmd -C` prints it plus `Gres=`. Sockets are
/// the NUMA nodes when every NUMA node has the same number of cores.
pub fn node_line(host: &HostModel, name: &str) -> String {
    let numa = host.numa_nodes();
    let cpus = host.cores.len();
    let per = |n: u32| host.cores.iter().filter(|c| c.numa_node == n).count();
    let even = !numa.is_empty() && numa.iter().all(|&n| per(n) == per(numa[0]));
    let shape = if even {
        format!(
            " Boards=1 SocketsPerBoard={} CoresPerSocket={} ThreadsPerCore=1",
            numa.len(),
            per(numa[0])
        )
    } else {
        String::new()
    };
    let gres = node_gres(host);
    let gres = if gres.is_empty() {
        String::new()
    } else {
        format!(" Gres={gres}")
    };
    format!("NodeName={name} CPUs={cpus}{shape}{gres}\n")
}

/// The two leaf types of the size-aware rule (Flex-MIG §3.2): the smallest 1-SM-slice profile
/// for multi-leaf jobs, and the 1-SM-slice profile with the most memory for one-leaf jobs.
pub fn size_aware_types(host: &HostModel) -> Option<(String, String)> {
    let ones: Vec<&Leaf> = host
        .leaves
        .iter()
        .filter(|l| l.is_mig() && l.sm_slices == 1)
        .collect();
    let small = ones.iter().min_by_key(|l| l.memory_bytes)?;
    let large = ones.iter().max_by_key(|l| l.memory_bytes)?;
    Some((small.profile.clone(), large.profile.clone()))
}

/// job_submit.lua applying the size-aware rule to untyped GPU requests (`--gres=gpu:N`,
/// `--gpus=N`): one leaf becomes `large`, several become `small`. Typed requests pass.
pub fn job_submit_lua(small: &str, large: &str) -> String {
    include_str!("job_submit.lua")
        .replace("@SMALL@", small)
        .replace("@LARGE@", large)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{build_host, topology};

    fn a100() -> HostModel {
        build_host(&topology::parse(topology::builtin("a100-40gb-x2").unwrap(), "a").unwrap())
            .unwrap()
    }

    #[test]
    fn gres_conf_names_each_leaf_with_its_cap_files_and_near_cores() {
        let h = a100();
        let o = GresConfOptions {
            node: None,
            device_root: "",
            count_only: false,
        };
        let text = gres_conf(&h, &MigMinors::driver_layout(), &o).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "AutoDetect=off");
        assert_eq!(lines.len(), 15);
        // leaf 0 of GPU 0 is 1g.5gb at slice 0: GI 7, CI 0 → minors 3+7*9 and one more
        assert_eq!(
            lines[1],
            "Name=gpu Type=1g.5gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap66,/dev/nvidia-caps/nvidia-cap67 Cores=0-15"
        );
        assert!(lines[7].contains("/dev/nvidia1,") && lines[7].ends_with("Cores=16-31"));
        assert!(lines[13].starts_with("Name=gpu Type=1g.10gb"));
        let o = GresConfOptions {
            node: Some("n1"),
            device_root: "/tmp/x",
            count_only: true,
        };
        let text = gres_conf(&h, &MigMinors::driver_layout(), &o).unwrap();
        assert_eq!(
            text,
            "NodeName=n1 AutoDetect=off\nNodeName=n1 Name=gpu Type=1g.5gb Count=6\nNodeName=n1 Name=gpu Type=1g.5gb Count=6\nNodeName=n1 Name=gpu Type=1g.10gb Count=1\nNodeName=n1 Name=gpu Type=1g.10gb Count=1\n"
        );
    }

    #[test]
    fn the_driver_table_is_read_and_bad_lines_are_named() {
        let m = MigMinors::parse("config 1\nmonitor 2\ngpu0/gi7/access 66\n").unwrap();
        assert_eq!(m.get("gpu0/gi7/access"), Some(66));
        assert_eq!(MigMinors::driver_layout().get("gpu1/gi0/access"), Some(138));
        let e = MigMinors::parse("config 1\ngpu0 x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("gpu0 x"), "{e}");
        let h = a100();
        let e = leaf_files(&h.leaves[0], &m, "").unwrap_err().to_string();
        assert!(e.contains("gpu 0 gi 7 ci 0"), "{e}");
    }

    #[test]
    fn node_line_and_size_aware_types() {
        let h = a100();
        assert_eq!(
            node_line(&h, "gpu1"),
            "NodeName=gpu1 CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=16 ThreadsPerCore=1 Gres=gpu:1g.5gb:12,gpu:1g.10gb:2\n"
        );
        assert_eq!(
            size_aware_types(&h),
            Some(("1g.5gb".to_string(), "1g.10gb".to_string()))
        );
        let lua = job_submit_lua("1g.5gb", "1g.10gb");
        assert!(lua.contains("\"1g.10gb\"") && !lua.contains('@'));
    }
}
