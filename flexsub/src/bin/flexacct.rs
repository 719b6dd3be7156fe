//! flexacct: accounting records of jobs (like sacct).

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::acct::Args::parse();
    let code = match flexsub::acct::run(&args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexacct", &e),
    };
    std::process::exit(code);
}
