use super::*;

fn set(s: &mut Settings, long: &str, v: &str) -> Result<Option<String>, String> {
    s.apply(by_long(long).unwrap(), Some(v))
}

#[test]
fn names_are_unique() {
    let all: Vec<&OptSpec> = all().collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a.long, b.long);
            assert!(a.short.is_none() || a.short != b.short, "{}", a.long);
        }
    }
}

#[test]
fn ignored_counts_must_still_be_counts() {
    let mut s = Settings::default();
    for (opt, good, bad) in [
        ("mincpus", "4", "abc"),
        ("threads-per-core", "1", "0"),
        ("sockets-per-node", "2", "-1"),
        ("cores-per-socket", "8", "x"),
        ("tmp", "100G", ""),
    ] {
        let w = set(&mut s, opt, good).unwrap().unwrap();
        assert!(w.starts_with(&format!("--{opt} is ignored: ")), "{w}");
        let err = set(&mut s, opt, bad).unwrap_err();
        assert!(err.contains(&format!("{bad:?}")), "{opt}: {err}");
    }
    // The task counts mean something now, and are still counts.
    assert_eq!(set(&mut s, "ntasks", "4"), Ok(None));
    assert!(set(&mut s, "ntasks", "abc")
        .unwrap_err()
        .contains("\"abc\""));
    assert!(set(&mut s, "ntasks-per-node", "0").is_err());
    // Ignored options with other values take any text.
    for (opt, v) in [
        ("partition", "gpu-long"),
        ("hint", "nomultithread"),
        ("distribution", "block:cyclic"),
        ("licenses", "matlab:2"),
        ("reservation", "maint"),
        ("wckey", "proj"),
        ("gres-flags", "enforce-binding"),
        ("gpu-bind", "closest"),
        ("profile", "task"),
        ("acctg-freq", "task=30"),
    ] {
        assert!(
            set(&mut s, opt, v).unwrap().unwrap().contains("ignored"),
            "{opt}"
        );
    }
    for (opt, v) in [
        ("ntasks-per-core", "1"),
        ("ntasks-per-gpu", "2"),
        ("gpu-freq", "high"),
    ] {
        assert!(
            set(&mut s, opt, v).unwrap().unwrap().contains("ignored"),
            "{opt}"
        );
    }
    assert!(set(&mut s, "ntasks-per-gpu", "x").is_err());
    for flag in ["oversubscribe", "spread-job", "no-kill", "quiet"] {
        let w = s.apply(by_long(flag).unwrap(), None).unwrap().unwrap();
        assert!(w.contains("ignored"), "{w}");
    }
    assert_eq!(
        s,
        Settings {
            ntasks: Some(4),
            ..Settings::default()
        }
    );
}

#[test]
fn options_that_change_what_runs_are_refused_with_why() {
    let mut s = Settings::default();
    for (opt, why) in [
        ("container-image", "pyxis/enroot"),
        ("container-mounts", "pyxis/enroot"),
        ("container-workdir", "pyxis/enroot"),
        ("container-name", "pyxis/enroot"),
        ("uid", "user who submits"),
        ("gid", "groups"),
    ] {
        let err = set(&mut s, opt, "x").unwrap_err();
        assert!(err.starts_with(&format!("--{opt} is refused: ")), "{err}");
        assert!(err.contains(why), "{err}");
    }
    // Another cluster is refused; this one, or all, is this host.
    let err = set(&mut s, "clusters", "other").unwrap_err();
    assert!(err.contains("this host is cluster flex"), "{err}");
    assert_eq!(s, Settings::default());
    assert_eq!(set(&mut s, "clusters", "all"), Ok(None));
    assert_eq!(set(&mut s, "clusters", "flex"), Ok(None));
    // batchspawner's --get-user-env=L: the submitting environment, with a warning.
    let w = s
        .apply(by_long("get-user-env").unwrap(), Some("L"))
        .unwrap();
    assert!(w.unwrap().contains("submitting environment"));
    assert_eq!(s, Settings::default());
}

