//! Points in time as flexacct and flexreport take and print them, in the local time zone
//! (`TZ`, else the system's), as sacct does.
//!
//! Accepted: `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]` (or with a space), `HH:MM[:SS]` (today),
//! `now`, `now-N[unit]` / `now+N[unit]` (unit: seconds (the default), minutes, hours, days,
//! weeks, or their abbreviations s, sec, m, min, h, d, w), `today` and `midnight` (00:00
//! today), `yesterday`, `tomorrow`, `noon` (12:00 today) and a bare number of seconds since
//! the epoch. Pure functions of the text and the current time.

use crate::units::ValueError;
use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, Zoned};

const FORMS: &str = "expected YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS], now[-N{seconds|minutes|hours|\
                     days|weeks}], today, yesterday, tomorrow, midnight, noon or seconds since \
                     the epoch";

fn bad(value: &str, why: impl Into<String>) -> ValueError {
    ValueError {
        what: "time",
        value: value.to_string(),
        why: why.into(),
    }
}

/// The current time in the local time zone.
pub fn local_now() -> Zoned {
    Zoned::now()
}

/// Seconds since the epoch (times before it are clamped to 0).
pub fn secs(z: &Zoned) -> u64 {
    z.timestamp().as_second().max(0) as u64
}

/// Parse `s` relative to `now` (whose time zone is the one meant).
pub fn parse(s: &str, now: &Zoned) -> Result<Zoned, ValueError> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let today = now.date();
    let at = |d: Date, time: Time| -> Result<Zoned, ValueError> {
        d.to_datetime(time)
            .to_zoned(now.time_zone().clone())
            .map_err(|e| bad(s, e.to_string()))
    };
    let day = |offset: i64| -> Result<Zoned, ValueError> {
        let d = today
            .checked_add(Span::new().days(offset))
            .map_err(|e| bad(s, e.to_string()))?;
        at(d, Time::midnight())
    };
    match lower.as_str() {
        "" => return Err(bad(s, FORMS)),
        "now" => return Ok(now.clone()),
        "today" | "midnight" => return day(0),
        "yesterday" => return day(-1),
        "tomorrow" => return day(1),
        "noon" => return at(today, Time::constant(12, 0, 0, 0)),
        _ => {}
    }
    if let Some(rest) = lower.strip_prefix("now") {
        return relative(s, rest, now);
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        let n: i64 = t.parse().map_err(|_| bad(s, "too large"))?;
        return Timestamp::from_second(n)
            .map(|ts| ts.to_zoned(now.time_zone().clone()))
            .map_err(|e| bad(s, e.to_string()));
    }
    let shape_ok = t
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b':' | b'T' | b't' | b' '));
    if !shape_ok {
        return Err(bad(s, FORMS));
    }
    if t.len() == 10 && t.as_bytes()[4] == b'-' {
        let d: Date = t.parse().map_err(|e: jiff::Error| bad(s, e.to_string()))?;
        return at(d, Time::midnight());
    }
    if t.contains('-') {
        let dt: DateTime = t
            .replacen(' ', "T", 1)
            .parse()
            .map_err(|e: jiff::Error| bad(s, format!("{e}; {FORMS}")))?;
        return at(dt.date(), dt.time());
    }
    let time: Time = t
        .parse()
        .map_err(|e: jiff::Error| bad(s, format!("{e}; {FORMS}")))?;
    at(today, time)
}

/// `-N[unit]` or `+N[unit]` after `now`.
fn relative(s: &str, rest: &str, now: &Zoned) -> Result<Zoned, ValueError> {
    let sign = match rest.as_bytes().first() {
        Some(b'-') => -1,
        Some(b'+') => 1,
        _ => return Err(bad(s, FORMS)),
    };
    let body = rest[1..].trim();
    let split = body
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(body.len());
    let (num, unit) = body.split_at(split);
    let n: i64 = num
        .parse()
        .map_err(|_| bad(s, "expected a number after now- or now+"))?;
    let n = n * sign;
    let span = match unit.trim() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => Span::new().try_seconds(n),
        "m" | "min" | "mins" | "minute" | "minutes" => Span::new().try_minutes(n),
        "h" | "hour" | "hours" => Span::new().try_hours(n),
        "d" | "day" | "days" => Span::new().try_days(n),
        "w" | "week" | "weeks" => Span::new().try_weeks(n),
        u => {
            return Err(bad(
                s,
                format!("unknown unit {u:?}: expected seconds, minutes, hours, days or weeks"),
            ))
        }
    }
    .map_err(|e| bad(s, e.to_string()))?;
    now.checked_add(span).map_err(|e| bad(s, e.to_string()))
}

