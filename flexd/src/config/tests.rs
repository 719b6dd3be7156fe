use super::*;
use flex_sched::{Order, PolicyKind};

#[test]
fn compiled_in_defaults_are_the_documented_ones() {
    let s = Settings::defaults();
    assert_eq!(s.socket, PathBuf::from("/tmp/flexd.sock"));
    assert_eq!(s.state_dir, PathBuf::from("flex-state"));
    assert_eq!(s.topology, PathBuf::from("a100-40gb-x2.toml"));
    // EASY with the adaptive order: docs/flexsim.md's sweep chose it.
    let shipped = Policy {
        order: Order::Adaptive,
        ..Policy::backfill(14)
    };
    assert_eq!(s.policy, shipped);
    assert_eq!(s.kill_grace, Duration::from_secs(30));
    assert_eq!(s.batch_start_timeout, Duration::from_secs(10));
    assert_eq!(s.default_cpus_per_leaf, 1);
    assert_eq!(s.nccl, NcclMode::Upstream);
    assert_eq!(s.placement, Strategy::BestFit);
    assert_eq!(s.limits.max_script_bytes, 4 << 20);
    assert_eq!(s.limits.max_frame_bytes, 16 << 20);
}

#[test]
fn a_file_overrides_keys_and_unknown_keys_warn() {
    let file = "policy = \"fifo\"\nbogus = 1\nnccl_mode = \"patched\"\n\
                nccl_lib_dir = \"/x\"\n[limits]\nmax_queued_per_user = 5\nwhat = 2\n";
    let (s, w) = Settings::from_text(Some(("/etc/f.toml", file)), &Overrides::default()).unwrap();
    assert_eq!(s.policy.kind, PolicyKind::Fifo);
    assert_eq!(s.limits.max_queued_per_user, 5);
    assert_eq!(
        s.nccl,
        NcclMode::Patched {
            lib_dir: "/x".into()
        }
    );
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("/etc/f.toml") && w[0].contains("`bogus`"));
    assert!(w[1].contains("`limits.what`"));
}

/// The same text gives flexsim --flexd-config the same policy
/// (flexd/sim/src/cli/flexd_config.rs tests this very file text): both go through the core's
/// PolicyKeys.
#[test]
fn policy_keys_conservative_adaptive() {
    let file = "policy = \"conservative\"\nbackfill_window = 0\nqueue_order = \"adaptive\"\naging_pct = 50\n";
    let (s, w) = Settings::from_text(Some(("f", file)), &Overrides::default()).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(
        s.policy,
        Policy {
            kind: PolicyKind::Conservative,
            window: 0,
            order: Order::Adaptive,
            aging_pct: 50,
        }
    );
    let e = Settings::from_text(
        Some(("f", "queue_order = \"random\"")),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("queue_order") && e.contains("unknown order"),
        "{e}"
    );
}

#[test]
fn flags_override_the_file() {
    let o = Overrides {
        socket: Some("/s".into()),
        ..Overrides::default()
    };
    let (s, _) = Settings::from_text(Some(("f", "socket = \"/t\"")), &o).unwrap();
    assert_eq!(s.socket, PathBuf::from("/s"));
}

#[test]
fn bad_values_name_key_value_and_file() {
    let cases = [
        ("kill_grace = \"soon\"", "kill_grace"),
        ("kill_grace = \"2h\"", "at most 1h"),
        ("batch_start_timeout = \"0s\"", "batch_start_timeout"),
        ("backfill_window = -1", "between 0 and 1000000"),
        ("policy = \"lottery\"", "unknown policy"),
        ("placement = \"random\"", "memory-optimized"),
        (
            "[limits]\nmax_frame_bytes = \"2 GiB\"",
            "limits.max_frame_bytes",
        ),
        ("slurm_aliases = \"yes\"", "true or false"),
        ("default_time_limit = \"400days\"", "default_time_limit"),
    ];
    for (text, want) in cases {
        let e = Settings::from_text(Some(("/c.toml", text)), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("/c.toml") && e.contains(want), "{text}: {e}");
    }
    let e = Settings::from_text(Some(("/c.toml", "x = ")), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid TOML"), "{e}");
}

#[test]
fn a_bad_value_of_many_quotes_is_named_not_a_panic() {
    // toml's own writer of strings counts a run of quotes in a u8 (found by fuzzing `config`).
    let quotes = "'".repeat(300);
    for text in [
        format!("[limits]\nmax_script_bytes = \"1 k{quotes}\""),
        format!("kill_grace = [\"{quotes}\"]"),
        format!("[priority]\ndefault_qos = \"{quotes}\""),
    ] {
        let e = Settings::from_text(Some(("/q.toml", &text)), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("/q.toml") && e.contains(&quotes), "{e}");
    }
}

#[test]
fn metrics_listen_is_off_by_default_and_loopback_unless_allowed() {
    let load = |text: &str| Settings::from_text(Some(("/m.toml", text)), &Overrides::default());
    assert_eq!(Settings::defaults().metrics_listen, None);
    let (s, _) = load("metrics_listen = \"127.0.0.1:9464\"").unwrap();
    assert_eq!(s.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
    let (s, _) = load("metrics_listen = \"[::1]:9464\"").unwrap();
    assert!(s.metrics_listen.unwrap().ip().is_loopback());
    let e = load("metrics_listen = \"0.0.0.0:9464\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("metrics_listen") && e.contains("metrics_allow_remote"),
        "{e}"
    );
    let (s, _) = load("metrics_listen = \"0.0.0.0:9464\"\nmetrics_allow_remote = true").unwrap();
    assert_eq!(s.metrics_listen, Some("0.0.0.0:9464".parse().unwrap()));
    let e = load("metrics_listen = \"localhost\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("127.0.0.1:9464"), "{e}");
}

#[test]
fn sizes_parse() {
    use flex_proto::config::parse_size;
    assert_eq!(parse_size("4 MiB"), Ok(4 << 20));
    assert_eq!(parse_size("512KiB"), Ok(512 << 10));
    assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
    assert_eq!(parse_size("100"), Ok(100));
    assert!(parse_size("4 parsecs").is_err());
}

#[test]
fn changes_list_what_a_reload_changed() {
    let a = Settings::defaults();
    let mut b = a.clone();
    b.policy = Policy {
        order: a.policy.order,
        ..Policy::fifo()
    };
    b.kill_grace = Duration::from_secs(5);
    let c = a.changes(&b);
    assert_eq!(c.len(), 2, "{c:?}");
    assert!(c[0].starts_with("policy: Backfill -> Fifo"));
}
