//! Host memory in a trace's `host_mem` (or `ReqMem`) column: Slurm's sizes and the four ways
//! they count ([`HostMem`]), read and written back.

use gres_plugin::HostMem;

/// More memory than any host (1 PiB): a guard against a size in the wrong unit.
const MAX_HOST_MEM: f64 = (1u64 << 50) as f64;
const MIB: u64 = 1 << 20;

/// Host memory as Slurm writes it: a number (decimals allowed) with an optional binary unit,
/// `B`, `K`, `M`, `G` or `T` (also `KB`, `KiB`, ..., any case; none is MiB, as in `--mem` and
/// sacct's `ReqMem`), then how it counts: nothing or `n` per node (`64G`, `64Gn`), `c` per core
/// (`4000Mc`), or `/node`, `/cpu`, `/gpu` (as flexsub prints requests). 0 per node is all of the
/// host's memory (`--mem=0`).
pub fn host_mem(s: &str) -> Result<HostMem, &'static str> {
    const WHAT: &str = "is not a host memory size such as 64G, 4000Mc (per core) or 8G/gpu";
    let lower = s.trim().to_ascii_lowercase();
    let (body, per): (&str, fn(u64) -> HostMem) = [
        ("/node", HostMem::PerNode as fn(u64) -> HostMem),
        ("/cpu", HostMem::PerCpu),
        ("/gpu", HostMem::PerGpu),
        ("n", HostMem::PerNode),
        ("c", HostMem::PerCpu),
    ]
    .into_iter()
    .find_map(|(suffix, per)| lower.strip_suffix(suffix).map(|b| (b, per)))
    .unwrap_or((&lower, HostMem::PerNode));
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, unit) = body.split_at(split);
    let mult = match unit {
        "" => MIB,
        "b" => 1,
        u => match u.strip_suffix("ib").or(u.strip_suffix('b')).unwrap_or(u) {
            "k" => 1 << 10,
            "m" => MIB,
            "g" => 1 << 30,
            "t" => 1 << 40,
            _ => return Err(WHAT),
        },
    };
    let n: f64 = num.parse().map_err(|_| WHAT)?;
    let bytes = (n * mult as f64).ceil();
    if !bytes.is_finite() {
        return Err(WHAT);
    }
    if bytes > MAX_HOST_MEM {
        return Err("is more than 1 PiB");
    }
    match (bytes as u64, per(0)) {
        (0, HostMem::PerNode(_)) => Ok(HostMem::All),
        (0, _) => Err("must be more than 0 bytes (0 per node is all of the host's memory)"),
        (b, _) => Ok(per(b)),
    }
}

/// The `host_mem` field of a host memory request, which [`host_mem`] reads back.
pub(super) fn host_mem_field(m: HostMem) -> String {
    let size = |b: u64| {
        if b.is_multiple_of(MIB) {
            format!("{}M", b / MIB)
        } else {
            format!("{b}B")
        }
    };
    match m {
        HostMem::PerNode(b) => size(b),
        HostMem::PerCpu(b) => format!("{}c", size(b)),
        HostMem::PerGpu(b) => format!("{}/gpu", size(b)),
        HostMem::All => "0".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_in_slurm_spellings() {
        const G: u64 = 1 << 30;
        let cases = [
            ("64G", HostMem::PerNode(64 * G)),
            ("64Gn", HostMem::PerNode(64 * G)),
            ("4000Mc", HostMem::PerCpu(4000 * MIB)),
            ("4000", HostMem::PerNode(4000 * MIB)),
            ("1.5GiB", HostMem::PerNode(3 * G / 2)),
            ("512kb", HostMem::PerNode(512 << 10)),
            ("100B", HostMem::PerNode(100)),
            ("8G/gpu", HostMem::PerGpu(8 * G)),
            ("2g/cpu", HostMem::PerCpu(2 * G)),
            ("1T/node", HostMem::PerNode(1 << 40)),
            ("0", HostMem::All),
            ("0n", HostMem::All),
        ];
        for (s, want) in cases {
            assert_eq!(host_mem(s), Ok(want), "{s}");
            assert_eq!(host_mem(&host_mem_field(want)), Ok(want), "{s}");
        }
        for s in ["", "G", "64X", "-1G", "1e3G", "0c", "nan", "4096T"] {
            assert!(host_mem(s).is_err(), "{s}");
        }
    }
}
