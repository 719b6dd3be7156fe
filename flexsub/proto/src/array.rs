//! Job arrays, dependencies and job references as Slurm writes them: `--array=0-15%2`,
//! `--dependency=afterok:12:13,singleton`, and `12`, `12_3`, `12_[3-5]` on the command line.
//! Parsed on the client, carried as plain data, checked again by flexd.

use gres_plugin::JobId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// `first-last:step` (a single index is `first == last`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRange {
    pub first: u32,
    pub last: u32,
    pub step: u32,
}

impl TaskRange {
    pub fn count(&self) -> u64 {
        u64::from((self.last - self.first) / self.step.max(1)) + 1
    }

    pub fn indices(&self) -> impl Iterator<Item = u32> {
        (self.first..=self.last).step_by(self.step.max(1) as usize)
    }
}

/// `--array`: the task indices and the throttle (`%N`: at most N tasks running at once).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    pub ranges: Vec<TaskRange>,
    pub throttle: Option<u32>,
}

impl ArraySpec {
    /// Parse Slurm's forms: `0-15`, `1,3,7`, `1-9:2`, combinations, and `%N` at the end.
    pub fn parse(s: &str) -> Result<ArraySpec, String> {
        let bad = |why: &str| format!("--array={s}: {why}");
        let (list, throttle) = match s.split_once('%') {
            Some((l, t)) => {
                let n: u32 = t
                    .parse()
                    .map_err(|_| bad(&format!("the throttle {t:?} is not a number")))?;
                if n == 0 {
                    return Err(bad("the throttle %0 lets no task run"));
                }
                (l, Some(n))
            }
            None => (s, None),
        };
        let ranges = parse_ranges(list).map_err(|w| bad(&w))?;
        Ok(ArraySpec { ranges, throttle })
    }

    /// How many tasks the ranges name (an index in two overlapping ranges counts twice: an
    /// upper bound, cheap to check before [`Self::indices`] is called).
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(TaskRange::count).sum()
    }

    /// The indices in increasing order, each once. Call only after checking [`Self::count`].
    pub fn indices(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.ranges.iter().flat_map(TaskRange::indices).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match (r.first == r.last, r.step) {
                (true, _) => write!(f, "{}", r.first)?,
                (false, 1) => write!(f, "{}-{}", r.first, r.last)?,
                (false, s) => write!(f, "{}-{}:{s}", r.first, r.last)?,
            }
        }
        if let Some(n) = self.throttle {
            write!(f, "%{n}")?;
        }
        Ok(())
    }
}

/// `1-9:2,12` → ranges; an empty list, a reversed range or a step of 0 is an error.
pub fn parse_ranges(list: &str) -> Result<Vec<TaskRange>, String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| format!("{t:?} is not a task index"))
    };
    let mut out = Vec::new();
    for part in list.split(',') {
        let (span, step) = match part.split_once(':') {
            Some((a, st)) => (a, num(st)?),
            None => (part, 1),
        };
        if step == 0 {
            return Err(format!("{part:?} has a step of 0"));
        }
        let (first, last) = match span.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(span)?, num(span)?),
        };
        if last < first {
            return Err(format!("{part:?} ends before it begins"));
        }
        out.push(TaskRange { first, last, step });
    }
    Ok(out)
}

/// Indices written back the short way: `[3-5,7]` style without the brackets (`3-5,7`).
pub fn compress(indices: impl IntoIterator<Item = u32>) -> String {
    let mut out = String::new();
    let mut run: Option<(u32, u32)> = None;
    let flush = |out: &mut String, (a, b): (u32, u32)| {
        if !out.is_empty() {
            out.push(',');
        }
        if a == b {
            out.push_str(&a.to_string());
        } else {
            out.push_str(&format!("{a}-{b}"));
        }
    };
    for i in indices {
        run = match run {
            Some((a, b)) if b + 1 == i => Some((a, i)),
            Some(r) => {
                flush(&mut out, r);
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some(r) = run {
        flush(&mut out, r);
    }
    out
}

/// A job (or some tasks of an array) named on a command line: `12`, `12_3`, `12_[3-5,7]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRef {
    pub job: JobId,
    /// None: the job, or every task of the array `job`.
    pub tasks: Option<Vec<TaskRange>>,
}

impl JobRef {
    pub fn parse(s: &str) -> Result<JobRef, String> {
        let bad = || format!("{s:?} is not a job id (12, 12_3 or 12_[3-5])");
        let (job, tasks) = match s.split_once('_') {
            None => (s, None),
            Some((j, t)) => {
                let t = t
                    .strip_prefix('[')
                    .and_then(|t| t.strip_suffix(']'))
                    .unwrap_or(t);
                let t = t.split_once('%').map_or(t, |(l, _)| l);
                (j, Some(parse_ranges(t).map_err(|w| format!("{s:?}: {w}"))?))
            }
        };
        let job = job.parse::<u64>().map_err(|_| bad())?;
        Ok(JobRef {
            job: JobId(job),
            tasks,
        })
    }

    /// Whether task `index` of the array is named.
    pub fn names_task(&self, index: u32) -> bool {
        self.tasks.as_ref().is_none_or(|rs| {
            rs.iter().any(|r| {
                (r.first..=r.last).contains(&index) && (index - r.first).is_multiple_of(r.step)
            })
        })
    }
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tasks {
            None => write!(f, "{}", self.job),
            Some(r) => {
                let a = ArraySpec {
                    ranges: r.clone(),
                    throttle: None,
                };
                match r.as_slice() {
                    [one] if one.first == one.last => write!(f, "{}_{}", self.job, one.first),
                    _ => write!(f, "{}_[{a}]", self.job),
                }
            }
        }
    }
}

/// How a dependency waits on its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DepKind {
    /// The job has started (or was cancelled before it did).
    After,
    /// The job ended, however.
    AfterAny,
    /// The job completed with exit code 0.
    AfterOk,
    /// The job ended other than COMPLETED.
    AfterNotOk,
    /// Task N of this array after task N of that array completed with exit code 0.
    AfterCorr,
}

