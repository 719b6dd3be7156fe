//! The host as Slurm's one partition and its one node, for `sinfo` and `flexcontrol show
//! partition` (scontrol's): gathered from flexd's configuration (cores, memory, features, time
//! limits), its leaf map (the leaves and who holds them) and the running jobs.

use crate::client::{into_error, Client};
use crate::error::Error;
use flex_proto::{JobState, QueueFilter, Request, Response};

/// The partition every job of a Flex host is in.
pub use crate::format::PARTITION;

/// One host, as sinfo shows a node.
#[derive(Clone, Debug, PartialEq)]
pub struct HostInfo {
    pub name: String,
    pub cpus: usize,
    pub mem_mb: u64,
    pub leaves: usize,
    pub busy_leaves: usize,
    pub running_jobs: usize,
    /// Cores the running jobs hold.
    pub alloc_cpus: usize,
    /// Host memory the running jobs hold, in MB.
    pub alloc_mem_mb: u64,
    /// `--constraint`'s words for the host (sinfo's features), `(null)` for none.
    pub features: String,
    /// Each leaf profile (`1g.5gb`, `gpu` for a whole GPU): its leaves, those held, and the
    /// NUMA nodes they sit on.
    pub gres: Vec<Gres>,
}

/// The leaves of one profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Gres {
    pub profile: String,
    pub count: usize,
    pub used: usize,
    pub numa: Vec<u32>,
}

/// The partition: its hosts and its limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub hosts: Vec<HostInfo>,
    /// `max_time_limit` in seconds (0: none).
    pub max_time_s: u64,
    /// `default_time_limit` in seconds (0: none).
    pub default_time_s: u64,
    /// `default_mem_per_cpu` in MB (0: none).
    pub def_mem_per_cpu_mb: u64,
}

impl HostInfo {
    /// The node's state as sinfo names it, compact (`idle`, `mix`, `alloc`) or long.
    pub fn state(&self, compact: bool) -> &'static str {
        let (short, long) = if self.running_jobs == 0 {
            ("idle", "idle")
        } else if self.leaves > 0 && self.busy_leaves == self.leaves {
            ("alloc", "allocated")
        } else {
            ("mix", "mixed")
        };
        if compact {
            short
        } else {
            long
        }
    }

    /// Slurm's GRES of the node: `gpu:1g.5gb:12(S:0-1),gpu:1g.10gb:2(S:0-1)`.
    pub fn gres_text(&self) -> String {
        if self.gres.is_empty() {
            return "(null)".into();
        }
        let words: Vec<String> = self
            .gres
            .iter()
            .map(|g| format!("gpu:{}:{}(S:{})", g.profile, g.count, numa_list(&g.numa)))
            .collect();
        words.join(",")
    }

    /// Slurm's GRES in use: `gpu:1g.5gb:0(IDX:N/A),gpu:1g.10gb:1(IDX:N/A)`.
    pub fn gres_used_text(&self) -> String {
        if self.gres.is_empty() {
            return "gpu:0".into();
        }
        let words: Vec<String> = self
            .gres
            .iter()
            .map(|g| format!("gpu:{}:{}(IDX:N/A)", g.profile, g.used))
            .collect();
        words.join(",")
    }
}

/// `0-1`, `0,2`: NUMA nodes as Slurm lists sockets.
fn numa_list(n: &[u32]) -> String {
    gres_plugin::topology::format_cpu_list(n)
}

/// Slurm's time limit: `UNLIMITED`/`infinite` (`none`), or `D-HH:MM:SS` / `HH:MM:SS`.
pub fn slurm_time(s: u64, none: &str) -> String {
    if s == 0 || s >= 365 * 86400 {
        return none.into();
    }
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h}:{m:02}:{sec:02}")
    }
}

/// The partition as flexd describes it now.
pub fn gather(client: &mut Client) -> Result<Partition, Error> {
    let config = match client.call(&Request::Config)? {
        Response::Config(c) => c,
        other => return Err(into_error(other)),
    };
    let maps = match client.call(&Request::LeafMap)? {
        Response::LeafMap(h) => h,
        other => return Err(into_error(other)),
    };
    let running = client.queue(QueueFilter {
        states: vec![JobState::Running],
        ..QueueFilter::default()
    })?;
    let setting = |k: &str| config.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let secs = |k: &str| {
        setting(k)
            .and_then(|v| humantime::parse_duration(&v).ok())
            .map_or(0, |d| d.as_secs())
    };
    let mut hosts = Vec::new();
    for h in maps {
        let number =
            |key: &str| setting(&format!("{key} {}", h.host)).and_then(|v| v.parse::<u64>().ok());
        let mine = || {
            running
                .iter()
                .filter_map(|j| j.alloc.as_ref().filter(|a| a.host == h.host))
        };
        let mut gres: Vec<Gres> = Vec::new();
        for l in &h.leaves {
            let i = match gres.iter().position(|g| g.profile == l.profile) {
                Some(i) => i,
                None => {
                    gres.push(Gres {
                        profile: l.profile.clone(),
                        count: 0,
                        used: 0,
                        numa: Vec::new(),
                    });
                    gres.len() - 1
                }
            };
            let g = &mut gres[i];
            g.count += 1;
            g.used += usize::from(!l.jobs.is_empty());
            if !g.numa.contains(&l.numa_node) {
                g.numa.push(l.numa_node);
                g.numa.sort_unstable();
            }
        }
        hosts.push(HostInfo {
            cpus: number("cores").unwrap_or(0) as usize,
            mem_mb: number("memory_mb").unwrap_or(0),
            leaves: h.leaves.len(),
            busy_leaves: h.leaves.iter().filter(|l| !l.jobs.is_empty()).count(),
            running_jobs: mine().count(),
            alloc_cpus: mine().map(|a| a.cores.len()).sum(),
            alloc_mem_mb: mine().map(|a| a.mem_bytes >> 20).sum(),
            features: setting(&format!("features {}", h.host))
                .filter(|f| !f.is_empty())
                .unwrap_or_else(|| "(null)".into()),
            gres,
            name: h.host,
        });
    }
    let def_mem_per_cpu_mb = match setting("default_mem_per_cpu").as_deref() {
        // The host's memory over its cores, as flexd fills it in.
        Some("auto") => hosts
            .first()
            .and_then(|h| h.mem_mb.checked_div(h.cpus as u64))
            .unwrap_or(0),
        Some(b) => b.parse::<u64>().unwrap_or(0) >> 20,
        None => 0,
    };
    Ok(Partition {
        hosts,
        max_time_s: secs("max_time_limit"),
        default_time_s: secs("default_time_limit"),
        def_mem_per_cpu_mb,
    })
}

