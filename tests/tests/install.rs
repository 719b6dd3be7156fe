//! `make install-files` and `make uninstall` into a temporary DESTDIR, with the binaries this
//! test run built (`PROFILE=dev`; `make install` itself adds only the release build).

use flex_tests::bin_dir;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn make(dest: &Path, target: &str) {
    let out = make_output(dest, target);
    assert!(
        out.status.success(),
        "make {target}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_output(dest: &Path, target: &str) -> std::process::Output {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Command::new("make")
        .current_dir(repo)
        .arg("-s")
        .arg(target)
        .arg(format!("DESTDIR={}", dest.display()))
        .arg("PROFILE=dev")
        .arg(format!(
            "CARGO_TARGET_DIR={}",
            bin_dir().parent().unwrap().display()
        ))
        .output()
        .expect("make runs (install make)")
}

#[test]
fn make_install_lays_out_a_site_and_uninstall_takes_it_back() {
    let dest = tempfile::tempdir().unwrap();
    let d = dest.path();
    make(d, "install-files");
    let p = |s: &str| -> PathBuf { d.join(s.trim_start_matches('/')) };
    let commands = [
        "flexsub",
        "flexq",
        "flexcancel",
        "flexrun",
        "flexacct",
        "flexreport",
        "flexprio",
        "flexshare",
        "flexsim",
        "flexgres",
    ];
    let mut installed: Vec<PathBuf> = vec![p("/usr/local/sbin/flexd")];
    for c in commands {
        installed.push(p(&format!("/usr/local/bin/{c}")));
        installed.push(p(&format!("/usr/local/share/man/man1/{c}.1")));
    }
    for c in commands.iter().chain(&["flexd"]) {
        installed.push(p(&format!(
            "/usr/local/share/bash-completion/completions/{c}"
        )));
        installed.push(p(&format!("/usr/local/share/zsh/site-functions/_{c}")));
        installed.push(p(&format!(
            "/usr/local/share/fish/vendor_completions.d/{c}.fish"
        )));
    }
    installed.extend([
        p("/usr/local/share/man/man5/flexd.toml.5"),
        p("/usr/local/share/man/man8/flexd.8"),
        p("/usr/local/lib/systemd/system/flexd.service"),
        p("/usr/local/share/doc/flex/flex.crontab"),
    ]);
    for f in &installed {
        assert!(f.is_file(), "{} was not installed", f.display());
    }
    let mode = std::fs::metadata(p("/usr/local/bin/flexacct"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);

    let unit = std::fs::read_to_string(p("/usr/local/lib/systemd/system/flexd.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/sbin/flexd --config /etc/flex/flexd.toml"));
    assert!(
        unit.contains("KillMode=process") && !unit.contains('@'),
        "{unit}"
    );
    let cron = std::fs::read_to_string(p("/usr/local/share/doc/flex/flex.crontab")).unwrap();
    assert!(cron.contains("/usr/local/bin/flexreport all -S yesterday -E today --csv"));

    // The site configuration: flexd reads it, with the site's paths and no warning.
    let config = p("/etc/flex/flexd.toml");
    let (settings, warnings) =
        flexd::config::Settings::load(Some(&config), &Default::default()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(settings.socket, PathBuf::from("/run/flex/flexd.sock"));
    assert_eq!(settings.state_dir, PathBuf::from("/var/lib/flex"));

    // A second install keeps the edited configuration.
    std::fs::write(&config, "policy = \"fifo\"\n").unwrap();
    make(d, "install-files");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "policy = \"fifo\"\n"
    );

    make(d, "uninstall");
    for f in &installed {
        assert!(!f.exists(), "{} was not removed", f.display());
    }
    assert!(config.is_file(), "uninstall keeps the configuration");
}

#[test]
fn slurm_names_are_links_of_their_own_and_never_replace_a_real_slurms() {
    let dest = tempfile::tempdir().unwrap();
    let d = dest.path();
    make(d, "install-slurm-names");
    let names = d.join("usr/local/lib/flex/slurm-bin");
    for c in [
        "sbatch", "squeue", "scancel", "sacct", "scontrol", "sinfo", "srun", "sacctmgr", "sshare",
    ] {
        // The link names where flex-slurm will be, not the staging directory.
        assert_eq!(
            std::fs::read_link(names.join(c)).unwrap(),
            Path::new("/usr/local/bin/flex-slurm"),
            "{c}"
        );
    }
    assert!(d.join("usr/local/bin/flex-slurm").is_file());
    make(d, "uninstall-slurm-names");
    assert!(!names.exists() && !d.join("usr/local/bin/flex-slurm").exists());

    // A real Slurm's sbatch where the names go: make fails and leaves it.
    std::fs::create_dir_all(&names).unwrap();
    std::fs::write(names.join("sbatch"), "#!/bin/sh\necho real slurm\n").unwrap();
    let out = make_output(d, "install-slurm-names");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("left alone"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(names.join("sbatch")).unwrap(),
        "#!/bin/sh\necho real slurm\n"
    );
    make(d, "uninstall-slurm-names");
    assert!(
        names.join("sbatch").is_file(),
        "uninstall leaves what it did not make"
    );
}
