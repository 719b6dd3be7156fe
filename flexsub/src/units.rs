//! Parsers for the values users type: time limits, memory sizes, GPU fractions, counts, output
//! patterns and signals. Pure functions; each error names the value and says what was expected,
//! so the caller only adds where the value came from (a script line, an option).

pub use flex_proto::text::{format_size, push_u64};

/// A value that does not parse; `Display` is the whole message (`invalid time "abc": …`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {why}")]
pub struct ValueError {
    pub what: &'static str,
    pub value: String,
    pub why: String,
}

fn bad(what: &'static str, value: &str, why: impl Into<String>) -> ValueError {
    ValueError {
        what,
        value: value.to_string(),
        why: why.into(),
    }
}

const TIME_FORMATS: &str =
    "expected minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or a duration like 90s, 2h, 1h30m";

/// A time limit in seconds: Slurm's `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, or a
/// humantime duration (`30s`, `2h`, `1h 30m`). A bare number is minutes, as in Slurm; unlike
/// Slurm, seconds are kept exact rather than rounded up to a minute. Zero and "unlimited" are
/// refused: every Flex job has a finite limit, which backfilling relies on.
pub fn parse_time(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let err = |why: &str| bad("time", s, why);
    if t.is_empty() {
        return Err(err(TIME_FORMATS));
    }
    let lower = t.to_ascii_lowercase();
    if matches!(lower.as_str(), "unlimited" | "infinite" | "inf") {
        return Err(err("Flex needs a finite time limit"));
    }
    let secs = if t
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b':' || b == b'-')
    {
        slurm_time(t).ok_or_else(|| err(TIME_FORMATS))?
    } else {
        let d = humantime::parse_duration(t).map_err(|_| err(TIME_FORMATS))?;
        d.as_secs() + u64::from(d.subsec_nanos() > 0)
    };
    if secs == 0 {
        return Err(err("the time limit must be more than 0 seconds"));
    }
    Ok(secs)
}

/// Slurm's colon/dash forms; None when the shape is not one of them or a number overflows.
fn slurm_time(t: &str) -> Option<u64> {
    let num = |p: &str| -> Option<u64> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        p.parse().ok()
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Option<_>>()?;
    let (h, m, sec) = match (days.is_some(), parts.as_slice()) {
        (false, [m]) => (0, *m, 0),
        (false, [m, s]) => (0, *m, *s),
        (false, [h, m, s]) => (*h, *m, *s),
        (true, [h]) => (*h, 0, 0),
        (true, [h, m]) => (*h, *m, 0),
        (true, [h, m, s]) => (*h, *m, *s),
        _ => return None,
    };
    days.unwrap_or(0)
        .checked_mul(86_400)?
        .checked_add(h.checked_mul(3600)?)?
        .checked_add(m.checked_mul(60)?)?
        .checked_add(sec)
}

/// Format seconds the way squeue does: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn format_duration(secs: u64) -> String {
    let mut s = String::new();
    push_duration(&mut s, secs);
    s
}

/// [`format_duration`] onto the end of `out` (flexq writes 200,000 of them).
pub fn push_duration(out: &mut String, secs: u64) {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let two = |out: &mut String, v: u64| {
        out.push(char::from(b'0' + (v / 10) as u8));
        out.push(char::from(b'0' + (v % 10) as u8));
    };
    if d > 0 {
        push_u64(out, d);
        out.push('-');
        two(out, h);
        out.push(':');
    } else if h > 0 {
        push_u64(out, h);
        out.push(':');
    }
    if d > 0 || h > 0 {
        two(out, m);
    } else {
        push_u64(out, m);
    }
    out.push(':');
    two(out, s);
}

/// The unit a size without a suffix is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeUnit {
    Bytes,
    /// Slurm's `--mem` default.
    Mebibytes,
}

impl SizeUnit {
    fn bytes(self) -> f64 {
        match self {
            SizeUnit::Bytes => 1.0,
            SizeUnit::Mebibytes => (1u64 << 20) as f64,
        }
    }
}

