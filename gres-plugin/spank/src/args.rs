//! The plugin's arguments on its plugstack.conf line.

use gres_plugin::env::{parse_nccl_mode, NcclMode};
use std::path::PathBuf;

/// What plugstack.conf says.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginArgs {
    /// The simulated topology file; `%n` becomes the node's name. None: NVML.
    pub topology: Option<String>,
    /// The NCCL variables, as flexd.toml's `nccl_mode` (default upstream).
    pub nccl: NcclMode,
}

impl PluginArgs {
    /// Parse `topology=FILE nccl=MODE nccl_lib_dir=DIR`; anything else is an error naming it.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Self, String> {
        let mut topology = None;
        let mut mode = "upstream".to_string();
        let mut lib_dir = None;
        for a in args {
            let a = a.as_ref();
            match a.split_once('=') {
                Some(("topology", v)) if !v.is_empty() => topology = Some(v.to_string()),
                Some(("nccl", v)) => mode = v.to_string(),
                Some(("nccl_lib_dir", v)) => lib_dir = Some(v.to_string()),
                _ => {
                    return Err(format!(
                        "plugstack.conf argument {a:?} is not topology=FILE, nccl=MODE or nccl_lib_dir=DIR"
                    ))
                }
            }
        }
        let nccl = parse_nccl_mode(&mode, lib_dir.as_deref())?;
        Ok(Self { topology, nccl })
    }

    /// The topology file of node `node`.
    pub fn topology_for(&self, node: &str) -> Option<PathBuf> {
        self.topology.as_ref().map(|t| t.replace("%n", node).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let a = PluginArgs::parse(&["topology=/etc/flex/%n.toml", "nccl=none"]).unwrap();
        assert_eq!(a.nccl, NcclMode::None);
        assert_eq!(
            a.topology_for("gpu7"),
            Some(PathBuf::from("/etc/flex/gpu7.toml"))
        );
        let a = PluginArgs::parse::<&str>(&[]).unwrap();
        assert_eq!((a.topology, a.nccl), (None, NcclMode::Upstream));
        let a = PluginArgs::parse(&["nccl=patched", "nccl_lib_dir=/opt/nccl"]).unwrap();
        assert_eq!(
            a.nccl,
            NcclMode::Patched {
                lib_dir: "/opt/nccl".into()
            }
        );
        let e = PluginArgs::parse(&["nccl=patched"]).unwrap_err();
        assert!(e.contains("library directory"), "{e}");
        let e = PluginArgs::parse(&["toplogy=x"]).unwrap_err();
        assert!(e.contains("\"toplogy=x\""), "{e}");
        let e = PluginArgs::parse(&["nccl=fast"]).unwrap_err();
        assert!(e.contains("\"fast\""), "{e}");
    }
}
