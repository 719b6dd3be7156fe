//! Reading a batch script's `#FLEX` and `#SBATCH` directives, the way sbatch reads its own:
//! from the top of the script (the `#!` line first) until the first line that is neither blank
//! nor a comment. Each error names the file, the line number and the directive.

use crate::options::{self, Key, OptSpec, Settings};

/// The prefixes that mark a directive line; both mean the same options.
pub const PREFIXES: [&str; 2] = ["#FLEX", "#SBATCH"];

/// Split a directive's text into words as sbatch does (its `get_argument`): whitespace
/// separates, single and double quotes group, a backslash takes the next character as it is
/// (in quotes too: `-o out\\%j` reaches the job as `out\%j`), and an unquoted `#` begins a
/// comment, at the start of a word or within one.
fn words(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = cur.take() {
                    out.push(w);
                }
            }
            '#' => break,
            '\\' => cur.get_or_insert_with(String::new).extend(chars.next()),
            '\'' | '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(x) => w.push(x),
                        None => return Err(format!("unclosed {c} quote")),
                    }
                }
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(cur);
    Ok(out)
}

/// One option as written in a directive, for error messages.
struct Written<'a> {
    spec: &'static OptSpec,
    shown: String,
    value: Option<&'a str>,
}

/// Pair each option word with its value (`--opt=value`, `--opt value`, `-o value`, `-ovalue`).
fn options_of(words: &[String]) -> Result<Vec<Written<'_>>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        let (spec, inline) = if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let spec = options::by_long(name)
                .ok_or_else(|| format!("{w}: unknown option \"--{name}\""))?;
            (spec, inline)
        } else if let Some(short) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            let c = short.chars().next().expect("non-empty");
            let spec =
                options::by_short(c).ok_or_else(|| format!("{w}: unknown option \"-{c}\""))?;
            let rest = &short[c.len_utf8()..];
            (spec, (!rest.is_empty()).then_some(rest))
        } else {
            return Err(format!(
                "{w}: expected an option (-x or --name), found {w:?}"
            ));
        };
        let written = match (spec.value, inline) {
            // `--exclusive=user`, `--get-user-env=60L`.
            (None, Some(v)) if spec.optional_value() => Written {
                spec,
                shown: w.clone(),
                value: Some(v),
            },
            (None, Some(_)) => {
                return Err(format!("{w}: option \"--{}\" takes no value", spec.long))
            }
            (None, None) => Written {
                spec,
                shown: w.clone(),
                value: None,
            },
            (Some(_), Some(v)) => Written {
                spec,
                shown: w.clone(),
                value: Some(v),
            },
            (Some(name), None) => match words.get(i) {
                Some(v) => {
                    i += 1;
                    Written {
                        spec,
                        shown: format!("{w} {v}"),
                        value: Some(v),
                    }
                }
                None => {
                    return Err(format!(
                        "{w}: option \"--{}\" needs a value ({name})",
                        spec.long
                    ))
                }
            },
        };
        out.push(written);
    }
    Ok(out)
}

