//! flexreport: usage over a period per user and account, jobs by state, host utilization
//! (like sreport).

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::report::Args::parse();
    let code = match flexsub::commands::report::run(&args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexreport", &e),
    };
    std::process::exit(code);
}
