//! flexsub: submit a batch script to flexd (like sbatch).

fn main() {
    let m = flexsub::commands::submit::command().get_matches();
    let code = match flexsub::commands::submit::run(&m, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexsub", &e),
    };
    std::process::exit(code);
}
