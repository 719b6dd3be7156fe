//! flexsim: trace-driven simulation of Flex-MIG, Dynamic-MIG and Static-MIG through Flex's
//! scheduler core. See docs/flexsim.md.

fn main() {
    std::process::exit(flexsim::cli::main());
}
