//! Comparing the two sides' answers to one form, as the form's [`Compare`] says: normalised
//! (times and dates, this machine's host name), and named down to the field or key that
//! differs, so that an accepted difference names exactly what it accepts.

use super::forms::{Compare, Form};
use super::setup::hostname;
use super::sides::Answer;

/// One difference between the sides.
pub(crate) struct Difference {
    /// The form, as [`shown`] writes it.
    pub(crate) form: String,
    /// What differs: `exit`, `stdout`, `field NAME`, `key NAME`, `state of ID`, ...
    pub(crate) part: String,
    pub(crate) slurm: String,
    pub(crate) flex: String,
}

/// The form's command line as the docs table writes it: separators as `\x1f`/`\x1e`, a long
/// field list cut after its first three fields.
pub(crate) fn shown(form: &Form) -> String {
    let words: Vec<String> = form
        .args
        .iter()
        .map(|a| {
            let sep = if a.matches(',').count() > 8 { ',' } else { ';' };
            let a = if a.matches(sep).count() > 8 {
                let first: Vec<&str> = a.split(sep).take(3).collect();
                format!("{}{sep}…", first.join(&sep.to_string()))
            } else {
                a.to_string()
            };
            let a = a.replace('\u{1f}', "\\x1f").replace('\u{1e}', "\\x1e");
            if a.is_empty() || a.contains([' ', '|', '%', '\\', ';']) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect();
    words.join(" ")
}

/// A side's job ids and the names of their jobs (`1002` is `run`).
pub(crate) type Roles = [(String, String)];

/// Job ids become their jobs' names in capitals (`RUN`), and the side's working directory
/// `WORKDIR`; times, dates and durations (a run of digits, `:`, `-`, `T` and `.` that holds a
/// `:`) become `TIME`; this machine's host name becomes `HOST`.
pub(crate) fn normal(text: &str, roles: &Roles) -> String {
    let mut text = text.to_string();
    for (path, name) in roles.iter().filter(|(p, _)| p.starts_with('/')) {
        text = text.replace(path, &name.to_uppercase());
    }
    let host = hostname();
    let text = if host.is_empty() {
        text
    } else {
        text.replace(&host, "HOST")
    };
    let text = job_names(&text, roles);
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.contains(':') && run.chars().any(|c| c.is_ascii_digit()) {
            out.push_str("TIME");
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() || ":-T.".contains(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Every whole number in `text` that is a job id in `roles` replaced by its job's name.
fn job_names(text: &str, roles: &Roles) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        match roles.iter().find(|(id, _)| id == digits) {
            Some((_, name)) => out.push_str(&name.to_uppercase()),
            None => out.push_str(digits),
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// The differences between Slurm's answer and Flex's to `form`. `slurm_state` gives a job's
/// state as Slurm's squeue shows it (for [`Compare::Accounting`]).
pub(crate) fn differences(
    form: &Form,
    slurm: &Answer,
    flex: &Answer,
    roles: [&Roles; 2],
    slurm_state: &dyn Fn(&str) -> Option<String>,
) -> Vec<Difference> {
    let name = shown(form);
    let mut out = Vec::new();
    let mut diff = |part: String, s: String, f: String| {
        if s != f {
            out.push(Difference {
                form: name.clone(),
                part,
                slurm: s,
                flex: f,
            });
        }
    };
    let exit = |a: &Answer| format!("{} {}", a.code, a.stderr.trim());
    if !matches!(form.compare, Compare::Accounting | Compare::WithoutDbd(_))
        && slurm.code != flex.code
    {
        diff("exit".into(), exit(slurm), exit(flex));
    }
    match form.compare {
        Compare::Status => {}
        Compare::Output => {
            let (s, f) = (
                normal(&slurm.stdout, roles[0]),
                normal(&flex.stdout, roles[1]),
            );
            let sorted = |t: &str| {
                let mut l: Vec<String> = t.lines().map(str::to_string).collect();
                l.sort();
                l
            };
            // The same lines in another order: no tool here reads the order.
            let part = if s != f && sorted(&s) == sorted(&f) {
                "line order"
            } else {
                "stdout"
            };
            diff(part.into(), s, f);
        }
        Compare::Fields(sep) => {
            let names = field_names(form, sep);
            let (s, f) = (
                normal(&slurm.stdout, roles[0]),
                normal(&flex.stdout, roles[1]),
            );
            let (s, f): (Vec<&str>, Vec<&str>) = (s.lines().collect(), f.lines().collect());
            diff("lines".into(), s.len().to_string(), f.len().to_string());
            for (i, (sl, fl)) in s.iter().zip(&f).enumerate() {
                let (sv, fv): (Vec<&str>, Vec<&str>) =
                    (sl.split(sep).collect(), fl.split(sep).collect());
                for (j, n) in names.iter().enumerate() {
                    let what = if i == 0 { "header" } else { "field" };
                    diff(
                        format!("{what} {n}"),
                        sv.get(j).unwrap_or(&"(none)").to_string(),
                        fv.get(j).unwrap_or(&"(none)").to_string(),
                    );
                }
            }
        }
        Compare::Keys(keys) | Compare::KeyShapes(keys) => {
            let shape = matches!(form.compare, Compare::KeyShapes(_));
            let (s, f) = (
                first_record(&normal(&slurm.stdout, roles[0])),
                first_record(&normal(&flex.stdout, roles[1])),
            );
            for k in keys {
                let value = |r: &[(String, String)]| {
                    let v = r
                        .iter()
                        .find(|(key, _)| key == k)
                        .map_or_else(|| "(none)".to_string(), |(_, v)| v.clone());
                    if shape {
                        v.chars()
                            .map(|c| if c.is_ascii_digit() { 'N' } else { c })
                            .collect()
                    } else {
                        v
                    }
                };
                diff(format!("key {k}"), value(&s), value(&f));
            }
        }
        Compare::WithoutDbd(_) => {
            // Flex's text is checked by the caller, which fills in its placeholders.
            diff(
                "Slurm's answer here".into(),
                if slurm.code != 0 || slurm.stdout.trim().is_empty() {
                    "no".into()
                } else {
                    format!("{} {}", exit(slurm), slurm.stdout)
                },
                "no".into(),
            );
            if flex.code != 0 {
                diff("exit".into(), "0".into(), exit(flex));
            }
        }
        Compare::Accounting => {
            let disabled =
                slurm.code != 0 && slurm.stderr.contains("accounting storage is disabled");
            diff(
                "Slurm's sacct answers here".into(),
                if disabled { "no".into() } else { exit(slurm) },
                "no".into(),
            );
            if flex.code != 0 {
                diff("exit".into(), "0".into(), exit(flex));
            }
            // A form whose fields hold no state (Snakemake's efficiency report) has none to
            // compare.
            let is_state = |w: &str| {
                let w = w.trim_end_matches('+');
                w.len() > 3
                    && w.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    && flex_proto::JobState::parse(w).is_some()
            };
            for line in flex.stdout.lines() {
                if !line.split(['|', '\u{1f}', ' ']).any(is_state) {
                    continue;
                }
                let id = line
                    .split(['|', '\u{1f}', ' '])
                    .find(|w| !w.is_empty())
                    .unwrap_or_default();
                // Flex's id, its job's name, Slurm's id of that job, its state there.
                let Some((_, name)) = roles[1].iter().find(|(i, _)| i == id) else {
                    continue;
                };
                let state = roles[0]
                    .iter()
                    .find(|(_, n)| n == name)
                    .and_then(|(slurm_id, _)| slurm_state(slurm_id));
                if let Some(state) = state {
                    let has = line
                        .split(['|', '\u{1f}', ' '])
                        .any(|w| w.trim_end_matches('+') == state);
                    let flex = if has { state.clone() } else { line.to_string() };
                    diff(format!("state of {name}"), state, flex);
                }
            }
        }
    }
    out
}

/// The names of the fields the form's format asks for: `-O NAME:suffix,...` or `-o` fields
/// between `sep`.
fn field_names(form: &Form, sep: char) -> Vec<String> {
    let i = form
        .args
        .iter()
        .position(|a| *a == "-O" || *a == "-o")
        .expect("a form compared by fields has -o or -O");
    let f = form.args[i + 1];
    if form.args[i] == "-O" {
        f.split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.split(':').next().unwrap_or(x).to_string())
            .collect()
    } else {
        f.split(sep).map(str::to_string).collect()
    }
}

/// The `Key=Value` pairs of the first record (its first line and the indented lines after it),
/// and every `Key = Value` line, as `scontrol show config` prints them.
fn first_record(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_first = true;
    for line in text.lines().skip_while(|l| l.trim().is_empty()) {
        if let Some((k, v)) = line.split_once(" = ") {
            out.push((k.trim().to_string(), v.trim().to_string()));
            continue;
        }
        let continued = line.starts_with([' ', '\t']) && !line.trim().is_empty();
        if !(in_first && (out.is_empty() || continued)) {
            in_first = false;
            continue;
        }
        for w in line.split_whitespace() {
            if let Some((k, v)) = w.split_once('=') {
                out.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

/// `pattern` with `*` matching any run of characters.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}
