#!/usr/bin/env bash
# What Slurm's names cost over flexsub's: `sbatch --parsable --wrap true` (flex-slurm through
# its link) against `flexsub --parsable --wrap true`, alternated one for one against the same
# flexd, so that both see the same load and the same growing queue.
#
#   cargo build --release --workspace && bash benches/slurm-names.sh
#
# flexd (release build) runs on the a100-40gb-x2 testbed from a private state directory and
# socket; each submission is timed in the shell from before the process starts until it exits
# ($EPOCHREALTIME), so both include the same fork and exec. Prints p50, p90 and the mean of each,
# and sbatch's over flexsub's (the target: within 10%).
#
# Sizes: SLURM_NAMES_N (500 submissions of each); FLEX_BIN (target/release).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${SLURM_NAMES_N:-500}
BIN=$(realpath "${FLEX_BIN:-target/release}")
for b in flexd flexsub flexq flex-slurm; do
  [ -x "$BIN/$b" ] || { echo "slurm-names.sh: $BIN/$b missing: cargo build --release --workspace" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/flex-names.XXXXXX)
chmod 755 "$WORK"
FLEXD=
cleanup() {
  [ -n "$FLEXD" ] && { kill "$FLEXD" 2>/dev/null || true; wait "$FLEXD" 2>/dev/null || true; }
  rm -rf "$WORK" 2>/dev/null || true
}
trap cleanup EXIT

cat > "$WORK/flexd.toml" <<TOML
[limits]
max_queued_per_user = 1000000
TOML
FLEX_LOG=warn "$BIN/flexd" --config "$WORK/flexd.toml" --socket "$WORK/sock" \
  --state-dir "$WORK/state" --topology a100-40gb-x2.toml --force-topology \
  2> "$WORK/flexd.log" &
FLEXD=$!
export FLEX_SOCKET="$WORK/sock" FLEX_CONFIG="$WORK/flexd.toml"
for ((i = 0; i < 300; i++)); do
  "$BIN/flexq" -h >/dev/null 2>&1 && break
  sleep 0.1
done
"$BIN/flexq" -h >/dev/null || { echo "slurm-names.sh: flexd did not start:" >&2; cat "$WORK/flexd.log" >&2; exit 1; }
"$BIN/flex-slurm" links "$WORK/names" >/dev/null
mkdir -p "$WORK/out"
cd "$WORK/out"

# ms of one run of "$@"
time_one() {
  local t0 t1
  t0=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  t1=$EPOCHREALTIME
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }'
}
# warm both up (page cache, flexd's first connections)
for ((i = 0; i < 20; i++)); do
  "$BIN/flexsub" --parsable --wrap true >/dev/null 2>&1
  "$WORK/names/sbatch" --parsable --wrap true >/dev/null 2>&1
done
: > "$WORK/flexsub.ms"
: > "$WORK/sbatch.ms"
for ((i = 0; i < N; i++)); do
  if ((i % 2)); then
    time_one "$WORK/names/sbatch" --parsable --wrap true >> "$WORK/sbatch.ms"
    time_one "$BIN/flexsub" --parsable --wrap true >> "$WORK/flexsub.ms"
  else
    time_one "$BIN/flexsub" --parsable --wrap true >> "$WORK/flexsub.ms"
    time_one "$WORK/names/sbatch" --parsable --wrap true >> "$WORK/sbatch.ms"
  fi
done

stats() {
  sort -g "$1" | awk '{ v[NR] = $1; s += $1 } END {
    i50 = int((NR - 1) * 0.5 + 0.5) + 1; i90 = int((NR - 1) * 0.9 + 0.5) + 1
    printf "%.3f %.3f %.3f %d\n", v[i50], v[i90], s / NR, NR }'
}
read -r fp50 fp90 fmean fn < <(stats "$WORK/flexsub.ms")
read -r sp50 sp90 smean sn < <(stats "$WORK/sbatch.ms")
printf 'flexsub --parsable --wrap true   p50 %.2f  p90 %.2f  mean %.2f ms  (%d runs)\n' "$fp50" "$fp90" "$fmean" "$fn"
printf 'sbatch --parsable --wrap true    p50 %.2f  p90 %.2f  mean %.2f ms  (%d runs)\n' "$sp50" "$sp90" "$smean" "$sn"
awk -v a="$sp50" -v b="$fp50" -v c="$smean" -v d="$fmean" \
  'BEGIN { printf "sbatch / flexsub: p50 %.3f, mean %.3f\n", a / b, c / d }'
