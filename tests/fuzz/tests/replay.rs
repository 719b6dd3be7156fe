//! The fuzzers' findings, replayed without a fuzzer: every checked-in corpus input and every
//! crash found so far (`crashes/<target>/`, each fixed since) goes through its target, which
//! must not panic. A run of benches/fuzz.sh can add its new inputs to `corpus/<target>/`.

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_corpus_and_crash_input_is_read_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, target) in flex_fuzz::TARGETS {
        let corpus = inputs(&root.join("corpus").join(name));
        assert!(!corpus.is_empty(), "no seed corpus for {name}");
        let crashes = inputs(&root.join("crashes").join(name));
        for path in corpus.iter().chain(&crashes) {
            let data = std::fs::read(path).unwrap();
            let caught = std::panic::catch_unwind(|| target(&data));
            assert!(caught.is_ok(), "{name}: {} panics", path.display());
        }
    }
}

/// The seeds are real inputs the readers accept, so that the fuzzer starts from the inside of
/// each format rather than from its first error.
#[test]
fn the_seeds_are_accepted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for path in inputs(&root.join("topology")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let raw = gres_plugin::topology::parse(&text, "t").unwrap();
        gres_plugin::probe::build_host(&raw).unwrap();
    }
    for path in inputs(&root.join("trace")) {
        let data = std::fs::read(&path).unwrap();
        flexsim::trace::Trace::from_reader(data.as_slice(), "t")
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    for path in inputs(&root.join("config")) {
        let text = std::fs::read_to_string(&path).unwrap();
        flexd::config::Settings::from_text(Some(("c", &text)), &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    for path in inputs(&root.join("rows")) {
        let data = std::fs::read(&path).unwrap();
        let mut n = 0;
        flex_proto::read_queue_rows(&data, |_| n += 1).unwrap();
        assert!(n > 0, "{}", path.display());
    }
}