/// `2026-11-21T10:00:00` in `tz`.
pub fn format(secs: u64, tz: &TimeZone) -> String {
    match Timestamp::from_second(secs as i64) {
        Ok(ts) => ts
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%dT%H:%M:%S")
            .to_string(),
        Err(_) => "Unknown".to_string(),
    }
}

/// sacct's durations: `[D-]HH:MM:SS`.
pub fn format_elapsed(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Zoned {
        // Saturday 2026-11-21 10:30:15 in UTC.
        "2026-11-21T10:30:15[UTC]".parse().unwrap()
    }

    fn p(s: &str) -> String {
        parse(s, &now())
            .map(|z| z.strftime("%Y-%m-%dT%H:%M:%S").to_string())
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn absolute_and_relative_forms() {
        assert_eq!(p("2026-11-20"), "2026-11-20T00:00:00");
        assert_eq!(p("2026-11-20T08:05"), "2026-11-20T08:05:00");
        assert_eq!(p("2026-11-20T08:05:09"), "2026-11-20T08:05:09");
        assert_eq!(p("2026-11-20 08:05"), "2026-11-20T08:05:00");
        assert_eq!(p("09:15"), "2026-11-21T09:15:00");
        assert_eq!(p("09:15:30"), "2026-11-21T09:15:30");
        assert_eq!(p("now"), "2026-11-21T10:30:15");
        assert_eq!(p("NOW-1day"), "2026-11-20T10:30:15");
        assert_eq!(p("now-2hours"), "2026-11-21T08:30:15");
        assert_eq!(p("now-30minutes"), "2026-11-21T10:00:15");
        assert_eq!(p("now-90"), "2026-11-21T10:28:45");
        assert_eq!(p("now+1w"), "2026-11-28T10:30:15");
        assert_eq!(p("today"), "2026-11-21T00:00:00");
        assert_eq!(p("midnight"), "2026-11-21T00:00:00");
        assert_eq!(p("yesterday"), "2026-11-20T00:00:00");
        assert_eq!(p("tomorrow"), "2026-11-22T00:00:00");
        assert_eq!(p("noon"), "2026-11-21T12:00:00");
        assert_eq!(p("0"), "1970-01-01T00:00:00");
    }

    #[test]
    fn local_time_zones_shift_the_instant() {
        let tokyo: Zoned = "2026-11-21T10:30:15[Asia/Tokyo]".parse().unwrap();
        let z = parse("2026-11-21T09:00", &tokyo).unwrap();
        assert_eq!(z.timestamp().to_string(), "2026-11-21T00:00:00Z");
        assert_eq!(format(secs(&z), tokyo.time_zone()), "2026-11-21T09:00:00");
    }

    #[test]
    fn bad_times_say_what_was_expected() {
        for s in [
            "",
            "soon",
            "now-",
            "now-3fortnights",
            "2026-13-01",
            "25:00",
            "2026-11-21T",
            "now*2",
        ] {
            let e = parse(s, &now()).unwrap_err().to_string();
            assert!(e.starts_with(&format!("invalid time {s:?}")), "{s}: {e}");
        }
        assert!(parse("soon", &now())
            .unwrap_err()
            .to_string()
            .contains("YYYY-MM-DD"));
    }

    #[test]
    fn elapsed_like_sacct() {
        assert_eq!(format_elapsed(5), "00:00:05");
        assert_eq!(format_elapsed(3725), "01:02:05");
        assert_eq!(format_elapsed(90_061), "1-01:01:01");
    }
}
