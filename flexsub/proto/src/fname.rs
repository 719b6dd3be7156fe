//! sbatch's filename patterns for a job's output and error files (`--output`, `--error`):
//! flexsub checks them, flexd expands them when the job starts, both with this code, which
//! follows what Slurm 22.05's slurmstepd does for a batch script (`src/slurmd/common/fname.c`).
//!
//! `%%` is a percent sign; `%A` the array's job id (the job id outside an array), `%a` the
//! array index (4294967294 outside an array), `%j` and `%J` the job id (`%J` adds no step in
//! the batch step), `%N` the host name, `%n` the node index and `%t` the task index (both 0 in
//! the batch step), `%s` the step (`batch`), `%u` the user, `%x` the job name. A number between
//! `%` and the letter pads the numbers with zeros to that width (at most 10: `%3a` is `007`);
//! `%N`, `%s`, `%u` and `%x` take no padding. A backslash anywhere turns every pattern off, and
//! the backslashes are dropped (`\\` stays one backslash).

use std::fmt;

/// Widths above this are cut to it, as Slurm does.
const MAX_WIDTH: usize = 10;

/// Slurm's array index outside an array (`NO_VAL`).
pub const NO_ARRAY_INDEX: u32 = u32::MAX - 1;

/// What a pattern was refused for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("it is {0} bytes, longer than a path may be ({PATH_MAX})")]
    TooLong(usize),
    #[error("unknown escape {0:?}; Slurm's patterns are %j %J %x %u %A %a %N %n %s %t and %%, with an optional width such as %3a")]
    UnknownEscape(String),
    #[error("a lone % at the end; write %% for a percent sign")]
    Trailing(String),
}

/// The job a pattern is expanded for.
#[derive(Clone, Debug)]
pub struct PatternJob<'a> {
    pub job: u64,
    /// The array's job id and this job's index in it.
    pub array: Option<(u64, u32)>,
    pub name: &'a str,
    pub user: &'a str,
    pub host: &'a str,
}

/// A piece of a pattern: literal text, or an escape's letter and width (0: none).
#[derive(Clone, Copy, Debug)]
enum Piece<'a> {
    Text(&'a str),
    Escape { letter: char, width: usize },
}

