//! Slurm refuses a plugin whose `plugin_version` is of another release series (X.YY): stamp the
//! series of the Slurm this is built for. `FLEX_SLURM_VERSION=23.11` names it; otherwise it is
//! read from `srun --version`; with neither, Debian 12's 22.05.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=FLEX_SLURM_VERSION");
    println!("cargo:rerun-if-changed=build.rs");
    let (text, from) = match std::env::var("FLEX_SLURM_VERSION") {
        Ok(v) => (v, "FLEX_SLURM_VERSION"),
        Err(_) => match Command::new("srun").arg("--version").output() {
            // "slurm-wlm 22.05.8" or "slurm 23.11.4"
            Ok(o) if o.status.success() => (
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_string(),
                "srun --version",
            ),
            _ => ("22.05".to_string(), "the default"),
        },
    };
    let mut parts = text.trim().split('.');
    let num = |p: Option<&str>| p.and_then(|s| s.parse::<u32>().ok());
    let (Some(major), Some(minor)) = (num(parts.next()), num(parts.next())) else {
        panic!("flex-spank: Slurm version {text:?} (from {from}) is not MAJOR.MINOR[.MICRO]");
    };
    println!("cargo:rustc-env=FLEX_SPANK_SLURM_SERIES={major}.{minor:02}");
    println!(
        "cargo:rustc-env=FLEX_SPANK_PLUGIN_VERSION={}",
        (major << 16) | (minor << 8)
    );
}
