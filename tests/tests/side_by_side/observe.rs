//! What one script did on one side, normalised so that the two sides compare: its submission's
//! outcome, each job's end state and exit code, the files it left, and what every probed
//! process saw (one record per process, from `tests/side-by-side/bin/probe`). Then the facts
//! in which the two sides differ.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A job of a submission: its array index (None outside an array), end state, `exit:signal`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Ended {
    pub(super) index: Option<u32>,
    pub(super) state: String,
    pub(super) exit: String,
}

/// One side's view of one script.
#[derive(Debug, Default)]
pub(super) struct Observed {
    /// None: the submission was refused (sbatch or flexsub failed).
    pub(super) jobs: Option<Vec<Ended>>,
    pub(super) files: BTreeSet<String>,
    /// Records by program and arguments (`batch` for the batch step).
    pub(super) records: BTreeMap<String, Vec<BTreeMap<String, String>>>,
}

/// How to make one side's values comparable: its job ids, its working directory, the names
/// its host goes by.
pub(super) struct Normal<'a> {
    pub(super) job_ids: BTreeSet<u64>,
    pub(super) workdir: &'a Path,
    pub(super) hosts: &'a [&'a str],
    /// Whether the CPUs a process may use are compared (see the test's comment).
    pub(super) count_cores: bool,
}

impl Normal<'_> {
    /// Job ids in `s` as `J` (`J:5` when zero-padded to 5), host names as `<host>`, the
    /// working directory as `<submit>`.
    pub(super) fn text(&self, s: &str) -> String {
        let mut s = s.replace(&self.workdir.display().to_string(), "<submit>");
        for h in self.hosts {
            s = s.replace(h, "<host>");
        }
        let mut out = String::new();
        let mut digits = String::new();
        let flush = |out: &mut String, digits: &mut String| {
            match digits.parse::<u64>() {
                Ok(n) if self.job_ids.contains(&n) => {
                    if digits.starts_with('0') {
                        out.push_str(&format!("J:{}", digits.len()));
                    } else {
                        out.push('J');
                    }
                }
                _ => out.push_str(digits),
            }
            digits.clear();
        };
        for c in s.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else {
                flush(&mut out, &mut digits);
                out.push(c);
            }
        }
        flush(&mut out, &mut digits);
        out
    }

    /// The records a job's processes left in `rec`, grouped by program and arguments.
    pub(super) fn records(&self, rec: &Path) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
        let mut out: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        for e in std::fs::read_dir(rec).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "tmp") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let mut r: BTreeMap<String, String> = text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let array = r.get("SLURM_ARRAY_JOB_ID").cloned();
            if let Some(id) = r.get_mut("SLURM_JOB_ID") {
                *id = if Some(&*id) == array.as_ref() {
                    "A"
                } else {
                    "J"
                }
                .into();
            }
            if let Some(a) = r.get_mut("SLURM_ARRAY_JOB_ID") {
                *a = "A".into();
            }
            match r.get("cores").map(|c| core_count(c)) {
                Some(n) if self.count_cores => r.insert("cores".into(), n.to_string()),
                _ => r.remove("cores"),
            };
            for v in r.values_mut() {
                *v = self.text(v);
            }
            let key = format!("{} {}", r["prog"], r["args"])
                .trim_end()
                .to_string();
            out.entry(key).or_default().push(r);
        }
        for v in out.values_mut() {
            v.sort();
        }
        out
    }

    /// The files a script left in its working directory (not its records or itself).
    pub(super) fn files(&self, dir: &Path, script: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                if rel == "rec" || rel == script {
                    continue;
                }
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.insert(self.text(&rel));
                }
            }
        }
        out
    }
}

/// How many CPUs a `Cpus_allowed_list` (`0-3,8`) names.
fn core_count(list: &str) -> usize {
    list.split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// A way the sides differ: a short fact (what the accepted list matches) and the detail.
#[derive(Debug, Clone)]
pub(super) struct Fact {
    pub(super) fact: String,
    pub(super) detail: String,
}

fn fact(fact: String, detail: String) -> Fact {
    Fact { fact, detail }
}

/// Where Slurm's and Flex's views of a script differ.
pub(super) fn differences(slurm: &Observed, flex: &Observed) -> Vec<Fact> {
    let mut out = Vec::new();
    let (Some(sj), Some(fj)) = (&slurm.jobs, &flex.jobs) else {
        if slurm.jobs.is_some() != flex.jobs.is_some() {
            let said = |o: &Observed| {
                if o.jobs.is_some() {
                    "accepted"
                } else {
                    "refused"
                }
            };
            out.push(fact(
                "outcome".into(),
                format!("slurm {}, flex {}", said(slurm), said(flex)),
            ));
        }
        return out;
    };
    if sj.len() != fj.len() {
        out.push(fact(
            "jobs".into(),
            format!("slurm {sj:?}\n      flex  {fj:?}"),
        ));
    } else {
        for (s, f) in sj.iter().zip(fj) {
            for (what, a, b) in [("state", &s.state, &f.state), ("exit", &s.exit, &f.exit)] {
                if a != b {
                    let at = s.index.map_or(String::new(), |i| format!(" [{i}]"));
                    out.push(fact(what.into(), format!("{at} slurm {a}, flex {b}")));
                }
            }
        }
    }
    for f in slurm.files.symmetric_difference(&flex.files) {
        let side = if slurm.files.contains(f) {
            "slurm"
        } else {
            "flex"
        };
        out.push(fact(format!("file only in {side}: {f}"), String::new()));
    }
    let groups: BTreeSet<&String> = slurm.records.keys().chain(flex.records.keys()).collect();
    for g in groups {
        let none = Vec::new();
        let (s, f) = (
            slurm.records.get(g).unwrap_or(&none),
            flex.records.get(g).unwrap_or(&none),
        );
        let prog = g.split(' ').next().unwrap_or_default();
        if s.len() != f.len() {
            out.push(fact(
                format!("tasks {prog}"),
                format!("`{g}`: slurm {} process(es), flex {}", s.len(), f.len()),
            ));
            continue;
        }
        let keys: BTreeSet<&String> = s.iter().chain(f).flat_map(|r| r.keys()).collect();
        for k in keys {
            let values = |rs: &[BTreeMap<String, String>]| -> Vec<String> {
                let mut v: Vec<String> = rs
                    .iter()
                    .map(|r| r.get(k).cloned().unwrap_or_else(|| "-".into()))
                    .collect();
                v.sort();
                v
            };
            let (a, b) = (values(s), values(f));
            if a != b {
                out.push(fact(
                    format!("env {prog} {k}"),
                    format!("`{g}`: slurm {a:?}, flex {b:?}"),
                ));
            }
        }
    }
    out
}

/// `*` matches any run of characters; everything else itself.
pub(super) fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, rest)) => {
            let Some(tail) = s.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_core_lists() {
        assert!(glob("env * SLURM_MEM_*", "env batch SLURM_MEM_PER_CPU"));
        assert!(!glob("env batch *", "env python X"));
        assert!(glob("*", ""));
        assert_eq!(core_count("0-3,8,10-11"), 7);
    }

    #[test]
    fn job_ids_hosts_and_padding_normalise() {
        let n = Normal {
            job_ids: BTreeSet::from([1003, 1004]),
            workdir: Path::new("/w/x"),
            hosts: &["a100-testbed"],
            count_cores: true,
        };
        assert_eq!(
            n.text("out-01003-1004-3-a100-testbed/w/x"),
            "out-J:5-J-3-<host><submit>"
        );
    }
}