impl DepKind {
    pub fn name(self) -> &'static str {
        match self {
            DepKind::After => "after",
            DepKind::AfterAny => "afterany",
            DepKind::AfterOk => "afterok",
            DepKind::AfterNotOk => "afternotok",
            DepKind::AfterCorr => "aftercorr",
        }
    }
}

/// One condition of a dependency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepTerm {
    /// On a job, every task of an array, or one task (`12_3`).
    On { kind: DepKind, job: JobRef },
    /// No earlier job of the same user and name is pending or running.
    Singleton,
}

/// `--dependency`: every term must hold (`,`), or any one (`?`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub any: bool,
    pub terms: Vec<DepTerm>,
}

impl Dependency {
    pub fn parse(s: &str) -> Result<Dependency, String> {
        let bad = |why: String| format!("--dependency={s}: {why}");
        if s.contains(',') && s.contains('?') {
            return Err(bad("mixes ',' (all) and '?' (any)".into()));
        }
        let any = s.contains('?');
        let mut terms = Vec::new();
        for part in s.split([',', '?']) {
            if part == "singleton" {
                terms.push(DepTerm::Singleton);
                continue;
            }
            let mut it = part.split(':');
            let kind = match it.next().unwrap_or("") {
                "after" => DepKind::After,
                "afterany" => DepKind::AfterAny,
                "afterok" => DepKind::AfterOk,
                "afternotok" => DepKind::AfterNotOk,
                "aftercorr" => DepKind::AfterCorr,
                k => return Err(bad(format!("unknown dependency type {k:?}"))),
            };
            let ids: Vec<&str> = it.collect();
            if ids.is_empty() {
                return Err(bad(format!("{part:?} names no job")));
            }
            for id in ids {
                // Slurm's `after:12+5` (minutes after the start) is not supported.
                let job = JobRef::parse(id).map_err(bad)?;
                terms.push(DepTerm::On { kind, job });
            }
        }
        Ok(Dependency { any, terms })
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = if self.any { "?" } else { "," };
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(sep)?;
            }
            match t {
                DepTerm::Singleton => f.write_str("singleton")?,
                DepTerm::On { kind, job } => write!(f, "{}:{job}", kind.name())?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_array_forms() {
        let a = ArraySpec::parse("0-15").unwrap();
        assert_eq!((a.count(), a.throttle), (16, None));
        let a = ArraySpec::parse("1,3,7").unwrap();
        assert_eq!(a.indices(), [1, 3, 7]);
        let a = ArraySpec::parse("1-9:2,20%3").unwrap();
        assert_eq!(a.indices(), [1, 3, 5, 7, 9, 20]);
        assert_eq!((a.throttle, a.to_string()), (Some(3), "1-9:2,20%3".into()));
        for bad in ["", "5-1", "1-4:0", "x", "1-3%0", "1-3%x"] {
            assert!(ArraySpec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(compress([1, 2, 3, 5, 7, 8]), "1-3,5,7-8");
    }

    #[test]
    fn job_refs_and_dependencies() {
        let r = JobRef::parse("12_[3-5]").unwrap();
        assert!(r.names_task(4) && !r.names_task(6));
        assert_eq!(r.to_string(), "12_[3-5]");
        assert_eq!(JobRef::parse("12_3").unwrap().to_string(), "12_3");
        assert!(JobRef::parse("12").unwrap().names_task(99));
        assert!(JobRef::parse("x_3").is_err());
        let d = Dependency::parse("afterok:12:13_2,singleton").unwrap();
        assert_eq!((d.any, d.terms.len()), (false, 3));
        assert_eq!(d.to_string(), "afterok:12,afterok:13_2,singleton");
        assert!(Dependency::parse("afterok:1?afterany:2").unwrap().any);
        for bad in [
            "afterok",
            "before:3",
            "afterok:1,afterany:2?after:3",
            "afterok:x",
        ] {
            assert!(Dependency::parse(bad).is_err(), "{bad}");
        }
    }
}
