//! AFL++ driver of the `frame` target (persistent mode: one process runs many inputs).
fn main() {
    afl::fuzz!(|data: &[u8]| flex_fuzz::frame(data));
}
