//! NVIDIA's MIG profile and placement tables (mig-profiles.md): which instance sizes exist and
//! where on a GPU's eight memory slices each may start.

/// One GPU-instance profile, independent of the card's memory size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Profile {
    /// Compute (SM) slices out of 7.
    pub sm_slices: u8,
    /// Memory slices out of 8.
    pub mem_slices: u8,
}

impl Profile {
    pub const fn new(sm_slices: u8, mem_slices: u8) -> Self {
        Self {
            sm_slices,
            mem_slices,
        }
    }

    /// Valid start memory slices for this profile, from NVIDIA's placement table.
    pub fn starts(self) -> &'static [u8] {
        match (self.sm_slices, self.mem_slices) {
            (1, 1) => &[0, 1, 2, 3, 4, 5, 6],
            (1, 2) => &[0, 2, 4, 6],
            (2, 2) => &[0, 2, 4],
            (3, 4) => &[0, 4],
            (4, 4) | (7, 8) => &[0],
            _ => &[],
        }
    }

    /// Every profile NVIDIA defines, smallest first.
    pub const ALL: [Profile; 6] = [
        Profile::new(1, 1),
        Profile::new(1, 2),
        Profile::new(2, 2),
        Profile::new(3, 4),
        Profile::new(4, 4),
        Profile::new(7, 8),
    ];

    pub fn is_known(self) -> bool {
        !self.starts().is_empty()
    }

    /// Occupied memory slices when started at `start`, as a bit mask.
    pub fn mask(self, start: u8) -> u8 {
        let bits = (1u16 << self.mem_slices) - 1;
        (bits << start) as u8
    }

    pub fn valid_start(self, start: u8) -> bool {
        self.starts().contains(&start)
    }
}

/// Parse an instance name such as `1g.5gb`, `1g.10gb+me` or `3g.40gb` on a GPU whose single
/// memory slice is `slice_gb` GB (5 on an A100-40GB, 10 on an H100-80GB).
pub fn parse_profile(name: &str, slice_gb: f64) -> Option<Profile> {
    let base = name.strip_suffix("+me").unwrap_or(name);
    let (g, mem) = base.split_once('.')?;
    let sm: u8 = g.strip_suffix('g')?.parse().ok()?;
    let gb: f64 = mem.strip_suffix("gb")?.parse().ok()?;
    let mem_slices = (gb / slice_gb).round();
    if !(1.0..=8.0).contains(&mem_slices) {
        return None;
    }
    let p = Profile::new(sm, mem_slices as u8);
    p.is_known().then_some(p)
}

/// Place a list of instances on one GPU: a start slice for each, or None when no valid layout
/// holds them all (too many SM slices, or the memory tree cannot fit them). A small depth-first
/// search, larger instances first: at most seven instances over eight slices.
pub fn layout(profiles: &[Profile]) -> Option<Vec<u8>> {
    if profiles.iter().map(|p| p.sm_slices as u32).sum::<u32>() > 7 {
        return None;
    }
    let mut order: Vec<usize> = (0..profiles.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((profiles[i].mem_slices, profiles[i].sm_slices)));
    let mut starts = vec![0u8; profiles.len()];
    place(profiles, &order, 0, &mut starts).then_some(starts)
}

fn place(profiles: &[Profile], order: &[usize], used: u8, starts: &mut [u8]) -> bool {
    let Some((&i, rest)) = order.split_first() else {
        return true;
    };
    let p = profiles[i];
    for &s in p.starts() {
        if used & p.mask(s) == 0 {
            starts[i] = s;
            if place(profiles, rest, used | p.mask(s), starts) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_per_card() {
        assert_eq!(parse_profile("1g.5gb", 5.0), Some(Profile::new(1, 1)));
        assert_eq!(parse_profile("1g.10gb", 5.0), Some(Profile::new(1, 2)));
        assert_eq!(parse_profile("1g.10gb", 10.0), Some(Profile::new(1, 1)));
        assert_eq!(parse_profile("1g.10gb+me", 10.0), Some(Profile::new(1, 1)));
        assert_eq!(parse_profile("3g.71gb", 17.625), Some(Profile::new(3, 4)));
        assert_eq!(parse_profile("5g.5gb", 5.0), None);
        assert_eq!(parse_profile("nonsense", 5.0), None);
    }

    #[test]
    fn flex_mig_layout_is_valid() {
        let mut l = vec![Profile::new(1, 1); 6];
        l.push(Profile::new(1, 2));
        assert_eq!(layout(&l), Some(vec![0, 1, 2, 3, 4, 5, 6]));
        // seven 1g.10gb on an A100-40GB need 14 memory slices: impossible
        assert_eq!(layout(&[Profile::new(1, 2); 7]), None);
        // static-MIG layout of the evaluation: 1g.10gb + 2g.10gb + 4g.20gb
        let s = layout(&[Profile::new(1, 2), Profile::new(2, 2), Profile::new(4, 4)]).unwrap();
        assert_eq!(s, vec![6, 4, 0]);
        // two 3g instances fit, a third SM slice does not
        assert!(layout(&[Profile::new(3, 4), Profile::new(3, 4)]).is_some());
        assert!(layout(&[Profile::new(3, 4), Profile::new(3, 4), Profile::new(1, 1)]).is_none());
    }
}
