//! flexsub: submit a batch script to flexd (like sbatch).

fn main() {
    let m = flexsub::submit::command().get_matches();
    let code = match flexsub::submit::run(&m, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexsub", &e),
    };
    std::process::exit(code);
}
