//! AFL++ driver of the `topology` target (persistent mode: one process runs many inputs).
fn main() {
    afl::fuzz!(|data: &[u8]| flex_fuzz::topology(data));
}
