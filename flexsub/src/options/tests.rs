use super::*;

fn set(s: &mut Settings, long: &str, v: &str) -> Result<Option<String>, String> {
    s.apply(by_long(long).unwrap(), Some(v))
}

#[test]
fn names_are_unique() {
    for (i, a) in OPTIONS.iter().enumerate() {
        for b in &OPTIONS[i + 1..] {
            assert_ne!(a.long, b.long);
            assert!(a.short.is_none() || a.short != b.short, "{}", a.long);
        }
    }
}

#[test]
fn ignored_counts_must_still_be_counts() {
    let mut s = Settings::default();
    assert!(set(&mut s, "ntasks", "4")
        .unwrap()
        .is_some_and(|n| n.contains("ignored")));
    let err = set(&mut s, "ntasks", "abc").unwrap_err();
    assert!(err.contains("\"abc\""), "{err}");
    assert!(set(&mut s, "ntasks-per-node", "0").is_err());
    // Ignored options with other values take any text.
    assert!(set(&mut s, "partition", "gpu-long").is_ok());
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
