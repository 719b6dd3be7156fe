//! Core lists as Linux and Slurm write them (`0-3,8,10-11`).

/// Parse a core list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a.parse().map_err(|_| format!("bad core number {a:?}"))?;
        let b: u32 = b.parse().map_err(|_| format!("bad core number {b:?}"))?;
        if b < a || b - a > 65_535 {
            return Err(format!("bad core range {part:?}"));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// Format cores as a compact list (`0-3,8`), the inverse of [`parse_cpu_list`].
pub fn format_cpu_list(cores: &[u32]) -> String {
    let mut v = cores.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}
