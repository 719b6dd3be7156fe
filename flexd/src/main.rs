//! flexd, the Flex controller daemon (foreground). The work is in the library.

use clap::Parser;
use flexd::cli::{Cli, Command};
use flexd::config::Overrides;
use flexd::daemon::{self, Options};

fn main() {
    let cli = Cli::parse();
    if let Some(Command::Supervise { run_dir }) = cli.command {
        // Before anything starts a thread: it forks.
        std::process::exit(flexd::exec::supervisor::main(&run_dir));
    }
    one_heap();
    let level = match cli.verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLEX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{level},rusqlite=warn")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let opts = Options {
        config: cli.config,
        overrides: Overrides {
            socket: cli.socket,
            state_dir: cli.state_dir,
            topology: cli.topology,
        },
        force_topology: cli.force_topology,
    };
    if let Err(e) = daemon::run(opts) {
        tracing::error!("{e}");
        eprintln!("flexd: {e}");
        std::process::exit(e.exit_code());
    }
}

/// glibc's heap for a daemon whose state is many small long-lived pieces among large short-lived
/// buffers, unless the operator set MALLOC_ARENA_MAX or MALLOC_MMAP_THRESHOLD_ themselves:
/// - one arena: a job is allocated by whichever connection thread took its submission, among
///   the frames and JSON that thread frees right after; with an arena per thread those pieces
///   pin pages in several arenas that `malloc_trim` cannot give back (with 100,000 queued, 119
///   MB of arenas for 68 MB in use). Threads still take small blocks from their own caches
///   without the arena's lock.
/// - buffers of 1 MiB and more (a scheduling pass's working lists, several MB each with a long
///   queue) always in their own mappings, returned whole when freed; glibc otherwise raises
///   the threshold past them after the first one is freed and then carves them from the heap,
///   between jobs.
///
/// Measured side by side with 100,000 queued (BENCHMARKS.md, "flexd's heap"): resident size
/// 76-83 MB instead of 97-110 MB; the pass's lists are faulted in anew each pass, 22-30 ms
/// instead of 15-19 ms; listings and submissions the same. Before any thread starts.
fn one_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let set = |var: &str, param: libc::c_int, value: libc::c_int| {
            if std::env::var_os(var).is_none() {
                // SAFETY: mallopt changes a malloc parameter; only this thread runs yet.
                unsafe {
                    libc::mallopt(param, value);
                }
            }
        };
        set("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, 1);
        set("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
