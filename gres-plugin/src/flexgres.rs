//! `flexgres`: this host's GPUs as Slurm wants them: gres.conf lines, the node line, and an
//! optional job_submit.lua with Flex-MIG's size-aware rule. The host model comes from NVML,
//! else the simulated topology file, as flexd finds it.

use crate::probe::{discover, discover_file, Discovered};
use crate::slurm::conf::{
    gres_conf, job_submit_lua, node_line, read_mig_minors, size_aware_types, GresConfOptions,
    MigMinors,
};
use clap::{Args as ClapArgs, Parser, Subcommand};
use std::path::PathBuf;

/// Export this host's MIG leaves to Slurm.
#[derive(Debug, Parser)]
#[command(name = "flexgres", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print gres.conf lines: one per MIG leaf, with its device files and near cores
    /// (accepted by `slurmd -G`).
    Conf {
        #[command(flatten)]
        host: HostArgs,
        /// Prefix each line with NodeName=NAME (one gres.conf for several nodes).
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        /// One Count= line per profile and GPU, without device files (for trying Slurm out;
        /// Slurm then sets no CUDA_VISIBLE_DEVICES).
        #[arg(long)]
        count_only: bool,
        /// Directory prefixed to every device path (a simulated host's device files).
        #[arg(long, value_name = "DIR", default_value = "")]
        device_root: String,
        /// The driver's table of MIG capability minors.
        #[arg(
            long,
            value_name = "FILE",
            default_value = "/proc/driver/nvidia-caps/mig-minors"
        )]
        mig_minors: PathBuf,
    },
    /// Print slurm.conf's NodeName line for this host, with Gres= (compare `slurmd -C`).
    Node {
        #[command(flatten)]
        host: HostArgs,
        /// The node's name in slurm.conf (default: the host's name).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Print a job_submit.lua that gives untyped GPU requests Flex-MIG's size-aware leaf type
    /// (optional; for slurmctld's JobSubmitPlugins=lua).
    JobSubmit {
        #[command(flatten)]
        host: HostArgs,
        /// The leaf type of multi-leaf jobs (default: the smallest 1-slice MIG profile here).
        #[arg(long, value_name = "PROFILE")]
        small: Option<String>,
        /// The leaf type of one-leaf jobs (default: the 1-slice MIG profile with the most memory).
        #[arg(long, value_name = "PROFILE")]
        large: Option<String>,
    },
}

/// Where the host model comes from.
#[derive(Debug, ClapArgs)]
pub struct HostArgs {
    /// The simulated topology file used when NVML finds no GPU (a shipped name such as
    /// a100-40gb-x2.toml, or a path).
    #[arg(long, value_name = "FILE", default_value = "a100-40gb-x2.toml")]
    pub topology: PathBuf,
    /// Use the topology file even where NVML finds GPUs.
    #[arg(long)]
    pub force_topology: bool,
}

impl HostArgs {
    fn discover(&self) -> Result<Discovered, String> {
        let found = if self.force_topology {
            discover_file(&self.topology)
        } else {
            discover(&self.topology, false)
        };
        found.map_err(|e| e.to_string())
    }
}