/// The directive prefix a line starts with, and the rest of the line.
fn directive(line: &str) -> Option<(&'static str, &str)> {
    PREFIXES.iter().find_map(|p| {
        let rest = line.strip_prefix(p)?;
        (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some((*p, rest))
    })
}

/// Apply the directives of `script` (shown as `file` in messages) to `settings`, in order.
/// The warning for a `--mem` that may have been meant as GPU memory.
pub const MEM_IS_HOST_MEMORY: &str =
    "--mem is host memory (RAM), as in Slurm; for GPU memory write --gpu-mem";

/// Returns warnings for options Flex accepts but ignores. A bad directive does not stop the
/// reading: every bad one is reported, one per line of the error, so a user fixes a script in
/// one round.
pub fn apply_directives(
    file: &str,
    script: &str,
    settings: &mut Settings,
) -> Result<Vec<String>, String> {
    apply_directives_noting(file, script, settings, &mut Vec::new())
}

/// [`apply_directives`], noting in `origins` the line that set each option
/// (`job.sh:3: #SBATCH --qos=gpu`, in order), so flexd's refusals can name it.
pub fn apply_directives_noting(
    file: &str,
    script: &str,
    settings: &mut Settings,
    origins: &mut Vec<(Key, String)>,
) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for (idx, line) in script.lines().enumerate() {
        let n = idx + 1;
        let trimmed = line.trim();
        if !(trimmed.is_empty() || trimmed.starts_with('#')) {
            break;
        }
        let Some((prefix, rest)) = directive(line) else {
            continue;
        };
        let at = |msg: String| format!("{file}:{n}: {prefix} {msg}");
        let written = words(rest)
            .map_err(|e| format!("{}: {e}", rest.trim()))
            .and_then(|ws| {
                options_of(&ws).map(|w| {
                    w.into_iter()
                        .map(|w| (w.spec, w.value.map(str::to_owned), w.shown.to_string()))
                        .collect::<Vec<_>>()
                })
            });
        let written = match written {
            Ok(w) => w,
            Err(e) => {
                errors.push(at(e));
                continue;
            }
        };
        for (spec, value, shown) in written {
            let applied = settings.apply(spec, value.as_deref()).map(|w| {
                // `#FLEX --mem` was GPU memory before it took Slurm's meaning.
                w.or_else(|| {
                    (prefix == "#FLEX" && spec.key == Key::Mem)
                        .then(|| MEM_IS_HOST_MEMORY.to_string())
                })
            });
            if applied.is_ok() {
                origins.push((spec.key, at(shown.clone())));
            }
            match applied {
                Ok(Some(warning)) => warnings.push(at(format!("{shown}: {warning}"))),
                Ok(None) => {}
                Err(e) => errors.push(at(format!("{shown}: {e}"))),
            }
        }
    }
    if errors.is_empty() {
        Ok(warnings)
    } else {
        Err(errors.join("\n"))
    }
}

/// Refuse a script with more than `max` directive lines (flexd's `max_directives`), naming the
/// first line over the limit.
pub fn check_directive_count(file: &str, script: &str, max: u32) -> Result<(), String> {
    let mut count = 0u64;
    for (idx, line) in script.lines().enumerate() {
        let trimmed = line.trim();
        if !(trimmed.is_empty() || trimmed.starts_with('#')) {
            break;
        }
        if directive(line).is_some() {
            count += 1;
            if count > u64::from(max) {
                return Err(format!(
                    "{file}:{}: more than max_directives = {max} directive lines (#FLEX and \
                     #SBATCH)",
                    idx + 1
                ));
            }
        }
    }
    Ok(())
}

/// The script `--wrap` runs.
pub fn wrap(cmd: &str) -> String {
    format!("#!/bin/sh\n{cmd}\n")
}