#[test]
fn export_takes_sbatchs_forms() {
    let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let submitting = env(&[
        ("PATH", "/bin"),
        ("A", "1"),
        ("B", "2"),
        ("FLEX_SOCKET", "/s"),
    ]);
    let e = Export::parse("ALL").unwrap();
    assert_eq!(e.apply(submitting.clone()), submitting);
    let e = Export::parse("ALL,B=3,C=x y").unwrap();
    assert_eq!(
        e.apply(submitting.clone()),
        env(&[
            ("PATH", "/bin"),
            ("A", "1"),
            ("FLEX_SOCKET", "/s"),
            ("B", "3"),
            ("C", "x y")
        ])
    );
    // Only the named (batchspawner's --export=PATH,A), and Flex's own client settings.
    let e = Export::parse("PATH,A").unwrap();
    assert_eq!(
        e.apply(submitting.clone()),
        env(&[("PATH", "/bin"), ("A", "1"), ("FLEX_SOCKET", "/s")])
    );
    assert_eq!(
        Export::parse("NONE").unwrap().apply(submitting),
        env(&[("FLEX_SOCKET", "/s")])
    );
    for bad in ["ALL,,A", "1X", "A-B=2"] {
        assert!(Export::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn this_host_may_be_named_and_no_other() {
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let short = host.split('.').next().unwrap().to_string();
    let mut s = Settings::default();
    assert_eq!(set(&mut s, "nodelist", &host), Ok(None));
    assert_eq!(
        set(&mut s, "nodelist", &format!("{short}.example.org")),
        Ok(None)
    );
    let err = set(&mut s, "nodelist", &format!("{short},other-host")).unwrap_err();
    assert!(err.contains("names other-host"), "{err}");
    assert_eq!(set(&mut s, "exclude", "other-host[1-4]"), Ok(None));
    let err = set(&mut s, "exclude", &format!("other,{short}")).unwrap_err();
    assert!(err.contains("excludes this host"), "{err}");
}

#[test]
fn cores_follow_tasks_and_gpus_follow_nodes_and_tasks() {
    let req = |opts: &[(&str, &str)]| {
        let mut s = Settings::default();
        for (o, v) in opts {
            set(&mut s, o, v).unwrap();
        }
        s.request(None).unwrap()
    };
    // As in Slurm: the job's cores are its tasks times -c, whatever its GPUs; the core
    // spreads them over the leaves (flexd's default_cpus_per_leaf per leaf at least).
    let r = req(&[("cpus-per-task", "8"), ("ntasks", "1"), ("gres", "gpu:4")]);
    assert_eq!((r.leaves, r.cpus, r.cores_per_leaf), (Some(4), 8, 0));
    let r = req(&[
        ("cpus-per-task", "3"),
        ("ntasks-per-node", "3"),
        ("gres", "gpu:2"),
    ]);
    assert_eq!(r.cpus, 9);
    // Without a task count: one task.
    assert_eq!(req(&[("cpus-per-task", "8"), ("gres", "gpu:4")]).cpus, 8);
    assert_eq!(req(&[("ntasks", "6")]).cpus, 6);
    assert_eq!(req(&[("gres", "gpu:4")]).cpus, 0);
    assert_eq!(
        req(&[("cpus-per-task", "8"), ("ntasks", "2"), ("gpus", "2")]).cpus,
        16
    );
    let r = req(&[("cpus-per-task", "8"), ("cpus-per-gpu", "6")]);
    assert_eq!((r.cpus, r.cores_per_leaf), (8, 6));
    // A GPU is one leaf, in every Slurm spelling.
    for (o, v) in [("gpus", "2"), ("gpus-per-node", "2"), ("gres", "gpu:2")] {
        let r = req(&[(o, v)]);
        assert_eq!((r.leaves, r.gpus), (Some(2), None), "--{o}={v}");
    }
    let r = req(&[("gpus-per-task", "2"), ("ntasks", "3")]);
    assert_eq!(r.leaves, Some(6));
    assert_eq!(req(&[("gpus-per-task", "1")]).leaves, Some(1));
    let r = req(&[("ntasks-per-node", "4"), ("gpus-per-task", "1")]);
    assert_eq!(r.leaves, Some(4));
    let r = req(&[("gpus-per-node", "a100:2")]);
    assert_eq!((r.leaves, r.leaf_type.as_deref()), (Some(2), Some("a100")));
    let r = req(&[("gpus", "1g.10gb:1")]);
    assert_eq!(
        (r.leaves, r.leaf_type.as_deref()),
        (Some(1), Some("1g.10gb"))
    );
    let r = req(&[("ntasks", "2"), ("gpus-per-task", "1g.10gb:1")]);
    assert_eq!(
        (r.leaves, r.leaf_type.as_deref()),
        (Some(2), Some("1g.10gb"))
    );
    // Flex's own share of GPU compute has its own spelling.
    let r = req(&[("gpu-fraction", "0.25")]);
    assert_eq!((r.leaves, r.gpus), (None, Some(0.25)));
    let mut s = Settings::default();
    let e = set(&mut s, "gpus", "0.5").unwrap_err();
    assert!(e.contains("--gpu-fraction 0.5"), "{e}");
    let mut s = Settings::default();
    assert!(set(&mut s, "gpus-per-node", "0.5").is_err());
    assert!(set(&mut s, "gpus-per-node", ":2").is_err());
    assert!(set(&mut s, "gpus-per-task", "a100:0").is_err());
    assert!(set(&mut s, "cpus-per-gpu", "0").is_err());
}

#[test]
fn gres_forms() {
    assert_eq!(parse_gres("gpu"), Ok((1, None)));
    assert_eq!(parse_gres("gpu:4"), Ok((4, None)));
    assert_eq!(parse_gres("gpu:1g.10gb"), Ok((1, Some("1g.10gb".into()))));
    assert_eq!(parse_gres("gpu:1g.5gb:3"), Ok((3, Some("1g.5gb".into()))));
    assert_eq!(parse_gres("gpu:0"), Ok((0, None)));
    for bad in ["gpu:-1", "shard:2", "gpu:2,shard:1", "gpu:a:b:c", "gpu::2"] {
        assert!(parse_gres(bad).is_err(), "{bad}");
    }
}

#[test]
fn default_request_is_cpu_only_with_the_daemons_defaults() {
    let r = Settings::default().request(None).unwrap();
    assert!(!r.wants_gpu(), "no GPU unless asked for, as in Slurm");
    assert_eq!((r.cores_per_leaf, r.cpus, r.time_limit_s), (0, 0, 0));
    assert_eq!(r.host_mem, None);
    for (o, v) in [
        ("gres", "gpu:0"),
        ("leaves", "0"),
        ("gres", "gpu:1g.5gb:0"),
        ("gpus", "0"),
    ] {
        let mut s = Settings::default();
        set(&mut s, o, v).unwrap();
        let r = s.request(None).unwrap();
        assert!(!r.wants_gpu() && r.leaf_type.is_none(), "{o}={v}");
    }
    let mut s = Settings::default();
    set(&mut s, "gres", "gpu:0").unwrap();
    set(&mut s, "gpu-fraction", "0.5").unwrap();
    assert!(s.request(None).unwrap_err().contains("no GPU"));
    let mut s = Settings::default();
    set(&mut s, "gpu-fraction", "0.5").unwrap();
    let r = s.request(None).unwrap();
    assert_eq!((r.leaves, r.gpus), (None, Some(0.5)));
    let r = Settings::default().request(Some(7 << 30)).unwrap();
    assert_eq!((r.leaves, r.mem_bytes), (None, Some(7 << 30)));
}

#[test]
fn values_are_checked() {
    let mut s = Settings::default();
    assert!(set(&mut s, "gpu-fraction", "NaN")
        .unwrap_err()
        .contains("\"NaN\""));
    assert!(set(&mut s, "gpus", "NaN").unwrap_err().contains("\"NaN\""));
    assert!(set(&mut s, "leaves", "-1").unwrap_err().contains("\"-1\""));
    assert!(set(&mut s, "placement", "random")
        .unwrap_err()
        .contains("fill-first"));
    assert!(set(&mut s, "nodes", "2").unwrap_err().contains("one host"));
    assert!(set(&mut s, "export", "ALL").unwrap().is_none());
    assert!(set(&mut s, "export", "A,,B")
        .unwrap_err()
        .contains("an empty name"));
    assert!(set(&mut s, "dtype", "fp7").unwrap_err().contains("fp7"));
    assert!(set(&mut s, "partition", "gpu")
        .unwrap()
        .unwrap()
        .contains("ignored"));
    set(&mut s, "gpu-mem", "100").unwrap();
    assert_eq!(s.mem_bytes, Some(100 << 20));
    assert!(Settings {
        gpu_fraction: Some(5000.0),
        ..Settings::default()
    }
    .request(None)
    .is_err());
}

#[test]
fn model_options_need_each_other() {
    let mut s = Settings::default();
    set(&mut s, "batch-size", "8").unwrap();
    assert!(s.estimate_input().unwrap_err().contains("need --model"));
    set(&mut s, "model", "/m").unwrap();
    assert!(s
        .estimate_input()
        .unwrap_err()
        .contains("--train or --infer"));
    s.apply(by_long("train").unwrap(), None).unwrap();
    // Without --seq-len, the model's own context length (found when the model is read).
    let i = s.estimate_input().unwrap().unwrap();
    assert_eq!((i.batch_size, i.seq_len), (8, None));
    set(&mut s, "seq-len", "128").unwrap();
    let i = s.estimate_input().unwrap().unwrap();
    assert_eq!(
        (i.batch_size, i.seq_len, i.mode),
        (8, Some(128), Mode::Train)
    );
    let mut d = Settings::default();
    set(&mut d, "model", "/m").unwrap();
    d.apply(by_long("infer").unwrap(), None).unwrap();
    assert_eq!(d.estimate_input().unwrap().unwrap().batch_size, 1);
    set(&mut s, "gpu-mem", "1G").unwrap();
    assert!(s.estimate_input().unwrap_err().contains("give one"));
}

#[test]
fn how_the_job_runs_options() {
    let mut s = Settings::default();
    assert_eq!(set(&mut s, "comment", "sweep lr=3e-4"), Ok(None));
    assert_eq!(s.options.comment.as_deref(), Some("sweep lr=3e-4"));
    // sbatch takes an empty comment: none.
    assert_eq!(set(&mut s, "comment", ""), Ok(None));
    assert_eq!(s.options.comment, None);
    // --tasks-per-node is sbatch's other name for --ntasks-per-node.
    assert_eq!(set(&mut s, "tasks-per-node", "3"), Ok(None));
    assert_eq!(s.ntasks_per_node, Some(3));
    assert_eq!(set(&mut s, "open-mode", "append"), Ok(None));
    assert!(s.options.append);
    assert_eq!(set(&mut s, "open-mode", "Truncate"), Ok(None));
    assert!(!s.options.append);
    assert!(set(&mut s, "open-mode", "rw")
        .unwrap_err()
        .contains("append or truncate"));
    assert_eq!(s.apply(by_long("exclusive").unwrap(), None), Ok(None));
    let w = set(&mut s, "exclusive", "user").unwrap().unwrap();
    assert!(w.contains("--exclusive=user is ignored"), "{w}");
    assert!(set(&mut s, "exclusive", "node").is_err());
    assert_eq!(set(&mut s, "constraint", "[a100|h100] & 80GB"), Ok(None));
    assert_eq!(s.options.constraint.as_deref(), Some("(a100|h100)&80GB"));
    assert!(set(&mut s, "constraint", "a100*2")
        .unwrap_err()
        .contains("several nodes"));
    assert_eq!(set(&mut s, "mail-type", "END,fail"), Ok(None));
    assert_eq!(set(&mut s, "mail-user", "ana@example.org"), Ok(None));
    let mail = s.options.mail.clone().unwrap();
    let ev = flex_proto::MailEvents::END | flex_proto::MailEvents::FAIL;
    assert_eq!(
        (mail.events.0, mail.user.as_deref()),
        (ev, Some("ana@example.org"))
    );
    assert!(set(&mut s, "mail-type", "SOMETIMES")
        .unwrap_err()
        .contains("\"SOMETIMES\""));
    assert_eq!(s.options.comment, None, "the empty comment came last");
    assert!(s.options.exclusive);
}

#[test]
fn begin_times_as_sbatch_takes_them() {
    use jiff::civil::date;
    let tz = jiff::tz::TimeZone::UTC;
    let now = date(2026, 11, 24).at(15, 30, 0, 0).to_zoned(tz).unwrap();
    let at = |v: &str| slurm::parse_begin(v, &now);
    let secs = |z: jiff::Zoned| z.timestamp().as_second() as u64;
    let base = secs(now.clone());
    assert_eq!(at("now+60"), Ok(base + 60));
    assert_eq!(at("now+1hour"), Ok(base + 3600));
    assert_eq!(at("16:00"), Ok(base + 1800), "later today");
    assert_eq!(
        at("09:00"),
        Ok(base + 17 * 3600 + 1800),
        "tomorrow: 9:00 is past"
    );
    let dec = date(2026, 12, 1).at(10, 0, 0, 0);
    let dec = dec.to_zoned(jiff::tz::TimeZone::UTC).unwrap();
    assert_eq!(at("2026-12-01T10:00"), Ok(secs(dec)));
    assert_eq!(at("tomorrow"), Ok(base + 8 * 3600 + 1800));
    assert!(at("someday").unwrap_err().contains("someday"));
    let mut s = Settings::default();
    set(&mut s, "begin", "now+1").unwrap();
    assert!(s.queue.begin.is_some());
}

#[test]
fn host_memory_takes_slurms_three_spellings() {
    let mem = |o: &str, v: &str| {
        let mut s = Settings::default();
        set(&mut s, o, v).unwrap();
        s.host_mem
    };
    assert_eq!(mem("mem", "64G"), Some(HostMem::PerNode(64 << 30)));
    assert_eq!(mem("mem", "1000"), Some(HostMem::PerNode(1000 << 20)));
    assert_eq!(mem("mem", "0"), Some(HostMem::All));
    assert_eq!(mem("mem-per-cpu", "4G"), Some(HostMem::PerCpu(4 << 30)));
    assert_eq!(
        mem("mem-per-gpu", "16000"),
        Some(HostMem::PerGpu(16000 << 20))
    );
    // Host memory never asks for a GPU.
    let mut s = Settings::default();
    set(&mut s, "mem", "64G").unwrap();
    let r = s.request(None).unwrap();
    assert!(!r.wants_gpu());
    assert_eq!(r.mem_bytes, None);
    // The last spelling wins (the command line, applied last, over the script).
    set(&mut s, "mem-per-cpu", "2G").unwrap();
    assert_eq!(
        s.request(None).unwrap().host_mem,
        Some(HostMem::PerCpu(2 << 30))
    );
    let mut s = Settings::default();
    for bad in ["lots", "1Q", "-5"] {
        assert!(set(&mut s, "mem", bad).unwrap_err().contains(bad), "{bad}");
    }
    // --mem-per-gpu without a GPU.
    set(&mut s, "mem-per-gpu", "4G").unwrap();
    assert!(s.request(None).unwrap_err().contains("per GPU"));
}

#[test]
fn exclusive_asks_for_the_whole_host() {
    let mut s = Settings::default();
    s.apply(by_long("exclusive").unwrap(), None).unwrap();
    assert!(s.request(None).unwrap().exclusive);
}