/// Run one command; the text to print, or an error message.
pub fn run(cli: &Cli) -> Result<String, String> {
    match &cli.command {
        Command::Conf {
            host,
            node,
            count_only,
            device_root,
            mig_minors,
        } => {
            let found = host.discover()?;
            let simulated = found.source != "nvml";
            // Without device files, or without a MIG GPU, no capability minor is written.
            let any_mig = found.host.gpus.iter().any(|g| g.mig);
            let table = if *count_only || !any_mig {
                Some(MigMinors::driver_layout())
            } else {
                read_mig_minors(mig_minors)?
            };
            let (minors, note) = match table {
                Some(m) => (m, String::new()),
                None if simulated => (
                    MigMinors::driver_layout(),
                    format!(
                        "# {} does not exist: capability minors follow the driver's fixed layout\n",
                        mig_minors.display()
                    ),
                ),
                None => {
                    return Err(format!(
                        "{} does not exist: is the NVIDIA driver loaded with MIG capabilities (nvidia-caps)?",
                        mig_minors.display()
                    ))
                }
            };
            let o = GresConfOptions {
                node: node.as_deref(),
                device_root: device_root.trim_end_matches('/'),
                count_only: *count_only,
            };
            let body = gres_conf(&found.host, &minors, &o).map_err(|e| e.to_string())?;
            Ok(format!(
                "# gres.conf for {} from {} (flexgres conf)\n# Slurm numbers the GPUs in this order; Flex's SPANK plugin maps them back.\n{note}{body}",
                found.host.hostname, found.source
            ))
        }
        Command::Node { host, name } => {
            let found = host.discover()?;
            let name = name.clone().unwrap_or_else(|| found.host.hostname.clone());
            Ok(node_line(&found.host, &name))
        }
        Command::JobSubmit { host, small, large } => {
            let (s, l) = match (small, large) {
                (Some(s), Some(l)) => (s.clone(), l.clone()),
                _ => {
                    let found = host.discover()?;
                    let (s0, l0) = size_aware_types(&found.host).ok_or_else(|| {
                        format!(
                            "{} has no 1-slice MIG leaf: give --small and --large",
                            found.host.hostname
                        )
                    })?;
                    (small.clone().unwrap_or(s0), large.clone().unwrap_or(l0))
                }
            };
            for p in [&s, &l] {
                if p.is_empty()
                    || !p
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '+')
                {
                    return Err(format!("{p:?} is not a MIG profile name"));
                }
            }
            Ok(job_submit_lua(&s, &l))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> Result<String, String> {
        let mut v = vec!["flexgres"];
        v.extend(args);
        run(&Cli::try_parse_from(v).map_err(|e| e.to_string())?)
    }

    #[test]
    fn commands_print_slurm_lines_and_name_bad_values() {
        let t = ["--topology", "a100-40gb-x2.toml", "--force-topology"];
        let conf = run_args(&[&["conf"], &t[..], &["--count-only"]].concat()).unwrap();
        assert!(
            conf.contains("\nAutoDetect=off\nName=gpu Type=1g.5gb Count=6\n"),
            "{conf}"
        );
        assert!(!conf.contains("mig-minors"), "{conf}");
        let node = run_args(&[&["node"], &t[..], &["--name", "g1"]].concat()).unwrap();
        assert!(node.starts_with("NodeName=g1 CPUs=32 "), "{node}");
        let lua = run_args(&[&["job-submit"], &t[..]].concat()).unwrap();
        assert!(lua.contains("local LARGE = \"1g.10gb\""), "{lua}");
        // Whole GPUs have no MIG capability files: the minor table is not looked for.
        let p4 = ["--topology", "p4-x4.toml", "--force-topology"];
        let conf =
            run_args(&[&["conf"], &p4[..], &["--mig-minors", "/nonexistent/m"]].concat()).unwrap();
        assert!(!conf.contains("/nonexistent/m"), "{conf}");
        assert!(conf.contains(" File=/dev/nvidia0 "), "{conf}");
        let e = run_args(&["job-submit", "--small", "1g 5gb", "--large", "1g.10gb"]).unwrap_err();
        assert!(e.contains("\"1g 5gb\""), "{e}");
        let e = run_args(&[
            "conf",
            "--force-topology",
            "--topology",
            "/nonexistent/t.toml",
        ])
        .unwrap_err();
        assert!(e.contains("/nonexistent/t.toml"), "{e}");
        let e = run_args(
            &[&["job-submit", "--topology", "p4-x4.toml", "--force-topology"][..]].concat(),
        )
        .unwrap_err();
        assert!(e.contains("no 1-slice MIG leaf"), "{e}");
    }
}
