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

/// The real cores a rank is bound to: its own cores when they all exist here; otherwise (a
/// simulated topology names more cores than this machine has) model core `c` maps to online
/// core `c mod n`. Empty means "do not bind".
pub fn bind_cores(model: &[u32], online: &[u32]) -> Vec<u32> {
    if online.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<u32> = if model.iter().all(|c| online.contains(c)) {
        model.to_vec()
    } else {
        model
            .iter()
            .map(|&c| online[c as usize % online.len()])
            .collect()
    };
    v.sort_unstable();
    v.dedup();
    v
}

/// The online cores of this machine (`/sys/devices/system/cpu/online`, else as many as the
/// standard library counts).
pub fn online_cores() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n as u32).collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_cores_fold_onto_the_online_ones() {
        let online = [0, 1, 2, 3];
        assert_eq!(bind_cores(&[2, 3], &online), [2, 3]);
        assert_eq!(bind_cores(&[16, 17], &online), [0, 1]);
        assert_eq!(bind_cores(&[16, 20], &online), [0]);
        assert_eq!(bind_cores(&[5], &[1, 3]), [3]);
        assert!(bind_cores(&[], &online).is_empty());
        assert!(bind_cores(&[1], &[]).is_empty());
        assert!(!online_cores().is_empty());
    }
}
