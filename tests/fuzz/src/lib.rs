//! The fuzz targets: every reader of untrusted input behind one function of bytes, entered
//! where the program enters it. A target may refuse its input (that is the reader's job) but
//! must not panic, and a refusal must say something.
//!
//! `tests/fuzz/afl` runs each under AFL++ (`benches/fuzz.sh TARGET SECONDS`); the replay test
//! (`tests/replay.rs`) feeds each the checked-in corpus and every crash found so far, so CI
//! needs no fuzzer.

use std::cell::RefCell;
use std::path::Path;

/// One target: its name (the corpus folder, the AFL binary) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: [Target; 6] = [
    ("script", script),
    ("frame", frame),
    ("config", config),
    ("topology", topology),
    ("trace", trace),
    ("rows", rows),
];

/// The largest input worth trying: the readers' limits are tested elsewhere, and small inputs
/// keep a fuzzer fast.
pub const MAX_INPUT: usize = 4 << 10;

/// Inputs as text, the way the readers get them (a file read into a String, or a frame's
/// body): lossy, so that invalid UTF-8 still reaches them.
fn text(data: &[u8]) -> Option<String> {
    (data.len() <= MAX_INPUT).then(|| String::from_utf8_lossy(data).into_owned())
}

thread_local! {
    /// flexsub's command line: built once (it has a hundred options), matched against each
    /// input without a copy.
    static FLEXSUB: RefCell<clap::Command> =
        RefCell::new(flexsub::commands::submit::command().no_binary_name(true));
}

/// flexsub on a batch script: the first line is the command line (words split on blanks),
/// the rest the script. Runs what `flexsub --test-only` runs before it asks flexd: the
/// directives, the command line over them, and the request they make.
pub fn script(data: &[u8]) {
    let Some(input) = text(data) else { return };
    // --model reads a file the user names; a fuzzer naming /dev files would only test the
    // file system.
    if input.contains("model") {
        return;
    }
    let (line, script) = input.split_once('\n').unwrap_or(("", &input));
    let mut words: Vec<&str> = line.split_ascii_whitespace().collect();
    words.push("job.sh");
    let Ok(m) = FLEXSUB.with_borrow_mut(|cmd| cmd.try_get_matches_from_mut(words)) else {
        return;
    };
    let cwd = Path::new("/nonexistent-fuzz-workdir");
    let loaded = flexsub::commands::submit::Loaded {
        text: script.to_string(),
        shown: "job.sh".into(),
        args: Vec::new(),
        path: Some("job.sh".into()),
    };
    match flexsub::commands::submit::build_loaded(&m, loaded, Vec::new(), cwd) {
        Ok(built) => {
            // What travels to flexd encodes.
            let _ = flex_proto::encode(&flex_proto::Request::TestOnly(built.spec));
        }
        Err(e) => assert!(!e.to_string().trim().is_empty(), "empty refusal"),
    }
}

/// flexd's frame reader: a Hello, then requests, as many as the bytes hold, each decoded the
/// way flexd's connection task decodes them (and a job's environment checked as flexd checks
/// it); then the same bytes as the answers a command reads.
pub fn frame(data: &[u8]) {
    use flex_proto::{decode, Hello, Request, Response};
    let max = MAX_INPUT;
    let mut buf = data;
    match decode::<Hello>(buf, max) {
        Ok(Some((_, used))) => {
            assert!(used <= buf.len());
            buf = &buf[used..];
            while let Ok(Some((req, used))) = decode::<Request>(buf, max) {
                assert!(used >= 4 && used <= buf.len());
                buf = &buf[used..];
                if let Request::Submit(spec) | Request::TestOnly(spec) = req {
                    if let Err(e) = spec.env.check(|_, _| Ok(())) {
                        assert!(!e.is_empty());
                    }
                }
            }
        }
        Ok(None) => {}
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let mut buf = data;
    while let Ok(Some((resp, used))) = decode::<Response>(buf, max) {
        assert!(used >= 4 && used <= buf.len());
        buf = &buf[used..];
        if let Response::QueueRows(page) = resp {
            let _ = page.rows.rows();
        }
    }
}

/// flexd.toml as flexd reads it (over its compiled-in defaults), and the limits the commands
/// read from the same file.
pub fn config(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let overrides = flexd::config::Overrides::default();
    match flexd::config::Settings::from_text(Some(("flexd.toml", &t)), &overrides) {
        Ok((settings, _warnings)) => {
            let _ = settings.cluster_config();
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// A topology file (a simulated host): parsed, then built into the host model flexd
/// schedules on.
pub fn topology(data: &[u8]) {
    let Some(t) = text(data) else { return };
    match gres_plugin::topology::parse(&t, "host.toml") {
        Ok(raw) => {
            if let Err(e) = gres_plugin::probe::build_host(&raw) {
                assert!(!e.to_string().is_empty());
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// A flexsim trace (CSV), read as `flexsim --trace` reads it.
pub fn trace(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    match flexsim::trace::Trace::from_reader(data, "trace.csv") {
        Ok(t) => assert!(!t.jobs.is_empty()),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// flexq's rows: an answer's body read row by row and laid out as flexq's table.
pub fn rows(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let mut table = flexsub::table::QueueTable::new(true);
    match flex_proto::read_queue_rows(data, |row| table.push(&row)) {
        Ok(_) => {
            let mut out = Vec::new();
            table.write_to(&mut out).expect("a Vec takes every byte");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}
