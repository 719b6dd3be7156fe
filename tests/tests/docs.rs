//! The checked-in man pages (man/man1, man/man5, man/man8) and shell completions
//! (etc/completions/{bash,zsh,fish}) are generated from the commands' clap definitions and
//! from the commented etc/flexd.toml. These tests regenerate them and fail when the checked-in
//! files differ; `FLEX_BLESS=1 cargo test -p flex-tests --test docs` writes them instead.
//! They also check that every page renders through groff and man without a warning.

use clap::CommandFactory;
use clap_complete::Shell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
        .to_path_buf()
}

/// Every user command, as the binaries build them.
fn commands() -> Vec<clap::Command> {
    vec![
        flexsub::commands::submit::command(),
        flexsub::commands::queue::Args::command(),
        flexsub::commands::cancel::Args::command(),
        flexsub::commands::control::Args::command(),
        flexsub::commands::run::Args::command(),
        flexsub::commands::acct::Args::command(),
        flexsub::commands::eff::Args::command(),
        flexsub::commands::report::Args::command(),
        flexsub::commands::prio::Args::command(),
        flexsub::commands::share::Args::command(),
        flexsim::cli::Cli::command(),
        gres_plugin::flexgres::Cli::command(),
    ]
}

fn render(man: &clap_mangen::Man, f: impl Fn(&clap_mangen::Man, &mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(man, &mut out);
    out
}

/// flexd(8): clap's sections around the hand-written man/flexd.8.extra.
fn flexd_page() -> Vec<u8> {
    let cmd = flexd::cli::Cli::command();
    let man = clap_mangen::Man::new(cmd)
        .section("8")
        .manual("System Administration");
    let extra = std::fs::read(root().join("man/flexd.8.extra")).expect("man/flexd.8.extra");
    let mut out = Vec::new();
    let sections: [fn(&clap_mangen::Man, &mut Vec<u8>); 5] = [
        |m, o| m.render_title(o).unwrap(),
        |m, o| m.render_name_section(o).unwrap(),
        |m, o| m.render_synopsis_section(o).unwrap(),
        |m, o| m.render_description_section(o).unwrap(),
        |m, o| m.render_options_section(o).unwrap(),
    ];
    for s in sections {
        out.extend(render(&man, s));
    }
    out.extend(extra);
    out.extend(render(&man, |m, o| m.render_version_section(o).unwrap()));
    out
}

/// Text for roff: backslashes escaped, a leading `.` or `'` protected.
fn roff(line: &str) -> String {
    let s = line.replace('\\', "\\e");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// flexd.toml(5) from etc/flexd.toml: its first comment paragraphs are the description, each
/// comment block before a key documents that key, `[table]` lines start subsections.
fn flexd_toml_page() -> Vec<u8> {
    let text = std::fs::read_to_string(root().join("etc/flexd.toml")).expect("etc/flexd.toml");
    let version = env!("CARGO_PKG_VERSION");
    let mut out = format!(
        ".TH FLEXD.TOML 5 \"\" \"flexd {version}\" \"File Formats\"\n\
         .SH NAME\nflexd.toml \\- configuration of the Flex controller flexd\n\
         .SH SYNOPSIS\n/etc/flex/flexd.toml\n.SH DESCRIPTION\n"
    );
    let mut comment: Vec<&str> = Vec::new();
    // Keys written one after another share the comment above the first.
    let mut keys: Vec<&str> = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    let mut in_keys = false;
    for line in text.lines() {
        if let Some(c) = line.strip_prefix('#') {
            flush_keys(&mut out, &mut keys, &mut doc);
            comment.push(c.strip_prefix(' ').unwrap_or(c));
            continue;
        }
        let line = line.trim();
        if line.is_empty() {
            flush_keys(&mut out, &mut keys, &mut doc);
            if !comment.is_empty() {
                if in_keys {
                    out.push_str(".PP\n");
                }
                paragraph(&mut out, &comment);
                out.push_str(".PP\n");
                comment.clear();
            }
            continue;
        }
        if !in_keys {
            out.push_str(".SH KEYS\n");
            in_keys = true;
        }
        if let Some(table) = line.strip_prefix('[') {
            flush_keys(&mut out, &mut keys, &mut doc);
            out.push_str(&format!(".SS [{}\n", roff(table)));
            paragraph(&mut out, &comment);
            comment.clear();
        } else {
            if !comment.is_empty() {
                flush_keys(&mut out, &mut keys, &mut doc);
                doc = std::mem::take(&mut comment);
            }
            keys.push(line);
        }
    }
    flush_keys(&mut out, &mut keys, &mut doc);
    out.push_str(
        ".SH FILES\n.TP\n/etc/flex/flexd.toml\nThe site configuration \
         (\\fBflexd \\-\\-config\\fR, else \\fBFLEX_CONFIG\\fR). The commands read its \
         \\fBsocket\\fR key too.\n.SH SEE ALSO\n\\fBflexd\\fR(8), \\fBflexsub\\fR(1), \
         \\fBflexacct\\fR(1)\n",
    );
    out.into_bytes()
}

/// Comment lines as roff text: an empty line starts a paragraph, an indented one its own line.
fn paragraph(out: &mut String, lines: &[&str]) {
    for l in lines {
        if l.is_empty() {
            out.push_str(".PP\n");
        } else if l.starts_with("  ") {
            out.push_str(&format!(".br\n\\ \\ {}\n", roff(l.trim_start())));
        } else {
            out.push_str(&roff(l));
            out.push('\n');
        }
    }
}

/// `key = value` lines as one tagged paragraph (`.TP`, then `.TQ` for each further key) with
/// their comment.
fn flush_keys(out: &mut String, keys: &mut Vec<&str>, doc: &mut Vec<&str>) {
    for (i, line) in keys.iter().enumerate() {
        let (key, value) = line.split_once('=').expect("key = value");
        out.push_str(if i == 0 { ".TP\n" } else { ".TQ\n" });
        out.push_str(&format!(
            "\\fB{}\\fR = {}\n",
            roff(key.trim()),
            roff(value.trim())
        ));
    }
    if !keys.is_empty() {
        paragraph(out, doc);
    }
    keys.clear();
    doc.clear();
}

/// Every generated file by its path under the repository.
fn generated() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut all = commands();
    for cmd in &all {
        let name = cmd.get_name().to_string();
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .manual("Flex Manual")
            .render(&mut page)
            .unwrap();
        files.insert(PathBuf::from(format!("man/man1/{name}.1")), page);
    }
    files.insert(PathBuf::from("man/man8/flexd.8"), flexd_page());
    files.insert(PathBuf::from("man/man5/flexd.toml.5"), flexd_toml_page());
    all.push(flexd::cli::Cli::command());
    for mut cmd in all {
        let name = cmd.get_name().to_string();
        for (shell, path) in [
            (Shell::Bash, format!("etc/completions/bash/{name}")),
            (Shell::Zsh, format!("etc/completions/zsh/_{name}")),
            (Shell::Fish, format!("etc/completions/fish/{name}.fish")),
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, &name, &mut buf);
            files.insert(PathBuf::from(path), buf);
        }
    }
    files
}