/// A size in bytes: a number (decimals allowed) and an optional unit, `B`, `K`, `M`, `G`, `T`,
/// each also as `KB`/`KiB` and so on, case-insensitive. All multiples are binary (1024), as in
/// Slurm; a number without a unit counts in `default_unit`.
pub fn parse_size(s: &str, default_unit: SizeUnit) -> Result<u64, ValueError> {
    const EXPECTED: &str =
        "expected a number with an optional unit B, K, M, G or T (e.g. 512M, 16G, 1.5GiB)";
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    if num.is_empty() || num.starts_with('.') && num.len() == 1 {
        return Err(bad("size", s, EXPECTED));
    }
    let n: f64 = num.parse().map_err(|_| bad("size", s, EXPECTED))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" => default_unit.bytes(),
        "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => (1u64 << 20) as f64,
        "g" | "gb" | "gib" => (1u64 << 30) as f64,
        "t" | "tb" | "tib" => (1u64 << 40) as f64,
        _ => return Err(bad("size", s, format!("unknown unit {unit:?}; {EXPECTED}"))),
    };
    let bytes = (n * mult).ceil();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad("size", s, "too large"));
    }
    if bytes < 1.0 {
        return Err(bad("size", s, "must be more than 0 bytes"));
    }
    Ok(bytes as u64)
}

/// A GPU fraction or count: a finite number greater than 0 (`0.25`, `1`, `2`).
pub fn parse_fraction(s: &str) -> Result<f64, ValueError> {
    let why = "expected a finite number greater than 0 (a fraction like 0.5, or a GPU count)";
    let f: f64 = s.trim().parse().map_err(|_| bad("GPU fraction", s, why))?;
    if !f.is_finite() || f <= 0.0 {
        return Err(bad("GPU fraction", s, why));
    }
    Ok(f)
}

/// A whole number of at least 1 (leaves, cores, batch size).
pub fn parse_count(what: &'static str, s: &str) -> Result<u32, ValueError> {
    let t = s.trim();
    if t.starts_with('-')
        || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && t.bytes().all(|b| b == b'0'))
    {
        return Err(bad(what, s, "must be at least 1"));
    }
    let n: u32 = t
        .parse()
        .map_err(|_| bad(what, s, "expected a whole number of at least 1"))?;
    Ok(n)
}

/// Check an output pattern: sbatch's filename patterns ([`flex_proto::fname`]), which flexd
/// expands when the job starts.
pub fn parse_output_pattern(s: &str) -> Result<String, ValueError> {
    if s.is_empty() {
        return Err(bad("output pattern", s, "the path is empty"));
    }
    if s.contains('\0') {
        return Err(bad("output pattern", s, "the path holds a NUL byte"));
    }
    flex_proto::fname::check(s).map_err(|e| match e {
        // A path too long to name a file is shown by its start.
        flex_proto::fname::PatternError::TooLong(_) => {
            let start: String = s.chars().take(64).collect();
            bad("output pattern", &(start + "…"), e.to_string())
        }
        e => bad("output pattern", s, e.to_string()),
    })?;
    Ok(s.to_string())
}