/// Hands `emit` the pattern's pieces in order; stops at the first escape that is not Slurm's.
fn walk(pattern: &str, mut emit: impl FnMut(Piece<'_>)) -> Result<(), PatternError> {
    let mut rest = pattern;
    while let Some(i) = rest.find('%') {
        emit(Piece::Text(&rest[..i]));
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('%') {
            emit(Piece::Text("%"));
            rest = tail;
            continue;
        }
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let width = after[..digits]
            .parse::<u128>()
            .map_or(if digits > 0 { MAX_WIDTH } else { 0 }, |w| {
                w.min(MAX_WIDTH as u128) as usize
            });
        let mut chars = after[digits..].chars();
        match chars.next() {
            Some(letter @ ('A' | 'a' | 'J' | 'j' | 'N' | 'n' | 's' | 't' | 'u' | 'x')) => {
                emit(Piece::Escape { letter, width });
                rest = chars.as_str();
            }
            Some(c) => {
                return Err(PatternError::UnknownEscape(format!(
                    "%{}{c}",
                    &after[..digits]
                )))
            }
            None => return Err(PatternError::Trailing(pattern.to_string())),
        }
    }
    emit(Piece::Text(rest));
    Ok(())
}

/// The longest path Linux opens (PATH_MAX, its terminating NUL included): no longer pattern
/// names a file, and each escape may expand to a whole job name.
pub const PATH_MAX: usize = 4096;

/// Check that a pattern is no longer than a path may be, and that every escape in it is one of
/// Slurm's (Slurm keeps unknown ones as text; Flex refuses them, as they are most likely typos).
pub fn check(pattern: &str) -> Result<(), PatternError> {
    if pattern.len() > PATH_MAX {
        return Err(PatternError::TooLong(pattern.len()));
    }
    if pattern.contains('\\') {
        return Ok(());
    }
    walk(pattern, |_| {})
}

/// The file name `pattern` names for `job`. A pattern [`check`] refuses expands to itself.
pub fn expand(pattern: &str, job: &PatternJob<'_>) -> String {
    expand_step(pattern, job, "batch", 0)
}

/// The file name `pattern` names for task `task` of step `step` of `job` (srun's `--output`
/// in a job: `%s` the step, `%t` the task, `%J` `job.step`).
pub fn expand_step(pattern: &str, job: &PatternJob<'_>, step: &str, task: u32) -> String {
    if pattern.contains('\\') {
        return unescape(pattern);
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let pad = |out: &mut String, n: &dyn fmt::Display, width: usize| {
        out.push_str(&format!("{n:0>width$}"));
    };
    let walked = walk(pattern, |piece| match piece {
        Piece::Text(text) => out.push_str(text),
        Piece::Escape { letter, width } => match letter {
            'A' => pad(&mut out, &job.array.map_or(job.job, |a| a.0), width),
            'a' => pad(&mut out, &job.array.map_or(NO_ARRAY_INDEX, |a| a.1), width),
            'J' if step != "batch" => {
                pad(&mut out, &job.job, width);
                out.push('.');
                out.push_str(step);
            }
            'J' | 'j' => pad(&mut out, &job.job, width),
            'n' => pad(&mut out, &0, width),
            't' => pad(&mut out, &task, width),
            'N' => out.push_str(job.host),
            's' => out.push_str(step),
            'u' => out.push_str(job.user),
            'x' => out.push_str(job.name),
            _ => unreachable!("walk emits only the letters it matched"),
        },
    });
    match walked {
        Ok(()) => out,
        Err(_) => pattern.to_string(),
    }
}

/// Slurm's `remove_path_slashes`: each backslash escapes the next character (`\\` is one
/// backslash), and the rest is taken as it is.
fn unescape(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
        } else if chars.peek() == Some(&'\\') {
            chars.next();
            out.push('\\');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PLAIN: PatternJob<'static> = PatternJob {
        job: 42,
        array: None,
        name: "train",
        user: "ana",
        host: "node7",
    };

    fn task(index: u32) -> PatternJob<'static> {
        PatternJob {
            job: 45,
            array: Some((42, index)),
            ..PLAIN
        }
    }

    #[test]
    fn each_escape_as_slurm_prints_it_for_a_batch_script() {
        let cases = [
            ("slurm-%j.out", "slurm-42.out"),
            ("%x-%u-%N.log", "train-ana-node7.log"),
            ("%J.%s.%n.%t", "42.batch.0.0"),
            ("%A_%a", "42_4294967294"),
            ("100%%-%%j", "100%-%j"),
            ("%%%j", "%42"),
            ("%5j/%3n%2t", "00042/00000"),
            ("%3x%3u%3N%3s", "trainananode7batch"),
            ("%20j", "0000000042"),
            ("%99999999999999999999999999j", "0000000042"),
            ("%0j", "42"),
            ("no escape", "no escape"),
            ("", ""),
        ];
        for (pattern, want) in cases {
            assert_eq!(check(pattern), Ok(()), "{pattern}");
            assert_eq!(expand(pattern, &PLAIN), want, "{pattern}");
        }
    }

    #[test]
    fn arrays_pad_the_index_and_the_array_id() {
        assert_eq!(expand("%A_%a-%j", &task(3)), "42_3-45");
        assert_eq!(expand("%4A_%3a.%J", &task(7)), "0042_007.45");
        assert_eq!(expand("%a", &task(12345)), "12345");
    }

    #[test]
    fn a_backslash_turns_the_patterns_off() {
        assert_eq!(expand("out\\%j.txt", &PLAIN), "out%j.txt");
        assert_eq!(expand("a\\\\b%j", &PLAIN), "a\\b%j");
        assert_eq!(check("\\%q"), Ok(()));
    }

    #[test]
    fn unknown_and_trailing_escapes_are_refused_by_name() {
        assert_eq!(
            check("out-%q.log"),
            Err(PatternError::UnknownEscape("%q".into()))
        );
        assert_eq!(
            check("%12z"),
            Err(PatternError::UnknownEscape("%12z".into()))
        );
        assert!(matches!(check("a%"), Err(PatternError::Trailing(_))));
        assert!(matches!(check("a%5"), Err(PatternError::Trailing(_))));
        assert_eq!(expand("out-%q-%j", &PLAIN), "out-%q-%j");
    }

    proptest! {
        #[test]
        fn checked_patterns_expand_without_escapes_left(s in "[a-z%AaJjNnstux0-9\\\\]{0,16}") {
            let out = expand(&s, &task(1));
            if check(&s).is_ok() && !s.contains('\\') {
                let literal_percents = s.matches("%%").count();
                prop_assert_eq!(out.matches('%').count(), literal_percents);
            }
        }
    }
}