#[test]
fn man_pages_and_completions_are_up_to_date() {
    let root = root();
    let files = generated();
    if std::env::var_os("FLEX_BLESS").is_some_and(|v| v == "1") {
        for (path, body) in &files {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
        }
        return;
    }
    // Regenerate into a temporary directory, then compare file by file.
    let tmp = tempfile::tempdir().unwrap();
    let mut stale = Vec::new();
    for (path, body) in &files {
        let fresh = tmp.path().join(path);
        std::fs::create_dir_all(fresh.parent().unwrap()).unwrap();
        std::fs::write(&fresh, body).unwrap();
        if std::fs::read(root.join(path)).ok().as_deref() != Some(body.as_slice()) {
            stale.push(path.display().to_string());
        }
    }
    for dir in ["man/man1", "man/man5", "man/man8"] {
        for e in std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let rel = Path::new(dir).join(e.file_name());
            if !files.contains_key(&rel) {
                stale.push(format!("{} (not generated any more)", rel.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "the checked-in man pages or completions differ from what the clap definitions and \
         etc/flexd.toml generate (fresh copies are in {}): {}\n\
         run `FLEX_BLESS=1 cargo test -p flex-tests --test docs` to update them",
        tmp.keep().display(),
        stale.join(", ")
    );
}

fn pages() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = generated()
        .into_keys()
        .filter(|p| p.starts_with("man"))
        .map(|p| root().join(p))
        .collect();
    v.sort();
    v
}

#[test]
fn every_man_page_renders_without_warnings() {
    for page in pages() {
        let out = Command::new("groff")
            .args(["-man", "-ww", "-z"])
            .arg(&page)
            .output()
            .expect("groff runs (install groff-base: .ci/run does)");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "groff -man -ww -z {}: {}",
            page.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new("man")
            .args(["--warnings=w", "-l"])
            .arg(&page)
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("LC_ALL", "C.UTF-8")
            .output()
            .expect("man runs (install man-db: .ci/run does)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "man -l {}: {}",
            page.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("NAME"), "man -l {}:\n{text}", page.display());
    }
}

#[test]
fn every_key_of_the_config_is_documented_in_flexd_toml_5() {
    let page = String::from_utf8(flexd_toml_page()).unwrap();
    let text = std::fs::read_to_string(root().join("etc/flexd.toml")).unwrap();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('='))
    {
        let key = line.split('=').next().unwrap().trim();
        assert!(
            page.contains(&format!("\\fB{key}\\fR")),
            "{key} is missing from flexd.toml(5)"
        );
    }
    assert!(page.contains(".SS [limits]"));
}

/// README's second command is the test command, and `.ci/run` must run exactly it: a drift
/// between the two once left CI without the flexd binary.
#[test]
fn ci_runs_the_readme_test_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let command = readme
        .lines()
        .find_map(|l| l.split_once("# 2.").map(|(cmd, _)| cmd.trim().to_string()))
        .expect("README.md has a command marked `# 2.`");
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let last = ci
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .expect(".ci/run runs a command");
    assert_eq!(
        last, command,
        ".ci/run's last command is not README's command 2"
    );
}
