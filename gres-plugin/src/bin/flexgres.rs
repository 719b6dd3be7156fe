//! flexgres: gres.conf, node line and job_submit.lua for Slurm (see `gres_plugin::flexgres`).

use clap::Parser;
use std::io::Write;

fn main() {
    let cli = gres_plugin::flexgres::Cli::parse();
    match gres_plugin::flexgres::run(&cli) {
        Ok(text) => {
            if let Err(e) = std::io::stdout().write_all(text.as_bytes()) {
                eprintln!("flexgres: cannot write the output: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("flexgres: {e}");
            std::process::exit(1);
        }
    }
}
