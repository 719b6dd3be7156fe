//! flexrun's scontrol personality: the `scontrol` a job finds on its PATH (a link to flexrun
//! named `scontrol`, see flexd's `job_tmpdir`). It does what job scripts and the libraries they
//! run ask of scontrol from inside a job: `show hostname[s] [LIST]` (mmcv, torch launch
//! scripts), and `show job`, `show partition`, `requeue` (PyTorch Lightning's auto-requeue), `requeuehold`,
//! `hold`, `release` and `update`, which flexcontrol carries out with Slurm's meaning.

use crate::commands::control;
use crate::error::{exit, Error};
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;

/// What scontrol does with `words` (its arguments); returns its exit code.
pub fn scontrol(words: &[OsString], out: &mut impl Write) -> Result<i32, Error> {
    let w: Vec<String> = words
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    // Options that change only how it prints: `-o` is flexcontrol's too, the others do
    // nothing here.
    let oneliner = w.iter().any(|a| a == "-o" || a == "--oneliner");
    let w: Vec<&str> = w
        .iter()
        .map(String::as_str)
        .filter(|a| {
            !matches!(
                *a,
                "-o" | "--oneliner" | "-d" | "--details" | "-Q" | "--quiet"
            )
        })
        .collect();
    match w.as_slice() {
        ["show", "hostname" | "hostnames", rest @ ..] => {
            let list = match rest {
                [] => std::env::var("SLURM_JOB_NODELIST").map_err(|_| {
                    Error::Input("scontrol show hostnames: SLURM_JOB_NODELIST is not set".into())
                })?,
                [l] => l.to_string(),
                _ => {
                    return Err(Error::Input(
                        "scontrol show hostnames: one host list".into(),
                    ))
                }
            };
            let hosts = crate::options::expand_hostlist(&list).map_err(Error::Input)?;
            for h in hosts {
                writeln!(out, "{h}").map_err(Error::output)?;
            }
            Ok(exit::OK)
        }
        [cmd, ..]
            if matches!(
                cmd.to_ascii_lowercase().as_str(),
                "show" | "requeue" | "requeuehold" | "hold" | "release" | "update"
            ) =>
        {
            let mut args = vec!["flexcontrol".to_string(), cmd.to_ascii_lowercase()];
            args.extend(w[1..].iter().enumerate().map(|(i, s)| {
                // scontrol takes an entity's name abbreviated: `show part`.
                let partition = "partition".starts_with(&s.to_ascii_lowercase()) && s.len() >= 4;
                if i == 0 && cmd.eq_ignore_ascii_case("show") && partition {
                    "partition".to_string()
                } else {
                    s.to_string()
                }
            }));
            if oneliner && cmd.eq_ignore_ascii_case("show") {
                args.push("--oneliner".into());
            }
            let a = control::Args::try_parse_from(&args)
                .map_err(|e| Error::Input(format!("scontrol: {}", e.to_string().trim())))?;
            let code = control::run(&a, out)?;
            if w[1..]
                .first()
                .is_some_and(|e| e.eq_ignore_ascii_case("config"))
            {
                min_job_age(out)?;
            }
            Ok(code)
        }
        _ => Err(Error::Input(format!(
            "scontrol {}: in a Flex job scontrol knows show hostname[s], show job, show partition, show config, requeue, \
             requeuehold, hold, release and update (flexcontrol manages jobs)",
            w.join(" ")
        ))),
    }
}

/// Slurm's `MinJobAge` line, from flexd's `keep_finished` (how long a finished job stays in
/// the queue's view): Snakemake reads it to choose between squeue and sacct.
fn min_job_age(out: &mut impl Write) -> Result<(), Error> {
    let config =
        match crate::client::Client::connect("scontrol")?.call(&flex_proto::Request::Config)? {
            flex_proto::Response::Config(c) => c,
            other => return Err(crate::client::into_error(other)),
        };
    if let Some((_, v)) = config.iter().find(|(k, _)| k == "keep_finished") {
        if let Ok(d) = humantime::parse_duration(v) {
            writeln!(out, "MinJobAge               = {} sec", d.as_secs())
                .map_err(Error::output)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &str) -> (Result<i32, String>, String) {
        let words: Vec<OsString> = args.split_whitespace().map(OsString::from).collect();
        let mut out = Vec::new();
        let r = scontrol(&words, &mut out).map_err(|e| e.to_string());
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn host_lists_expand_one_per_line() {
        let (r, out) = run("show hostnames gpu[01-03],login");
        assert_eq!(r, Ok(0));
        assert_eq!(out, "gpu01\ngpu02\ngpu03\nlogin\n");
        let (r, out) = run("-o show hostname n1");
        assert_eq!((r, out.as_str()), (Ok(0), "n1\n"));
    }

    #[test]
    fn what_it_cannot_do_is_named() {
        let (r, _) = run("reconfigure");
        let e = r.unwrap_err();
        assert!(
            e.contains("scontrol reconfigure") && e.contains("show hostname"),
            "{e}"
        );
        let (r, _) = run("show node");
        assert!(r.unwrap_err().contains("node"));
    }
}
