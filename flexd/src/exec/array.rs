//! The environment of an array task: `FLEX_ARRAY_*`, and Slurm's `SLURM_ARRAY_*` names with
//! `slurm_aliases` (JOB_ID, TASK_ID, TASK_COUNT, TASK_MIN, TASK_MAX, TASK_STEP).

use flex_proto::{ArraySpec, ArrayTask};

/// What every task of an array is told about it, worked out once per array: listing the
/// indices of an array of 100,000 listed ones takes milliseconds, too long for each start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArraySummary {
    pub count: usize,
    pub min: u32,
    pub max: u32,
    /// The ranges' one step when they share it (1 otherwise), as Slurm sets it.
    pub step: u32,
}

impl ArraySummary {
    pub(crate) fn of(spec: &ArraySpec) -> ArraySummary {
        let indices = spec.indices();
        ArraySummary {
            count: indices.len(),
            min: indices.first().copied().unwrap_or(0),
            max: indices.last().copied().unwrap_or(0),
            step: match spec.ranges.as_slice() {
                [one] => one.step,
                _ => 1,
            },
        }
    }
}

/// The variables of task `task` of an array summed up as `array`.
pub(crate) fn array_env(
    task: &ArrayTask,
    array: &ArraySummary,
    slurm_aliases: bool,
) -> Vec<(String, String)> {
    let values = [
        ("JOB_ID", task.job.0.to_string()),
        ("TASK_ID", task.index.to_string()),
        ("TASK_COUNT", array.count.to_string()),
        ("TASK_MIN", array.min.to_string()),
        ("TASK_MAX", array.max.to_string()),
        ("TASK_STEP", array.step.to_string()),
    ];
    let mut out = Vec::with_capacity(12);
    for (prefix, on) in [("FLEX_ARRAY_", true), ("SLURM_ARRAY_", slurm_aliases)] {
        if on {
            out.extend(
                values
                    .iter()
                    .map(|(k, v)| (format!("{prefix}{k}"), v.clone())),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::JobId;

    #[test]
    fn a_task_knows_its_array() {
        let spec = ArraySpec::parse("1-9:2%2").unwrap();
        let task = ArrayTask {
            job: JobId(12),
            index: 5,
        };
        let env: std::collections::HashMap<_, _> = array_env(&task, &ArraySummary::of(&spec), true)
            .into_iter()
            .collect();
        assert_eq!(env["SLURM_ARRAY_JOB_ID"], "12");
        assert_eq!(env["FLEX_ARRAY_TASK_ID"], "5");
        assert_eq!(env["SLURM_ARRAY_TASK_COUNT"], "5");
        assert_eq!(
            (&*env["FLEX_ARRAY_TASK_MIN"], &*env["FLEX_ARRAY_TASK_MAX"]),
            ("1", "9")
        );
        assert_eq!(env["SLURM_ARRAY_TASK_STEP"], "2");
        assert!(!array_env(&task, &ArraySummary::of(&spec), false)
            .iter()
            .any(|(k, _)| k.starts_with("SLURM")));
    }
}
