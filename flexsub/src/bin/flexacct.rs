//! flexacct: accounting records of jobs (like sacct).

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::acct::Args::parse();
    let code = match flexsub::commands::acct::run(&args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexacct", &e),
    };
    std::process::exit(code);
}
