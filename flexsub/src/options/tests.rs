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
        ("mem-per-cpu", "4G", "lots"),
        ("mem-per-gpu", "16000", "1Q"),
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
    for flag in ["oversubscribe", "spread-job"] {
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
        ("clusters", "one host"),
        ("cluster", "one host"),
    ] {
        let err = set(&mut s, opt, "x").unwrap_err();
        assert!(err.starts_with(&format!("--{opt} is refused: ")), "{err}");
        assert!(err.contains(why), "{err}");
    }
    let err = s.apply(by_long("get-user-env").unwrap(), None).unwrap_err();
    assert!(err.contains("--export=ALL"), "{err}");
    assert_eq!(s, Settings::default());
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
    // The script: one task of 8 cores on 4 GPUs is 8 cores, 2 per leaf.
    let r = req(&[("cpus-per-task", "8"), ("ntasks", "1"), ("gres", "gpu:4")]);
    assert_eq!((r.leaves, r.cores_per_leaf), (Some(4), 2));
    let r = req(&[
        ("cpus-per-task", "3"),
        ("ntasks-per-node", "3"),
        ("gres", "gpu:2"),
    ]);
    assert_eq!(r.cores_per_leaf, 5, "9 cores over 2 leaves, rounded up");
    // Without a task count: one task per leaf, -c per leaf (what -c always meant in Flex).
    assert_eq!(
        req(&[("cpus-per-task", "8"), ("gres", "gpu:4")]).cores_per_leaf,
        8
    );
    // When flexd picks the leaf count (a GPU count or memory): -c per leaf.
    assert_eq!(
        req(&[("cpus-per-task", "8"), ("ntasks", "2"), ("gpus", "2")]).cores_per_leaf,
        8
    );
    assert_eq!(
        req(&[("cpus-per-task", "8"), ("cpus-per-gpu", "6")]).cores_per_leaf,
        6
    );
    let r = req(&[("gpus-per-node", "2")]);
    assert_eq!((r.leaves, r.gpus), (None, Some(2.0)));
    let r = req(&[("gpus-per-task", "2"), ("ntasks", "3")]);
    assert_eq!(r.gpus, Some(6.0));
    assert_eq!(req(&[("gpus-per-task", "1")]).gpus, Some(1.0));
    let r = req(&[("ntasks-per-node", "4"), ("gpus-per-task", "1")]);
    assert_eq!(r.gpus, Some(4.0));
    let mut s = Settings::default();
    assert!(set(&mut s, "gpus-per-node", "0.5").is_err());
    assert!(set(&mut s, "cpus-per-gpu", "0").is_err());
}

#[test]
fn gres_forms() {
    assert_eq!(parse_gres("gpu"), Ok((1, None)));
    assert_eq!(parse_gres("gpu:4"), Ok((4, None)));
    assert_eq!(parse_gres("gpu:1g.10gb"), Ok((1, Some("1g.10gb".into()))));
    assert_eq!(parse_gres("gpu:1g.5gb:3"), Ok((3, Some("1g.5gb".into()))));
    for bad in [
        "gpu:0",
        "gpu:-1",
        "shard:2",
        "gpu:2,shard:1",
        "gpu:a:b:c",
        "gpu::2",
    ] {
        assert!(parse_gres(bad).is_err(), "{bad}");
    }
}

#[test]
fn default_request_is_one_leaf_with_the_daemons_defaults() {
    let r = Settings::default().request(None).unwrap();
    assert_eq!(r.leaves, Some(1));
    assert_eq!((r.cores_per_leaf, r.time_limit_s), (0, 0));
    let mut s = Settings::default();
    set(&mut s, "gpus", "0.5").unwrap();
    let r = s.request(None).unwrap();
    assert_eq!((r.leaves, r.gpus), (None, Some(0.5)));
    let r = Settings::default().request(Some(7 << 30)).unwrap();
    assert_eq!((r.leaves, r.mem_bytes), (None, Some(7 << 30)));
}

#[test]
fn values_are_checked() {
    let mut s = Settings::default();
    assert!(set(&mut s, "gpus", "NaN").unwrap_err().contains("\"NaN\""));
    assert!(set(&mut s, "leaves", "0").unwrap_err().contains("\"0\""));
    assert!(set(&mut s, "placement", "random")
        .unwrap_err()
        .contains("fill-first"));
    assert!(set(&mut s, "nodes", "2").unwrap_err().contains("one host"));
    assert!(set(&mut s, "export", "ALL").unwrap().is_none());
    assert!(set(&mut s, "export", "NONE")
        .unwrap_err()
        .contains("only ALL"));
    assert!(set(&mut s, "dtype", "fp7").unwrap_err().contains("fp7"));
    assert!(set(&mut s, "partition", "gpu")
        .unwrap()
        .unwrap()
        .contains("ignored"));
    set(&mut s, "mem", "100").unwrap();
    assert_eq!(s.mem_bytes, Some(100 << 20));
    assert!(Settings {
        gpus: Some(5000.0),
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
    set(&mut s, "mem", "1G").unwrap();
    assert!(s.estimate_input().unwrap_err().contains("give one"));
}