/// Memory in MB as Slurm's TRES text writes it (`254G`, `1000M`).
fn tres_mem(mb: u64) -> String {
    if mb > 0 && mb.is_multiple_of(1024) {
        format!("{}G", mb / 1024)
    } else {
        format!("{mb}M")
    }
}

impl Partition {
    /// `scontrol show partition`: Slurm 22.05's `Key=Value` lines for the one partition, or
    /// one line each with `oneliner` (`-o`).
    pub fn show(&self, oneliner: bool) -> String {
        let cpus: usize = self.hosts.iter().map(|h| h.cpus).sum();
        let mem: u64 = self.hosts.iter().map(|h| h.mem_mb).sum();
        let gpus: usize = self.hosts.iter().map(|h| h.leaves).sum();
        let nodes: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        let mut tres = format!(
            "cpu={cpus},mem={},node={},billing={cpus}",
            tres_mem(mem),
            self.hosts.len()
        );
        if gpus > 0 {
            tres.push_str(&format!(",gres/gpu={gpus}"));
        }
        let def_mem = match self.def_mem_per_cpu_mb {
            0 => "DefMemPerNode=UNLIMITED".to_string(),
            m => format!("DefMemPerCPU={m}"),
        };
        let lines = [
            format!("PartitionName={PARTITION}"),
            "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL".into(),
            "AllocNodes=ALL Default=YES QoS=N/A".into(),
            format!(
                "DefaultTime={} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO",
                slurm_time(self.default_time_s, "NONE")
            ),
            format!(
                "MaxNodes=UNLIMITED MaxTime={} MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED",
                slurm_time(self.max_time_s, "UNLIMITED")
            ),
            format!("Nodes={}", nodes.join(",")),
            "PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO".into(),
            "OverTimeLimit=NONE PreemptMode=OFF".into(),
            format!(
                "State=UP TotalCPUs={cpus} TotalNodes={} SelectTypeParameters=NONE",
                self.hosts.len()
            ),
            "JobDefaults=(null)".into(),
            format!("{def_mem} MaxMemPerNode=UNLIMITED"),
            format!("TRES={tres}"),
        ];
        if oneliner {
            lines.join(" ") + "\n"
        } else {
            lines.join("\n   ") + "\n\n"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part() -> Partition {
        Partition {
            hosts: vec![HostInfo {
                name: "gpu01".into(),
                cpus: 32,
                mem_mb: 254 * 1024,
                leaves: 14,
                busy_leaves: 1,
                running_jobs: 1,
                alloc_cpus: 2,
                alloc_mem_mb: 1000,
                features: "a100,mig".into(),
                gres: vec![
                    Gres {
                        profile: "1g.5gb".into(),
                        count: 12,
                        used: 1,
                        numa: vec![0, 1],
                    },
                    Gres {
                        profile: "1g.10gb".into(),
                        count: 2,
                        used: 0,
                        numa: vec![0, 1],
                    },
                ],
            }],
            max_time_s: 0,
            default_time_s: 3600,
            def_mem_per_cpu_mb: 0,
        }
    }

    #[test]
    fn the_partition_as_scontrol_shows_it() {
        let text = part().show(false);
        assert!(
            text.starts_with("PartitionName=flex\n   AllowGroups=ALL"),
            "{text}"
        );
        assert!(
            text.contains("\n   MaxNodes=UNLIMITED MaxTime=UNLIMITED "),
            "{text}"
        );
        assert!(text.contains("DefaultTime=1:00:00 "), "{text}");
        assert!(text.contains(" TotalCPUs=32 TotalNodes=1 "), "{text}");
        assert!(text.contains("DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED"));
        assert!(text.ends_with("TRES=cpu=32,mem=254G,node=1,billing=32,gres/gpu=14\n\n"));
        let one = part().show(true);
        assert_eq!(one.lines().count(), 1);
        assert!(one.contains("PartitionName=flex AllowGroups=ALL "), "{one}");
    }

    #[test]
    fn gres_as_slurm_lists_it() {
        let h = &part().hosts[0];
        assert_eq!(h.gres_text(), "gpu:1g.5gb:12(S:0-1),gpu:1g.10gb:2(S:0-1)");
        assert_eq!(
            h.gres_used_text(),
            "gpu:1g.5gb:1(IDX:N/A),gpu:1g.10gb:0(IDX:N/A)"
        );
        assert_eq!(h.state(true), "mix");
        assert_eq!(slurm_time(2 * 86400 + 3600, "x"), "2-01:00:00");
    }
}