/// A signal by name (`TERM`, `SIGTERM`, `usr1`) or number (`10`), as scancel takes it.
pub fn parse_signal(s: &str) -> Result<i32, ValueError> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<i32>() {
            Ok(n) if (1..=libc::SIGRTMAX()).contains(&n) => Ok(n),
            _ => Err(bad(
                "signal",
                s,
                format!("numbers go from 1 to {}", libc::SIGRTMAX()),
            )),
        };
    }
    let upper = t.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse::<nix::sys::signal::Signal>()
        .map(|sig| sig as i32)
        .map_err(|_| {
            bad(
                "signal",
                s,
                "expected a name like TERM, KILL, USR1 or a number",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slurm_and_humantime_times() {
        let cases = [
            ("10", 600),
            ("10:30", 630),
            ("1:02:03", 3723),
            ("2-3", 2 * 86_400 + 3 * 3600),
            ("2-3:04", 2 * 86_400 + 3 * 3600 + 240),
            ("1-00:00:05", 86_405),
            ("0:03", 3),
            ("30s", 30),
            ("2h", 7200),
            ("1h 30m", 5400),
            ("1h30m", 5400),
        ];
        for (s, want) in cases {
            assert_eq!(parse_time(s), Ok(want), "{s}");
        }
    }

    #[test]
    fn bad_times_name_the_value() {
        for s in [
            "abc",
            "",
            "1:2:3:4",
            "1-2-3",
            "-5",
            "1:",
            ":5",
            "0",
            "0:00",
            "unlimited",
            "1x",
        ] {
            let e = parse_time(s).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("invalid time {s:?}")),
                "{e}"
            );
        }
        assert!(parse_time("99999999999999999999").is_err());
        assert!(parse_time("999999999999999-0").is_err());
    }

    #[test]
    fn durations_format_like_squeue() {
        assert_eq!(format_duration(5), "0:05");
        assert_eq!(format_duration(3723), "1:02:03");
        assert_eq!(format_duration(86_405), "1-00:00:05");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M", SizeUnit::Bytes), Ok(512 << 20));
        assert_eq!(parse_size("16G", SizeUnit::Bytes), Ok(16 << 30));
        assert_eq!(parse_size("1.5GiB", SizeUnit::Bytes), Ok(3 << 29));
        assert_eq!(parse_size("16 gb", SizeUnit::Bytes), Ok(16 << 30));
        assert_eq!(parse_size("4096", SizeUnit::Bytes), Ok(4096));
        assert_eq!(parse_size("4096", SizeUnit::Mebibytes), Ok(4096 << 20));
        assert_eq!(parse_size("100B", SizeUnit::Mebibytes), Ok(100));
        for s in [
            "",
            "G",
            "1.2.3G",
            "16X",
            "0",
            "0M",
            "-1G",
            "1e999",
            "99999999999T",
            ".",
        ] {
            let e = parse_size(s, SizeUnit::Bytes).unwrap_err();
            assert!(e.to_string().starts_with("invalid size"), "{e}");
        }
        assert_eq!(format_size(16 << 30), "16G");
        assert_eq!(format_size(3 << 29), "1.50G");
        assert_eq!(format_size(100), "100B");
    }

    #[test]
    fn fractions_and_counts() {
        assert_eq!(parse_fraction("0.25"), Ok(0.25));
        assert_eq!(parse_fraction("2"), Ok(2.0));
        for s in ["NaN", "0", "-1", "inf", "x", ""] {
            let e = parse_fraction(s).unwrap_err();
            assert!(e.to_string().contains(&format!("{s:?}")), "{e}");
        }
        assert_eq!(parse_count("leaves", "4"), Ok(4));
        for s in ["0", "00", "-1", "1.5", "x", "", "99999999999"] {
            let e = parse_count("leaves", s).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("invalid leaves {s:?}")),
                "{e}"
            );
        }
    }

    #[test]
    fn output_patterns() {
        for s in [
            "out-%j-%x-%u-100%%.log",
            "slurm-%N.out",
            "%5j-%3a-%J.%s",
            "%A_%a",
        ] {
            assert_eq!(parse_output_pattern(s).as_deref(), Ok(s), "{s}");
        }
        for s in ["slurm-%q.out", "a%", "%5", ""] {
            assert!(parse_output_pattern(s).is_err(), "{s}");
        }
        let e = parse_output_pattern("slurm-%q.out")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"%q\""), "{e}");
        // Longer than a path: refused by its length, shown by its start.
        let e = parse_output_pattern(&"%x".repeat(3000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("6000 bytes, longer than a path may be (4096)") && e.len() < 300,
            "{e}"
        );
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("sigusr1"), Ok(libc::SIGUSR1));
        assert_eq!(parse_signal("KILL"), Ok(libc::SIGKILL));
        assert_eq!(parse_signal("10"), Ok(10));
        for s in ["0", "BOGUS", "", "999", "-9"] {
            assert!(parse_signal(s).is_err(), "{s}");
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic_and_errors_name_the_value(s in "\\PC{0,24}") {
            let quoted = format!("{s:?}");
            let errors = [
                parse_time(&s).err(),
                parse_size(&s, SizeUnit::Mebibytes).err(),
                parse_fraction(&s).err(),
                parse_count("leaves", &s).err(),
                parse_output_pattern(&s).err(),
                parse_signal(&s).err(),
            ];
            for e in errors.into_iter().flatten() {
                prop_assert!(e.to_string().contains(&quoted), "{}", e);
            }
        }

        #[test]
        fn accepted_values_are_in_range(s in "[0-9:.\\-a-zA-Z ]{0,12}") {
            if let Ok(t) = parse_time(&s) { prop_assert!(t > 0); }
            if let Ok(b) = parse_size(&s, SizeUnit::Bytes) { prop_assert!(b > 0); }
            if let Ok(f) = parse_fraction(&s) { prop_assert!(f.is_finite() && f > 0.0); }
            if let Ok(n) = parse_count("n", &s) { prop_assert!(n > 0); }
        }

        #[test]
        fn slurm_times_round_trip(secs in 1u64..10_000_000) {
            prop_assert_eq!(parse_time(&format_duration(secs)), Ok(secs));
        }
    }
}
