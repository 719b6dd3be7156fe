//! From the host model's cores to the CPUs a job is bound to. On real hardware they are the
//! same; a simulated topology may name more cores than the machine has (32 on a 2-core box),
//! and then model core `c` binds to online CPU number `c % online`. `FLEX_CPUS` always reports
//! the model's cores.

use gres_plugin::topology::format_cpu_list;

/// How model cores become CPUs for `sched_setaffinity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CpuMap {
    /// CPUs this process may run on, ascending.
    online: Vec<u32>,
    /// Every model core is an online CPU: bind to exactly those.
    identity: bool,
}

impl CpuMap {
    /// Compare the model's cores with the CPUs online here. The message (to log once) says
    /// when they differ.
    pub(crate) fn new(model_cores: &[u32], online: Vec<u32>) -> (CpuMap, Option<String>) {
        let identity = model_cores.iter().all(|c| online.binary_search(c).is_ok());
        let note = (!identity).then(|| {
            if online.is_empty() {
                "no online CPU could be read: jobs are not bound to cores".to_string()
            } else {
                format!(
                    "the host model names cores {} but this machine runs on CPUs {}: \
                     a job's core c is bound to online CPU number c mod {} \
                     (FLEX_CPUS still reports the model's cores)",
                    format_cpu_list(model_cores),
                    format_cpu_list(&online),
                    online.len()
                )
            }
        });
        (CpuMap { online, identity }, note)
    }

    /// The CPUs this process may run on.
    pub(crate) fn detect(model_cores: &[u32]) -> (CpuMap, Option<String>) {
        let online = match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
            Ok(set) => (0..nix::sched::CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .map(|c| c as u32)
                .collect(),
            Err(_) => Vec::new(),
        };
        Self::new(model_cores, online)
    }

    /// The CPUs to bind a job with these model cores to; empty means "do not bind".
    pub(crate) fn map(&self, cores: &[u32]) -> Vec<u32> {
        if self.identity {
            return cores.to_vec();
        }
        if self.online.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<u32> = cores
            .iter()
            .map(|&c| self.online[c as usize % self.online.len()])
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_cores_bind_as_they_are() {
        let (m, note) = CpuMap::new(&[0, 1, 2, 3], vec![0, 1, 2, 3, 4]);
        assert!(note.is_none());
        assert_eq!(m.map(&[3, 1]), vec![3, 1]);
    }

    #[test]
    fn simulated_cores_wrap_onto_online_cpus() {
        let model: Vec<u32> = (0..32).collect();
        let (m, note) = CpuMap::new(&model, vec![0, 1]);
        assert!(note.unwrap().contains("mod 2"));
        assert_eq!(m.map(&[16, 17, 18]), vec![0, 1]);
        assert_eq!(m.map(&[5]), vec![1]);
        let (m, _) = CpuMap::new(&model, vec![]);
        assert!(m.map(&[1]).is_empty());
    }
}