/// The lines of `script` that start workers with `accelerate launch` or `deepspeed`, each as
/// `file:line: command: why, and the one-line change`. Those launchers give every worker all
/// of the job's leaves and a local rank, but CUDA shows each process one MIG instance only, so
/// in a job of several leaves every worker but the first finds no device.
pub fn launchers_needing_torchrun(file: &str, script: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in script.lines().enumerate() {
        let cmd = line.trim_start();
        let cmd = cmd.strip_prefix("exec ").map_or(cmd, str::trim_start);
        let mut w = cmd.split_whitespace();
        let launcher = match (w.next(), w.next()) {
            (Some("accelerate"), Some("launch")) => "accelerate launch",
            (Some("deepspeed"), _) => "deepspeed",
            _ => continue,
        };
        found.push(format!(
            "{file}:{}: {}: {launcher} starts every worker with all of the job's leaves, and \
             a process sees only one MIG leaf; start the workers with torchrun instead (one \
             leaf each): replace `{launcher}` and its own options by `torchrun \
             --nproc-per-node=gpu`, or run `flexrun python SCRIPT ARGS`",
            n + 1,
            line.trim()
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::Mode;

    fn read(script: &str) -> Result<(Settings, Vec<String>), String> {
        let mut s = Settings::default();
        let w = apply_directives("job.sh", script, &mut s)?;
        Ok((s, w))
    }

    #[test]
    fn directive_words_split_as_sbatch_splits_them() {
        let w = |t: &str| words(t).unwrap();
        assert_eq!(
            w(r#"-o out\%j.txt -J "a b""#),
            ["-o", "out%j.txt", "-J", "a b"]
        );
        assert_eq!(
            w(r#"-o 'x\\y' --comment="q\"q""#),
            ["-o", r"x\y", r#"--comment=q"q"#]
        );
        assert_eq!(w("-J name#comment"), ["-J", "name"]);
        assert_eq!(w("-J '#kept' # gone"), ["-J", "#kept"]);
        assert_eq!(w(r"-J a\ b"), ["-J", "a b"]);
    }

    #[test]
    fn arrays_dependencies_and_holds_come_from_either_prefix() {
        let (s, w) = read(
            "#!/bin/sh\n#SBATCH --array=1-9:2%3 -H\n#FLEX --dependency=afterok:5:6_2,singleton\n\
             #FLEX --no-requeue\ntrue\n",
        )
        .unwrap();
        assert!(w.is_empty(), "{w:?}");
        let q = &s.queue;
        assert_eq!(
            q.array.as_ref().map(|a| a.to_string()),
            Some("1-9:2%3".into())
        );
        let d = q.dependency.as_ref().unwrap().to_string();
        assert_eq!(d, "afterok:5,afterok:6_2,singleton");
        assert_eq!((q.hold, q.requeue), (true, Some(false)));
        let e = read("#!/bin/sh\n#SBATCH --array=5-1\n").unwrap_err();
        assert!(e.starts_with("job.sh:2: #SBATCH --array=5-1"), "{e}");
    }

    #[test]
    fn sbatch_only_script() {
        let (s, w) = read(
            "#!/bin/bash\n\
             #SBATCH -J train\n\
             #SBATCH --time=1:00:00   # one hour\n\
             #SBATCH --gres=gpu:1g.5gb:4\n\
             #SBATCH -c 2\n\
             #SBATCH --output=out-%j.log -e err-%j.log\n\
             #SBATCH --mem 16G\n\
             #SBATCH -A proj -p gpu\n\
             # SBATCH --time=abc (a plain comment)\n\
             \n\
             echo hi\n\
             #SBATCH --time=bogus (after the first command: not a directive)\n",
        )
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("train"));
        assert_eq!(s.time_limit_s, Some(3600));
        assert_eq!(s.leaves, Some(4));
        assert_eq!(s.leaf_type.as_deref(), Some("1g.5gb"));
        assert_eq!(s.cpus_per_task, Some(2));
        assert_eq!(s.stdout.as_deref(), Some("out-%j.log"));
        assert_eq!(s.stderr.as_deref(), Some("err-%j.log"));
        assert_eq!(s.mem_bytes, None, "#SBATCH --mem is host memory");
        assert_eq!(s.host_mem, Some(gres_plugin::HostMem::PerNode(16 << 30)));
        assert_eq!(s.account.as_deref(), Some("proj"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("job.sh:8: #SBATCH -p gpu: --partition is ignored"),
            "{w:?}"
        );
    }

    #[test]
    fn mem_0_is_all_of_the_hosts_memory() {
        let (s, w) = read("#!/bin/sh\n#SBATCH --mem-per-cpu=1G --mem=0\n").unwrap();
        assert_eq!(s.mem_bytes, None);
        assert_eq!(s.host_mem, Some(gres_plugin::HostMem::All));
        assert!(w.is_empty(), "{w:?}");
        let e = read("#!/bin/sh\n#FLEX --gpu-mem=0\n").unwrap_err();
        assert!(e.contains("must be more than 0"), "{e}");
    }

    #[test]
    fn flex_mem_is_host_memory_now_with_a_warning_naming_the_line() {
        let (s, w) = read("#!/bin/sh\n#FLEX --leaves 2\n#FLEX --mem=20G\n").unwrap();
        assert_eq!(s.mem_bytes, None);
        assert_eq!(s.host_mem, Some(gres_plugin::HostMem::PerNode(20 << 30)));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("job.sh:3: #FLEX --mem=20G: --mem is host memory")
                && w[0].contains("--gpu-mem"),
            "{w:?}"
        );
        let (s, w) = read("#!/bin/sh\n#FLEX --gpu-mem=20G\n").unwrap();
        assert_eq!(s.mem_bytes, Some(20 << 30));
        assert!(w.is_empty());
    }

    #[test]
    fn flex_directives_and_later_lines_win() {
        let (s, _) = read(
            "#!/bin/sh\n#FLEX --leaves 2 --leaf-type=1g.10gb\n#SBATCH --leaves=3\n\
             #FLEX --gpu-fraction 0.5 --placement balance-load\n#FLEX --model '/m dir' --batch-size 4 --seq-len 512 --infer\n",
        )
        .unwrap();
        assert_eq!(s.leaves, Some(3));
        assert_eq!(s.leaf_type.as_deref(), Some("1g.10gb"));
        assert_eq!(s.gpu_fraction, Some(0.5));
        assert_eq!(s.model.as_deref(), Some(std::path::Path::new("/m dir")));
        assert_eq!(s.mode, Some(Mode::Infer));
    }

    #[test]
    fn errors_name_file_line_and_directive() {
        let cases = [
            (
                "#!/bin/sh\n\n\n#SBATCH --time=abc\n",
                "job.sh:4: #SBATCH --time=abc: invalid time \"abc\"",
            ),
            (
                "#SBATCH --bogus=1\n",
                "job.sh:1: #SBATCH --bogus=1: unknown option \"--bogus\"",
            ),
            (
                "#!/bin/sh\n#FLEX -y 3\n",
                "job.sh:2: #FLEX -y: unknown option \"-y\"",
            ),
            (
                "#!/bin/sh\n#SBATCH --container-image=nvcr.io/nvidia/pytorch:24.01-py3\n",
                "job.sh:2: #SBATCH --container-image=nvcr.io/nvidia/pytorch:24.01-py3: \
                 --container-image is refused: Flex runs no pyxis/enroot containers",
            ),
            (
                "#!/bin/sh\n#SBATCH --uid=0\n",
                "job.sh:2: #SBATCH --uid=0: --uid is refused",
            ),
            (
                "#!/bin/sh\n#SBATCH -w elsewhere-node07\n",
                "job.sh:2: #SBATCH -w elsewhere-node07: --nodelist names elsewhere-node07",
            ),
            (
                "#!/bin/sh\n#FLEX --leaves -2\n",
                "job.sh:2: #FLEX --leaves -2: invalid leaves \"-2\"",
            ),
            (
                "#!/bin/sh\n#FLEX --gpu-fraction=NaN\n",
                "job.sh:2: #FLEX --gpu-fraction=NaN: invalid GPU fraction \"NaN\"",
            ),
            (
                "#!/bin/sh\n#FLEX --gpus=0.5\n",
                "job.sh:2: #FLEX --gpus=0.5: invalid GPU count \"0.5\": Slurm counts whole GPUs (on MIG, leaves); a share of a GPU's compute is --gpu-fraction 0.5",
            ),
            (
                "#!/bin/sh\n#SBATCH --mem=lots\n",
                "job.sh:2: #SBATCH --mem=lots: invalid size \"lots\"",
            ),
            (
                "#!/bin/sh\n#SBATCH --time\n",
                "job.sh:2: #SBATCH --time: option \"--time\" needs a value",
            ),
            (
                "#!/bin/sh\n#FLEX --train=yes\n",
                "job.sh:2: #FLEX --train=yes: option \"--train\" takes no value",
            ),
            (
                "#!/bin/sh\n#FLEX leaves 2\n",
                "job.sh:2: #FLEX leaves: expected an option",
            ),
            (
                "#!/bin/sh\n#FLEX -J 'open\n",
                "job.sh:2: #FLEX -J 'open: unclosed ' quote",
            ),
            (
                "#!/bin/sh\n#SBATCH -o slurm-%q.out\n",
                "job.sh:2: #SBATCH -o slurm-%q.out: invalid output pattern",
            ),
        ];
        for (script, want) in cases {
            let e = read(script).unwrap_err();
            assert!(e.starts_with(want), "{e}\n  wanted: {want}");
        }
    }

    #[test]
    fn every_bad_directive_is_reported_at_once() {
        let e = read(
            "#!/bin/sh\n#SBATCH -t never\n#SBATCH -J ok\n#FLEX --leaves=0 -J 'open\n#SBATCH --bogus\n",
        )
        .unwrap_err();
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 3, "{e}");
        assert!(lines[0].starts_with("job.sh:2: #SBATCH -t never"), "{e}");
        assert!(lines[1].starts_with("job.sh:4: #FLEX"), "{e}");
        assert!(lines[2].starts_with("job.sh:5: #SBATCH --bogus"), "{e}");
    }

    #[test]
    fn prefixes_need_a_word_boundary() {
        let (s, _) = read("#!/bin/sh\n#SBATCHX --time=abc\n#FLEXIBLE nothing\n#SBATCH\n").unwrap();
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn wrap_makes_a_sh_script() {
        assert_eq!(wrap("echo hi"), "#!/bin/sh\necho hi\n");
    }
}
