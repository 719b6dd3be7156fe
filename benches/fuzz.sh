#!/usr/bin/env bash
# Coverage-guided fuzzing of one reader of untrusted input with AFL++ (cargo-afl), for a given
# time; prints the executions, the coverage and what it found.
#
#   cargo install cargo-afl && cargo afl config --build     # once: builds AFL++
#   bash benches/fuzz.sh TARGET SECONDS [OUT]
#
# TARGET is one of tests/fuzz/src/lib.rs's TARGETS: script (flexsub's directives and command
# line), frame (flexd's frame decoder, the Hello and requests, and the answers), config
# (flexd.toml), topology (topology files), trace (flexsim's traces), rows (flexq's rows).
# The drivers (tests/fuzz/afl) run in AFL's persistent mode, starting from the checked-in
# corpus (tests/fuzz/corpus/TARGET). OUT (default target-fuzz/TARGET) holds AFL's findings:
# OUT/default/crashes and OUT/default/hangs are the inputs to turn into regression tests (a
# copy in tests/fuzz/crashes/TARGET, replayed by `cargo test -p flex-fuzz`, and a test of the
# reader that failed); OUT/default/queue is the corpus it grew.
#
# Environment: FUZZ_EXECS=N stops once N inputs ran, if that comes before SECONDS;
# FUZZ_BUILD=0 skips the build; FUZZ_NICE (19) is the fuzzer's niceness; AFL's
# own variables pass through. The build has its own target directory (target-afl): everything
# in it is instrumented. It is not --locked: the drivers' lock file (tests/fuzz/afl/Cargo.lock)
# takes in what the main workspace's crates have added since.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:?usage: benches/fuzz.sh TARGET SECONDS [OUT]}
seconds=${2:?usage: benches/fuzz.sh TARGET SECONDS [OUT]}
out=${3:-target-fuzz/$target}
corpus=tests/fuzz/corpus/$target
[ -d "$corpus" ] || { echo "fuzz.sh: no corpus $corpus (targets: $(ls tests/fuzz/corpus))" >&2; exit 2; }

export CARGO_TARGET_DIR="$PWD/target-afl"
if [ "${FUZZ_BUILD:-1}" != 0 ]; then
  (cd tests/fuzz/afl && cargo afl build --release --bin "$target")
fi
bin="$CARGO_TARGET_DIR/release/$target"

# The machine may be shared: no core binding, no complaint about the CPU governor or the core
# pattern, no screen; a run that is stopped resumes where it was (AFL_AUTORESUME).
export AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
export AFL_NO_UI=1 AFL_AUTORESUME=1
mkdir -p "$out"
start=$(date +%s)
# -t: 1 s per input is a hang; -V: stop after SECONDS; -E: after FUZZ_EXECS executions.
nice -n "${FUZZ_NICE:-19}" cargo afl fuzz -i "$corpus" -o "$out" -t 1000 -V "$seconds" \
  ${FUZZ_EXECS:+-E "$FUZZ_EXECS"} "$bin" >"$out/fuzz.log" 2>&1 ||
  { tail -20 "$out/fuzz.log" >&2; exit 1; }

stats=$out/default/fuzzer_stats
get() { sed -n "s/^$1 *: *//p" "$stats"; }
crashes=$(find "$out/default/crashes" -type f -name 'id:*' | wc -l)
hangs=$(find "$out/default/hangs" -type f -name 'id:*' | wc -l)
echo "target:      $target"
echo "time:        $(($(date +%s) - start)) s (this run; $(get run_time) s in AFL's stats)"
echo "executions:  $(get execs_done) ($(get execs_per_sec)/s)"
echo "coverage:    $(get edges_found) of $(get total_edges) edges, map density $(get bitmap_cvg)"
echo "corpus:      $(get corpus_count) inputs"
echo "crashes:     $crashes (saved_crashes $(get saved_crashes)) in $out/default/crashes"
echo "hangs:       $hangs in $out/default/hangs"
echo "machine:     $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)"
