//! Simulated topology files (TOML): a host described by hand, for machines without GPUs, for
//! flexsim and for tests. The shipped files live in `etc/topologies/` and are also compiled in.

use super::interface::{Probe, ProbeError, RawGpu, RawHost, RawMig};
/// Core lists, kept reachable here (`gres_plugin::topology::parse_cpu_list`) for existing callers.
pub use crate::cpus::{format_cpu_list, parse_cpu_list};
use crate::ids::CoreId;
use crate::mig::{layout, parse_profile, Profile};
use crate::model::{Core, LinkLevel};
use crate::telemetry::Simulated;
use serde::Deserialize;
use std::path::PathBuf;

/// The topology files shipped in `etc/topologies/`, by file name.
pub const BUILTIN: [(&str, &str); 3] = [
    (
        "a100-40gb-x2.toml",
        include_str!("../../../etc/topologies/a100-40gb-x2.toml"),
    ),
    (
        "h100-80gb-x8.toml",
        include_str!("../../../etc/topologies/h100-80gb-x8.toml"),
    ),
    (
        "p4-x4.toml",
        include_str!("../../../etc/topologies/p4-x4.toml"),
    ),
];

/// A shipped topology by file name (with or without `.toml`).
pub fn builtin(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".toml").unwrap_or(name);
    BUILTIN
        .iter()
        .find(|(f, _)| f.strip_suffix(".toml") == Some(name))
        .map(|(_, t)| *t)
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read topology file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("topology {origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("topology {origin}: {message}")]
    Invalid { origin: String, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    hostname: Option<String>,
    /// The host's RAM; unset: unknown (flexd then reads its own host's).
    memory_gib: Option<f64>,
    #[serde(default)]
    numa: Vec<Numa>,
    #[serde(default)]
    gpu: Vec<GpuEntry>,
    #[serde(default)]
    nvlink: Vec<NvLink>,
    /// A file of simulated GPU telemetry samples for the leaves (`crate::telemetry::file`),
    /// relative to this file's directory.
    telemetry: Option<String>,
    /// A directory laid out as `/` for the GPUs' device nodes (`dev/nvidiaN`,
    /// `dev/nvidia-caps/nvidia-capM`, `proc/driver/nvidia-caps/mig-minors`, `proc/devices`),
    /// relative to this file's directory: where flexd finds the numbers of the devices it
    /// denies to the jobs not given them. None: the simulated GPUs have no device nodes.
    device_root: Option<String>,
    /// A seed for simulated GPU telemetry drawn per job (`crate::telemetry::gen`).
    telemetry_seed: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Numa {
    id: u32,
    /// A core list such as `0-15` or `0-7,16-23`.
    cores: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuEntry {
    index: u32,
    name: String,
    memory_gib: f64,
    numa: u32,
    host_bridge: Option<u32>,
    pcie_switch: Option<u32>,
    pci_bus_id: Option<String>,
    #[serde(default)]
    mig: Vec<MigEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MigEntry {
    profile: String,
    #[serde(default = "one")]
    count: u32,
    /// Usable memory; defaults to 95% of the profile's share of the card.
    memory_mib: Option<u64>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NvLink {
    /// Two GPU indexes, or leave out for every pair.
    gpus: Option<[u32; 2]>,
    links: u8,
}

/// A stable, well-formed UUID (RFC 4122 layout, version 5 nibble) from a name, so simulated
/// GPUs and leaves keep their UUIDs across restarts and differ from each other.
pub fn stable_uuid(prefix: &str, name: &str) -> String {
    // Two independent FNV-1a 64-bit hashes make 128 bits.
    let h = |seed: u64| {
        name.bytes().fold(seed, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    // splitmix64's finalizer spreads FNV's small differences (gpu0/leaf1 vs gpu0/leaf2) over
    // every digit, so neighbouring leaves do not look alike.
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (mix(h(0xcbf2_9ce4_8422_2325)), mix(h(0x6c62_272e_07bb_0142)));
    let a = (a & !0xf000) | 0x5000; // version 5
    let b = (b & !(0xc000 << 48)) | (0x8000 << 48); // RFC 4122 variant
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// The simulated telemetry a topology's text names: `telemetry = "FILE"` (resolved against
/// `dir`, the topology file's directory) or `telemetry_seed = N`; None when it names neither.
pub fn telemetry_source(
    text: &str,
    origin: &str,
    dir: &std::path::Path,
) -> Result<Option<Simulated>, TopologyError> {
    let file: File = toml::from_str(text).map_err(|e| TopologyError::Syntax {
        origin: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    match (file.telemetry, file.telemetry_seed) {
        (Some(_), Some(_)) => Err(TopologyError::Invalid {
            origin: origin.to_string(),
            message: "telemetry (a samples file) and telemetry_seed (a generator) name two \
                      telemetry sources; keep one"
                .into(),
        }),
        (Some(f), None) => Ok(Some(Simulated::File(dir.join(f)))),
        (None, Some(seed)) => Ok(Some(Simulated::Seed(seed))),
        (None, None) => Ok(None),
    }
}

/// Parse a topology file's text into probe output. `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<RawHost, TopologyError> {
    let file: File = toml::from_str(text).map_err(|e| TopologyError::Syntax {
        origin: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    let bad = |message: String| TopologyError::Invalid {
        origin: origin.to_string(),
        message,
    };
    let hostname = file.hostname.unwrap_or_else(|| "localhost".into());
    let cores = numa_cores(&file.numa).map_err(bad)?;
    let mut gpus = Vec::new();
    for g in &file.gpu {
        if gpus.iter().any(|x: &RawGpu| x.index == g.index) {
            return Err(bad(format!("gpu index {} appears twice", g.index)));
        }
        gpus.push(raw_gpu(g, &file.numa, &cores, &hostname).map_err(bad)?);
    }
    gpus.sort_by_key(|g| g.index);
    let pcie = pcie_levels(&file.gpu, &gpus);
    let nvlinks = nvlink_counts(&file.nvlink, &gpus).map_err(bad)?;
    let memory_bytes = match file.memory_gib {
        None => 0,
        Some(g) if g.is_finite() && g > 0.0 && g <= (1u64 << 24) as f64 => {
            (g * (1u64 << 30) as f64) as u64
        }
        Some(g) => return Err(bad(format!("memory_gib {g} is not a size in GiB"))),
    };
    Ok(RawHost {
        hostname,
        gpus,
        pcie,
        nvlinks,
        cores,
        memory_bytes,
    })
}

/// The host's cores from the `[[numa]]` entries, each core listed once; errors are messages
/// that [`parse`] prefixes with the file's name.
fn numa_cores(numa: &[Numa]) -> Result<Vec<Core>, String> {
    if numa.is_empty() {
        return Err("no [[numa]] node with cores".into());
    }
    let mut cores = Vec::new();
    // A set, not a search of `cores`: a range may list 65,536 cores.
    let mut seen = std::collections::HashSet::new();
    for n in numa {
        let list = parse_cpu_list(&n.cores).map_err(|e| format!("numa {}: {e}", n.id))?;
        if list.is_empty() {
            return Err(format!("numa {}: no cores", n.id));
        }
        for c in list {
            if !seen.insert(c) {
                return Err(format!("core {c} is listed twice"));
            }
            cores.push(Core {
                id: CoreId(c),
                numa_node: n.id,
            });
        }
    }
    Ok(cores)
}

/// One `[[gpu]]` entry checked and turned into probe output, with stable simulated UUIDs and
/// the cores of its NUMA node as its affinity.
fn raw_gpu(g: &GpuEntry, numa: &[Numa], cores: &[Core], hostname: &str) -> Result<RawGpu, String> {
    if !numa.iter().any(|n| n.id == g.numa) {
        return Err(format!(
            "gpu {}: numa node {} has no [[numa]] entry",
            g.index, g.numa
        ));
    }
    if !(g.memory_gib.is_finite() && g.memory_gib > 0.0 && g.memory_gib <= 4096.0) {
        return Err(format!(
            "gpu {}: memory_gib {} is not a size in GiB",
            g.index, g.memory_gib
        ));
    }
    let memory_bytes = (g.memory_gib * (1u64 << 30) as f64) as u64;
    let gpu_uuid = stable_uuid("GPU", &format!("flex-sim/{hostname}/gpu{}", g.index));
    let instances = mig_instances(g, memory_bytes, hostname)?;
    let numa_cores: Vec<u32> = cores
        .iter()
        .filter(|c| c.numa_node == g.numa)
        .map(|c| c.id.0)
        .collect();
    Ok(RawGpu {
        index: g.index,
        uuid: gpu_uuid,
        name: g.name.clone(),
        memory_bytes,
        pci_bus_id: g
            .pci_bus_id
            .clone()
            .unwrap_or_else(|| format!("00000000:{:02X}:00.0", 0x17 + g.index * 0x10)),
        numa_node: Some(g.numa),
        cpu_affinity: numa_cores,
        mig_enabled: !g.mig.is_empty(),
        instances,
    })
}

/// The MIG instances a `[[gpu]]` entry asks for, placed as the driver would place them; an
/// error when a profile is unknown for the card or the instances do not fit together.
fn mig_instances(g: &GpuEntry, memory_bytes: u64, hostname: &str) -> Result<Vec<RawMig>, String> {
    let slice_gb = crate::model::nominal_slice_gb(memory_bytes);
    let mut profiles = Vec::new();
    let mut mems = Vec::new();
    for m in &g.mig {
        let p = parse_profile(&m.profile, slice_gb).ok_or_else(|| {
            format!(
                "gpu {}: {:?} is not a MIG profile of a {} GiB card",
                g.index, m.profile, g.memory_gib
            )
        })?;
        if m.count == 0 || m.count > 7 {
            return Err(format!(
                "gpu {}: count {} of {} must be 1 to 7",
                g.index, m.count, m.profile
            ));
        }
        let default_mib = (memory_bytes / (1 << 20)) * p.mem_slices as u64 / 8 * 95 / 100;
        for _ in 0..m.count {
            profiles.push(p);
            mems.push(m.memory_mib.unwrap_or(default_mib) << 20);
        }
    }
    let starts = layout(&profiles).ok_or_else(|| {
        format!(
            "gpu {}: the MIG instances do not form a valid layout (at most 7 SM slices and 8 memory slices, at NVIDIA's placements)",
            g.index
        )
    })?;
    Ok(profiles
        .iter()
        .zip(&mems)
        .zip(&starts)
        .enumerate()
        .map(|(i, ((p, &mem), &start))| RawMig {
            uuid: stable_uuid(
                "MIG",
                &format!("flex-sim/{hostname}/gpu{}/leaf{i}", g.index),
            ),
            memory_bytes: mem,
            sm_slices: p.sm_slices,
            mem_slices: Some(p.mem_slices),
            gpu_instance: Some(gi_id(*p, start)),
            compute_instance: Some(0),
            start: Some(start),
        })
        .collect())
}

/// The PCIe distance between every pair of `gpus` (sorted by index), from the NUMA node, host
/// bridge and PCIe switch their entries name (a GPU without a switch gets one of its own).
fn pcie_levels(entries: &[GpuEntry], gpus: &[RawGpu]) -> Vec<Vec<LinkLevel>> {
    let place = |idx: u32| {
        let e = entries.iter().find(|e| e.index == idx).expect("listed gpu");
        (
            e.numa,
            e.host_bridge.unwrap_or(e.numa),
            e.pcie_switch.unwrap_or(1000 + e.index),
        )
    };
    let n = gpus.len();
    let mut pcie = vec![vec![LinkLevel::Pix; n]; n];
    for a in 0..n {
        for b in 0..n {
            let (na, ba, sa) = place(gpus[a].index);
            let (nb, bb, sb) = place(gpus[b].index);
            pcie[a][b] = if na != nb {
                LinkLevel::Sys
            } else if ba != bb {
                LinkLevel::Node
            } else if sa != sb {
                LinkLevel::Phb
            } else {
                LinkLevel::Pix
            };
        }
    }
    pcie
}

/// The NVLink count between every pair of `gpus` (sorted by index) from the `[[nvlink]]`
/// entries, later entries overriding earlier ones.
fn nvlink_counts(links: &[NvLink], gpus: &[RawGpu]) -> Result<Vec<Vec<u8>>, String> {
    let pos = |idx: u32| gpus.iter().position(|g| g.index == idx);
    let n = gpus.len();
    let mut nvlinks = vec![vec![0u8; n]; n];
    for l in links {
        match l.gpus {
            Some([a, b]) => {
                let (Some(pa), Some(pb)) = (pos(a), pos(b)) else {
                    return Err(format!("nvlink names unknown gpu in [{a}, {b}]"));
                };
                if pa == pb {
                    return Err(format!("nvlink joins gpu {a} to itself"));
                }
                nvlinks[pa][pb] = l.links;
                nvlinks[pb][pa] = l.links;
            }
            None => {
                for (a, row) in nvlinks.iter_mut().enumerate() {
                    for (b, v) in row.iter_mut().enumerate() {
                        if a != b {
                            *v = l.links;
                        }
                    }
                }
            }
        }
    }
    Ok(nvlinks)
}

/// The GPU-instance id of a profile at a start slice, numbered as the driver numbers the nodes
/// of the memory-slice tree (whole card 0, halves 1-2, quarters 3-6, eighths 7-14; an A100's
/// seven 1g.5gb instances get 7..13). Real ids depend on creation order; this stable function
/// of the placement keeps simulated ids inside the driver's range (the nvidia-caps table).
fn gi_id(p: Profile, start: u8) -> u32 {
    let size = p.mem_slices.max(1) as u32;
    (8 / size) - 1 + start as u32 / size
}

/// The simulated-topology probe: reads a TOML file; a bare file name that does not exist in the
/// working directory but names a shipped topology (`a100-40gb-x2.toml`) uses the compiled-in copy.
pub struct FileProbe {
    path: PathBuf,
}

impl FileProbe {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The simulated telemetry the topology names ([`telemetry_source`]).
    pub fn telemetry(&self) -> Result<Option<Simulated>, TopologyError> {
        let dir = self.path.parent().unwrap_or(std::path::Path::new(""));
        telemetry_source(&self.text()?, &self.path.display().to_string(), dir)
    }

    /// The directory the topology names as the root of its GPUs' device nodes (`device_root
    /// = "DIR"`), resolved against the topology file's directory; None when it names none.
    pub fn device_root(&self) -> Result<Option<PathBuf>, TopologyError> {
        let origin = self.path.display().to_string();
        let file: File = toml::from_str(&self.text()?).map_err(|e| TopologyError::Syntax {
            origin,
            message: e.to_string().trim_end().to_string(),
        })?;
        let dir = self.path.parent().unwrap_or(std::path::Path::new(""));
        Ok(file.device_root.map(|t| dir.join(t)))
    }

    fn text(&self) -> Result<String, TopologyError> {
        match std::fs::read_to_string(&self.path) {
            Ok(t) => Ok(t),
            Err(e) => {
                let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let bare = self.path.components().count() == 1;
                builtin(name)
                    .filter(|_| bare && e.kind() == std::io::ErrorKind::NotFound)
                    .map(str::to_string)
                    .ok_or(TopologyError::Read {
                        path: self.path.display().to_string(),
                        source: e,
                    })
            }
        }
    }
}

impl Probe for FileProbe {
    fn name(&self) -> String {
        format!("topology file {}", self.path.display())
    }

    fn probe(&self) -> Result<RawHost, ProbeError> {
        let text = self.text().map_err(|e| ProbeError::Failed(Box::new(e)))?;
        parse(&text, &self.path.display().to_string()).map_err(|e| ProbeError::Failed(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::build_host;
    use std::collections::HashSet;

    #[test]
    fn shipped_topologies_load() {
        for (name, text) in BUILTIN {
            let h = build_host(&parse(text, name).unwrap()).unwrap();
            assert!(!h.leaves.is_empty(), "{name}");
        }
        let a = build_host(&parse(builtin("a100-40gb-x2").unwrap(), "a100").unwrap()).unwrap();
        assert_eq!(a.gpus.len(), 2);
        assert_eq!(a.cores.len(), 32);
        assert_ne!(a.gpus[0].numa_node, a.gpus[1].numa_node);
        for g in &a.gpus {
            let p: Vec<&str> = a
                .leaves
                .iter()
                .filter(|l| l.gpu == g.index)
                .map(|l| l.profile.as_str())
                .collect();
            assert_eq!(
                p,
                ["1g.5gb"; 6]
                    .iter()
                    .copied()
                    .chain(["1g.10gb"])
                    .collect::<Vec<_>>()
            );
        }
        let h = build_host(&parse(builtin("h100-80gb-x8").unwrap(), "h100").unwrap()).unwrap();
        assert_eq!(h.leaves.len(), 56);
        assert!(h.leaves.iter().all(|l| l.profile == "1g.10gb"));
        let p = build_host(&parse(builtin("p4-x4").unwrap(), "p4").unwrap()).unwrap();
        assert!(p.leaves.iter().all(|l| !l.is_mig() && l.sm_slices == 7));
    }

    /// Found by fuzzing: each core was checked against every core before it, so a node
    /// listing `1-60000` took seconds (a hang under the fuzzer) and 65,536 cores per node
    /// over several nodes took minutes.
    #[test]
    fn nodes_of_65536_cores_are_read_and_a_core_listed_twice_is_named() {
        let node = |id: u32, cores: &str| format!("[[numa]]\nid = {id}\ncores = \"{cores}\"\n");
        let text = [
            node(0, "0-65535"),
            node(1, "65536-131071"),
            node(2, "131072-196607"),
        ]
        .concat();
        let raw = parse(&text, "big.toml").unwrap();
        assert_eq!(raw.cores.len(), 3 * 65_536);
        let text = [node(0, "0-65535"), node(1, "70000-80000,65535")].concat();
        assert_eq!(
            parse(&text, "dup.toml").unwrap_err().to_string(),
            "topology dup.toml: core 65535 is listed twice"
        );
    }

    #[test]
    fn simulated_uuids_are_stable_distinct_and_well_formed() {
        let t = builtin("h100-80gb-x8").unwrap();
        let a = build_host(&parse(t, "x").unwrap()).unwrap();
        let b = build_host(&parse(t, "x").unwrap()).unwrap();
        let uuids: HashSet<&str> = a.leaves.iter().map(|l| l.uuid.as_str()).collect();
        assert_eq!(uuids.len(), 56);
        assert_eq!(a, b);
        for u in uuids {
            let hex = u.strip_prefix("MIG-").unwrap();
            let parts: Vec<usize> = hex.split('-').map(str::len).collect();
            assert_eq!(parts, [8, 4, 4, 4, 12], "{u}");
            assert!(hex.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let e = parse("hostname = 3", "t.toml").unwrap_err().to_string();
        assert!(e.contains("t.toml") && e.contains("line 1"), "{e}");
        let e = parse("[[numa]]\nid = 0\ncores = \"0-3\"\n[[gpu]]\nindex = 0\nname = \"x\"\nmemory_gib = 40\nnuma = 2\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("numa node 2"), "{e}");
        let e = parse("[[numa]]\nid = 0\ncores = \"0-3\"\n[[gpu]]\nindex = 0\nname = \"x\"\nmemory_gib = 40\nnuma = 0\nmig = [{profile = \"1g.10gb\", count = 5}]\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("valid layout"), "{e}");
        let e = parse("[[numa]]\nid = 0\ncores = \"0-3\"\nbogus = 1\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        assert!(parse_cpu_list("3-1").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(parse_cpu_list("0-2,5,7-8").unwrap(), vec![0, 1, 2, 5, 7, 8]);
    }
}

#[cfg(test)]
mod hostile {
    //! Hostile input: the parser never panics and every rejection says what is wrong.
    use super::*;
    use proptest::prelude::*;

    /// A shipped file with one line replaced, dropped or duplicated.
    fn mutated() -> impl Strategy<Value = String> {
        let base: Vec<String> = builtin("a100-40gb-x2")
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        let n = base.len();
        (0..n, 0u8..3, "[ -~]{0,40}").prop_map(move |(i, op, junk)| {
            let mut l = base.clone();
            match op {
                0 => l[i] = junk,
                1 => {
                    l.remove(i);
                }
                _ => l.insert(i, junk),
            }
            l.join("\n")
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
            if let Err(e) = parse(&s, "fuzz.toml") {
                prop_assert!(e.to_string().starts_with("topology fuzz.toml: "));
            }
        }

        #[test]
        fn mutated_files_fail_cleanly_or_build(s in mutated()) {
            match parse(&s, "m.toml") {
                Ok(raw) => {
                    // whatever parses must also build a model or say why not
                    if let Err(e) = crate::probe::build_host(&raw) {
                        prop_assert!(!e.to_string().is_empty());
                    }
                }
                Err(e) => prop_assert!(e.to_string().len() > "topology m.toml: ".len()),
            }
        }

        #[test]
        fn cpu_lists_never_panic(s in "[0-9,\\- ]{0,30}") {
            let _ = parse_cpu_list(&s);
        }
    }
}
