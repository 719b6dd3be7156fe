//! flexshare: see [`flexsub::commands::share`].

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::share::Args::parse();
    let code = match flexsub::commands::share::run(&args, &mut std::io::stdout()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexshare", &e),
    };
    std::process::exit(code);
}
