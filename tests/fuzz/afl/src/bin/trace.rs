//! AFL++ driver of the `trace` target (persistent mode: one process runs many inputs).
fn main() {
    afl::fuzz!(|data: &[u8]| flex_fuzz::trace(data));
}
