#!/usr/bin/env bash
# Flex on a real NVIDIA GPU, in one command and under ten minutes, without changing the GPU's
# MIG mode (no `nvidia-smi -mig`, no instance created or destroyed):
#
#   bash benches/gpu-check.sh [--bin DIR] [OUTDIR]
#
#  1. what the driver reports (nvidia-smi -L and --query-gpu) beside what Flex's NVML probe
#     finds (flexgres node / conf), and the UUIDs of both compared;
#  2. flexd started on the real hardware (no --force-topology) from a private socket, state
#     directory and config under a temporary directory, its leaves (flexq --leaves) and
#     settings (flexcontrol show config), the metrics endpoint scraped while jobs run;
#  3. a one-leaf job that checks its device: PyTorch (device name, a matmul checked against
#     the CPU) and the CUDA driver API through ctypes (cuInit, cuDeviceGetName), so the check
#     runs where PyTorch is absent;
#  4. a two-rank NCCL all-reduce through flexrun: on two MIG instances when MIG is on; with MIG
#     off, flexrun -n 2 in a one-GPU job, two ranks on the one GPU by hand with flexrun's
#     upstream-NCCL variables (NCCL_MULTI_RANK_GPU_ENABLE=1, P2P off) and without them, and
#     two jobs of half a GPU each (--gpu-fraction 0.5) running side by side;
#  5. nvidia-smi --query-gpu sampled every half second while the jobs run;
#  6. flexacct's records of the jobs, flexd's own NVML telemetry of the device-checking job
#     and of the two half-GPU jobs (flexacct --json, flexeff), device confinement (a job with
#     no GPU is refused the GPU's node, a one-GPU job opens it), and what NVML sampling
#     costs when the telemetry bench
#     (`cargo bench -p flexd --bench telemetry --no-run`, copied as telemetry-bench) lies
#     beside the binaries.
#
# Every step is run with a timeout, reported PASS or FAIL with its output, and the next step
# runs regardless. The report is OUTDIR/gpu-check.md (OUTDIR: the argument, else $OUT, else
# ./gpu-check-DATE), beside flexd.log and telemetry.csv.
#
# Binaries: --bin DIR, else $FLEX_BIN, else PATH, else target/release of this checkout.
# GPU_CHECK_BUDGET (seconds, default 540) bounds the whole run.
# Exit codes: 0 every step passed, 1 some step failed, 2 no GPU (no driver, or nvidia-smi lists
# none: one "no GPU" line says which), 3 bad usage or missing binaries.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)

BIN=${FLEX_BIN:-}
OUTDIR=
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=${2:?--bin needs a directory}; shift 2 ;;
    --bin=*) BIN=${1#--bin=}; shift ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option $1 (--bin DIR, OUTDIR)" >&2; exit 3 ;;
    *) OUTDIR=$1; shift ;;
  esac
done
OUTDIR=${OUTDIR:-${OUT:-$PWD/gpu-check-$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$OUTDIR" || { echo "gpu-check: cannot create $OUTDIR" >&2; exit 3; }
OUTDIR=$(cd "$OUTDIR" && pwd)
REPORT=$OUTDIR/gpu-check.md

# --- no GPU: one clear line, a short report, exit 2 --------------------------------------------

no_gpu() {
  echo "gpu-check: no GPU: $1" >&2
  {
    echo "# Flex gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    echo
    echo "no GPU: $1. Nothing was run."
  } > "$REPORT"
  exit 2
}
command -v nvidia-smi >/dev/null 2>&1 || no_gpu "nvidia-smi not found (no NVIDIA driver installed)"
SMI_L=$(timeout 60 nvidia-smi -L 2>&1) || no_gpu "nvidia-smi -L failed: $(echo "$SMI_L" | head -1)"
echo "$SMI_L" | grep -q '^GPU [0-9]' || no_gpu "nvidia-smi -L lists no GPU"

# --- binaries --------------------------------------------------------------------------------

NEED=(flexd flexsub flexq flexrun flexgres flexacct flexcontrol flexeff)
find_bin() {
  local dir
  for dir in "$BIN" "" "$REPO/target/release"; do
    if [ -z "$dir" ]; then
      command -v "$1" >/dev/null 2>&1 && { dirname "$(command -v "$1")"; return 0; }
    elif [ -x "$dir/$1" ]; then
      (cd "$dir" && pwd); return 0
    fi
  done
  return 1
}
BIN=$(find_bin flexd) || { echo "gpu-check: flexd not found (--bin DIR, \$FLEX_BIN, PATH or target/release)" >&2; exit 3; }
for b in "${NEED[@]}"; do
  [ -x "$BIN/$b" ] || { echo "gpu-check: $BIN/$b missing (cargo build --release)" >&2; exit 3; }
done
export PATH="$BIN:$PATH"

WORK=$(mktemp -d /tmp/flex-gpu-check.XXXXXX)
export WORK SMI_L
chmod 755 "$WORK"
DETAILS=$WORK/details.md
SUMMARY=$WORK/summary.md
: > "$DETAILS"; : > "$SUMMARY"
FAILED=0
PIDS=()
T_START=$(date +%s)
# Seconds the whole check may take; steps past it are reported SKIPPED.
BUDGET=${GPU_CHECK_BUDGET:-540}

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  [ -f "$WORK/flexd.log" ] && cp "$WORK/flexd.log" "$OUTDIR/flexd.log"
  [ -f "$WORK/telemetry.csv" ] && cp "$WORK/telemetry.csv" "$OUTDIR/telemetry.csv"
  rm -rf "$WORK"
}
trap cleanup EXIT

# The report so far (written after every step, so a run stopped from outside leaves one).
assemble() {
  {
    echo "# Flex gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    echo
    echo "$(echo "$SMI_L" | head -1); MIG $([ "${MIG_ON:-0}" = 1 ] && echo "on, $N_MIG instance(s)" || echo off);" \
      "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1);" \
      "binaries from $BIN; $(($(date +%s) - T_START)) s in all."
    echo
    echo "| step | result | took |"
    echo "|---|---|---|"
    cat "$SUMMARY"
    echo
    echo "## What each step printed"
    echo
    cat "$DETAILS"
  } > "$REPORT"
}

# step NAME SECONDS CMD...: run CMD (a command or one of the functions below, which are
# exported: each step runs in its own bash under timeout, which kills the step's whole process
# group when time runs out) and record PASS/FAIL and its output (the last 80 lines) in the
# report; never stops the script.
step() {
  local name=$1 secs=$2 rc t0 t1 left
  shift 2
  left=$((T_START + BUDGET - $(date +%s)))
  if [ $left -lt 10 ]; then
    echo "| $name | SKIPPED: the ${BUDGET}s budget is spent | - |" >> "$SUMMARY"
    FAILED=$((FAILED + 1))
    assemble
    return 1
  fi
  [ "$secs" -gt "$left" ] && secs=$left
  echo "gpu-check: $name" >&2
  t0=$(date +%s.%N)
  timeout -k 5 "$secs" bash -c '"$@"' step "$@" > "$WORK/step.out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local took
  took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local verdict=PASS
  if [ $rc -ne 0 ]; then
    verdict="FAIL (exit $rc$([ $rc -eq 124 ] && echo ", timed out after ${secs}s"))"
    FAILED=$((FAILED + 1))
  fi
  echo "| $name | $verdict | ${took}s |" >> "$SUMMARY"
  {
    echo "### $name: $verdict"
    echo
    echo '```'
    local lines
    lines=$(wc -l < "$WORK/step.out")
    [ "$lines" -gt 80 ] && echo "[... $((lines - 80)) earlier lines left out ...]"
    tail -n 80 "$WORK/step.out"
    echo '```'
    echo
  } >> "$DETAILS"
  assemble
  return $rc
}

# --- the programs jobs run ---------------------------------------------------------------------

cat > "$WORK/device_check.py" <<'EOF'
# Which device a job sees: PyTorch when importable, and the CUDA driver API through ctypes.
import ctypes, os, sys, time
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
print("FLEX_JOB_ID=%s FLEX_LEAVES=%s FLEX_GPU_FRACTION=%s" % (os.environ.get("FLEX_JOB_ID"),
      os.environ.get("FLEX_LEAVES"), os.environ.get("FLEX_GPU_FRACTION", "-")))
ok = True
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
try:
    import torch
except Exception as e:
    torch = None
    print("torch: not importable (%s); the ctypes check decides" % e)
if torch is not None:
    try:
        print("torch %s, CUDA %s, NCCL %s" % (torch.__version__, torch.version.cuda,
              ".".join(map(str, torch.cuda.nccl.version()))))
        n = torch.cuda.device_count()
        print("torch: device_count=%d" % n)
        p = torch.cuda.get_device_properties(0)
        print("torch: device 0 = %s, %d MiB, %d SMs, uuid %s" % (p.name,
              p.total_memory >> 20, p.multi_processor_count, getattr(p, "uuid", "?")))
        a = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(1))
        b = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(2))
        want = a @ b
        got = (a.cuda() @ b.cuda()).cpu()
        err = (got - want).abs().max().item()
        print("torch: 1024x1024 fp32 matmul on the GPU, max |GPU - CPU| = %.3g" % err)
        ok = ok and err < 1e-2
        if seconds > 0:
            # Keep the GPU busy so that the samplers see the job.
            x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
            hold = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
            t_end = time.time() + seconds
            k = 0
            torch.cuda.synchronize()
            t0 = time.time()
            while time.time() < t_end:
                y = x @ x
                k += 1
                if k % 20 == 0:
                    torch.cuda.synchronize()
            torch.cuda.synchronize()
            dt = time.time() - t0
            print("torch: %d bf16 8192^3 matmuls in %.1fs: %.0f TFLOP/s; holding %d MiB" % (
                  k, dt, k * 2 * 8192 ** 3 / dt / 1e12,
                  torch.cuda.memory_allocated() >> 20))
            del y, hold
    except Exception as e:
        ok = False
        print("torch: FAILED: %r" % e)
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    r = cuda.cuInit(0)
    count = ctypes.c_int(0)
    r2 = cuda.cuDeviceGetCount(ctypes.byref(count))
    name = ctypes.create_string_buffer(128)
    dev = ctypes.c_int(0)
    r3 = cuda.cuDeviceGet(ctypes.byref(dev), 0)
    r4 = cuda.cuDeviceGetName(name, 128, dev)
    mem = ctypes.c_size_t(0)
    r5 = cuda.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
    print("ctypes libcuda: cuInit=%d count=%d (rc %d) device 0 = %s (rc %d/%d), %d MiB (rc %d)" % (
          r, count.value, r2, name.value.decode(), r3, r4, mem.value >> 20, r5))
    ok = ok and r == 0 and count.value >= 1
except OSError as e:
    ok = False
    print("ctypes libcuda: FAILED: %s" % e)
sys.exit(0 if ok else 1)
EOF

cat > "$WORK/allreduce.py" <<'EOF'
# A two-rank NCCL all-reduce: every rank adds its rank + 1; the sum is checked, then a 256 MiB
# all-reduce is timed.
import datetime, os, sys, time
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print("rank %d/%d: CUDA_VISIBLE_DEVICES=%s NCCL_MULTI_RANK_GPU_ENABLE=%s NCCL_P2P_DISABLE=%s "
      "MASTER=%s:%s" % (rank, world, os.environ.get("CUDA_VISIBLE_DEVICES"),
      os.environ.get("NCCL_MULTI_RANK_GPU_ENABLE", "-"), os.environ.get("NCCL_P2P_DISABLE", "-"),
      os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")), flush=True)
torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=45),
                        device_id=torch.device("cuda", 0))
t = torch.full((1024,), float(rank + 1), device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
want = world * (world + 1) / 2
good = bool((t == want).all().item())
print("rank %d: all_reduce sum = %s (want %s): %s" % (rank, t[0].item(), want,
      "ok" if good else "WRONG"), flush=True)
big = torch.ones(64 << 20, device="cuda")
dist.all_reduce(big)
torch.cuda.synchronize()
t0 = time.time()
for _ in range(10):
    dist.all_reduce(big)
torch.cuda.synchronize()
dt = (time.time() - t0) / 10
if rank == 0:
    print("rank 0: 256 MiB fp32 all_reduce: %.2f ms, algbw %.1f GB/s" % (dt * 1e3,
          big.numel() * 4 / dt / 1e9), flush=True)
dist.destroy_process_group()
sys.exit(0 if good else 1)
EOF

cat > "$WORK/nvml_probe.py" <<'EOF'
# What NVML (nvidia-ml-py) reports for this job's device while the job runs: the counters a
# per-leaf sampler could read, each printed or marked "not reported" with NVML's answer.
import os, sys, time
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
try:
    import pynvml as N
except Exception as e:
    print("nvml: pynvml not importable: %s" % e)
    sys.exit(1)
def get(what, f, *a):
    try:
        return f(*a)
    except Exception as e:
        print("nvml: %s: not reported (%s)" % (what, e))
        return None
N.nvmlInit()
print("nvml: driver %s, NVML %s" % (N.nvmlSystemGetDriverVersion(), N.nvmlSystemGetNVMLVersion()))
uuid = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
h = get("handle of " + uuid, N.nvmlDeviceGetHandleByUUID, uuid)
if h is None:
    h = N.nvmlDeviceGetHandleByIndex(0)
    print("nvml: using device index 0")
is_mig = get("is MIG device", N.nvmlDeviceIsMigDeviceHandle, h)
parent = h
if is_mig:
    parent = get("parent of MIG device", N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, h) or h
print("nvml: device %s MIG device=%s mig mode of its GPU=%s" % (uuid, is_mig,
      get("mig mode", N.nvmlDeviceGetMigMode, parent)))
gpm = get("GPM support", N.nvmlGpmQueryDeviceSupport, h)
print("nvml: GPM supported=%s" % (getattr(gpm, "isSupportedDevice", None),))
time.sleep(1.0)  # let the job's work start
e0 = get("total energy (mJ)", N.nvmlDeviceGetTotalEnergyConsumption, parent)
t0 = time.time()
s1 = None
if gpm is not None and getattr(gpm, "isSupportedDevice", 0):
    s1 = get("GPM sample alloc", N.nvmlGpmSampleAlloc)
    if s1 is not None and get("GPM sample 1", N.nvmlGpmSampleGet, h, s1) is None:
        s1 = None
cost = []
n = 0
while time.time() - t0 < seconds:
    c0 = time.perf_counter()
    u = get("utilization", N.nvmlDeviceGetUtilizationRates, h)
    m = get("memory", N.nvmlDeviceGetMemoryInfo, h)
    p = get("power (mW)", N.nvmlDeviceGetPowerUsage, parent)
    procs = get("compute processes", N.nvmlDeviceGetComputeRunningProcesses, h)
    cost.append(time.perf_counter() - c0)
    if n % 4 == 0:
        print("nvml: t=%.1fs util gpu=%s%% mem=%s%%  memory used=%s MiB  power=%s W  processes=%s" % (
              time.time() - t0, getattr(u, "gpu", "-"), getattr(u, "memory", "-"),
              None if m is None else m.used >> 20, None if p is None else p / 1000.0,
              None if procs is None else [(x.pid, (x.usedGpuMemory or 0) >> 20) for x in procs]))
    n += 1
    time.sleep(0.5)
e1 = get("total energy (mJ)", N.nvmlDeviceGetTotalEnergyConsumption, parent)
if e0 is not None and e1 is not None:
    print("nvml: energy over %.1fs: %.1f J" % (time.time() - t0, (e1 - e0) / 1000.0))
if s1 is not None:
    s2 = N.nvmlGpmSampleAlloc()
    if get("GPM sample 2", N.nvmlGpmSampleGet, h, s2) is not None:
        try:
            mg = N.c_nvmlGpmMetricsGet_t()
            mg.version = N.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = 3
            mg.sample1 = s1
            mg.sample2 = s2
            ids = [N.NVML_GPM_METRIC_SM_UTIL, N.NVML_GPM_METRIC_SM_OCCUPANCY,
                   N.NVML_GPM_METRIC_DRAM_BW_UTIL]
            for i, mid in enumerate(ids):
                mg.metrics[i].metricId = mid
            N.nvmlGpmMetricsGet(mg)
            print("nvml: GPM over the run: SM util %.1f%%, SM occupancy %.1f%%, DRAM bw util %.1f%%"
                  % tuple(mg.metrics[i].value for i in range(3)))
        except Exception as e:
            print("nvml: GPM metrics: not reported (%r)" % e)
pu = get("process utilization", N.nvmlDeviceGetProcessUtilization, h, 0)
if pu:
    print("nvml: process utilization: %s" % [(x.pid, x.smUtil, x.memUtil) for x in pu])
if cost:
    cost.sort()
    print("nvml: one sample (util, memory, power, processes) took median %.0f us, max %.0f us over %d"
          % (cost[len(cost) // 2] * 1e6, cost[-1] * 1e6, len(cost)))
EOF

# Two ranks on this job's one GPU by hand, as flexrun would start them were the job two leaves;
# $1 = "multi" sets flexrun's upstream NCCL variables, "plain" leaves them out.
cat > "$WORK/two_by_hand.sh" <<'EOF'
#!/bin/bash
set -o pipefail
dev=${FLEX_MIG_UUIDS%%,*}
port=$((FLEX_MASTER_PORT + 1))
pids=()
for r in 0 1; do
  if [ "$1" = multi ]; then
    extra=(NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_P2P_DISABLE=1)
  else
    extra=()
  fi
  env CUDA_VISIBLE_DEVICES="$dev" RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${extra[@]}" python3 "$2" 2>&1 | sed "s/^/$r: /" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
EOF
chmod +x "$WORK/two_by_hand.sh"

# Start nvidia-smi's sampler for the rest of the run.
nvidia-smi --query-gpu=timestamp,index,uuid,mig.mode.current,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm \
  --format=csv -lms 500 > "$WORK/telemetry.csv" 2> "$WORK/telemetry.err" &
PIDS+=($!)

# --- 1. the driver and Flex's NVML probe ------------------------------------------------------

env_info() {
  echo "kernel: $(uname -srm); cargo: $(command -v cargo || echo none)"
  nvidia-smi | head -4 | tail -2
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,mig.mode.current,mig.mode.pending,memory.total,power.limit --format=csv
  echo "--- nvidia-smi -L"
  echo "$SMI_L"
  echo "--- python"
  command -v python3 && python3 -c 'import sys; print(sys.version.split()[0])'
  python3 - <<'PY'
try:
    import torch
    print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL",
          ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("torch not importable:", e)
try:
    from importlib.metadata import version
    print("nvidia-nccl wheel:", version("nvidia-nccl-cu13"))
except Exception as e:
    print("nvidia-nccl-cu13 wheel:", e)
PY
  echo "--- cgroup: $(stat -fc %T /sys/fs/cgroup 2>&1)"
}
export -f env_info
step "driver, CUDA, PyTorch and NCCL versions" 60 env_info

probe() {
  echo "--- flexgres node"
  flexgres node || return 1
  echo "--- flexgres conf"
  flexgres conf
  local rc=$?
  echo "--- flexgres conf --count-only"
  flexgres conf --count-only || return 1
  return $rc
}
export -f probe
step "Flex's NVML probe (flexgres)" 60 probe

uuids_match() {
  local want have missing=0
  want=$(echo "$SMI_L" | grep -o '\(GPU\|MIG\)-[0-9a-fA-F-]*' | sort -u)
  mig=$(nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader | sort -u)
  echo "MIG mode: $mig"
  have=$(flexq --leaves 2>&1)
  echo "$have"
  echo "--- the UUIDs nvidia-smi -L lists, and whether flexd has them as leaves"
  for u in $want; do
    # With MIG on, the parent GPU's UUID is no leaf; its instances are.
    if echo "$SMI_L" | grep -q "UUID: $u)" && echo "$SMI_L" | grep -q "^  MIG" && [ "${u#GPU-}" != "$u" ]; then
      echo "$u (GPU with MIG instances)"
      continue
    fi
    if echo "$have" | grep -q "$u"; then echo "$u leaf: yes"; else echo "$u leaf: NO"; missing=1; fi
  done
  return $missing
}
export -f uuids_match

# --- 2. flexd on the real hardware -------------------------------------------------------------

export METRICS_PORT=$((20000 + RANDOM % 20000))
cat > "$WORK/flexd.toml" <<EOF
socket = "$WORK/sock"
state_dir = "$WORK/state"
metrics_listen = "127.0.0.1:$METRICS_PORT"
keep_finished = "1h"
telemetry_period = "2s"
EOF
export FLEX_SOCKET=$WORK/sock
export FLEX_CONFIG=$WORK/flexd.toml

# flexd runs in this shell's background (not under a step's timeout, which would end it).
FLEX_LOG=info flexd --config "$WORK/flexd.toml" 2> "$WORK/flexd.log" &
export FLEXD=$!
PIDS+=($FLEXD)
flexd_answers() {
  for _ in $(seq 100); do
    if flexq >/dev/null 2>&1; then
      cat "$WORK/flexd.log"
      grep -q 'nvml' "$WORK/flexd.log" || { echo "flexd's log does not name nvml as its source"; return 1; }
      return 0
    fi
    kill -0 "$FLEXD" 2>/dev/null || break
    sleep 0.1
  done
  echo "flexd did not answer:"; cat "$WORK/flexd.log"; return 1
}
export -f flexd_answers
step "flexd starts on the real GPU" 30 flexd_answers
step "flexd's leaves are the driver's UUIDs" 20 uuids_match
step "flexcontrol show config" 20 flexcontrol show config

scrape() {
  if command -v curl >/dev/null; then
    curl -s "http://127.0.0.1:$METRICS_PORT/metrics"
  else
    python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$METRICS_PORT/metrics').read().decode())"
  fi
}
export -f scrape

MIG_ON=0
nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader | grep -q Enabled && MIG_ON=1
N_MIG=$(echo "$SMI_L" | grep -c '^  MIG')

# flexsub_wait ARGS...: submit, wait for the end (-W), print the job's output file.
flexsub_wait() {
  local id rc
  id=$(flexsub --parsable -t 5 -o "$WORK/job-%j.out" "$@" < /dev/null) || return 1
  echo "$id" >> "$WORK/jobs"
  echo "job $id: flexsub $*"
  flexq -j "$id" 2>&1 | tail -n +1
  # -W is not used: the job id is wanted before the end, for the metrics scrape.
  local state=
  for _ in $(seq 1200); do
    state=$(flexq -h -j "$id" -o '%T' 2>/dev/null)
    # The last scrape while it runs holds the latest telemetry gauges.
    [ "$state" = RUNNING ] && scrape > "$WORK/metrics-$id" 2>&1
    case "$state" in PENDING|CONFIGURING|RUNNING|COMPLETING) ;; *) break ;; esac
    sleep 0.2
  done
  rc=$(flexacct -n -P -j "$id" -o State,ExitCode 2>&1 | head -1)
  # NCCL's per-channel lines say nothing a reader needs.
  grep -v 'NCCL INFO \(Channel\|Trees\)' "$WORK/job-$id.out" 2>/dev/null
  echo "--- flexacct: $rc"
  if [ -f "$WORK/metrics-$id" ]; then
    echo "--- metrics while job $id ran (flex_ lines)"
    grep '^flex_' "$WORK/metrics-$id" | grep -v ' 0$' | head -30
  fi
  case "$rc" in COMPLETED\|0:0*) return 0 ;; *) return 1 ;; esac
}
export -f flexsub_wait

# --- 3. a job that checks its device -----------------------------------------------------------

step "a 1-leaf job checks its device (torch + ctypes libcuda), busy 8 s" 120 \
  flexsub_wait --leaves 1 --wrap "python3 $WORK/nvml_probe.py 6 & python3 $WORK/device_check.py 8; r=\$?; wait; exit \$r"

# flexd's own NVML telemetry of that job: its summary follows the end by a sampling period.
telemetry_of() {
  local id=$1
  for _ in $(seq 50); do
    flexacct --json -j "$id" | grep -q '"gpu_usage"' && break
    sleep 0.2
  done
  flexacct --json -j "$id" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print("gpu_usage:", json.dumps(r.get("gpu_usage")), " cpu_usec:", r.get("cpu_usec"), " max_rss:", r.get("max_rss"))'
  flexeff "$id"
  flexacct --json -j "$id" | grep -q '"gpu_usage"'
}
export -f telemetry_of
step "flexd's NVML telemetry of job 1 (flexacct, flexeff)" 30 telemetry_of 1

# constrain_devices (on by default): a job's cgroup denies the GPU nodes it was not given.
# The probe opens each GPU node and nvidiactl and prints what the kernel answered.
cat > "$WORK/open_nodes.py" <<'PY'
import errno, glob, os, sys
want = sys.argv[1]  # "own": every GPU node opens; "none": every GPU node is refused (EPERM)
ok = True
for path in sorted(glob.glob("/dev/nvidia[0-9]*")) + ["/dev/nvidiactl"]:
    try:
        os.close(os.open(path, os.O_RDWR))
        got = "opened"
    except OSError as e:
        got = errno.errorcode.get(e.errno, str(e.errno))
    gpu_node = path[len("/dev/nvidia"):].isdigit()
    expect = "opened" if (not gpu_node or want == "own") else "EPERM"
    print(f"{path}: {got} (expected {expect})")
    ok &= got == expect
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
sys.exit(0 if ok else 1)
PY
confined() {
  flexcontrol show config | grep -E '^(constrain_devices|cgroup_devices|gpu_devices)' || true
  echo "--- a job without a GPU request"
  flexsub_wait --wrap "python3 $WORK/open_nodes.py none" || return 1
  echo "--- a job of one GPU"
  flexsub_wait --gpus 1 --wrap "python3 $WORK/open_nodes.py own"
}
export -f confined
step "constrain_devices: a job without a GPU cannot open the GPU's node, a one-GPU job can" 60 confined
if [ -x "$BIN/telemetry-bench" ]; then
  step "what NVML sampling costs (flexd's telemetry bench)" 60 \
    env FLEX_TELEMETRY_ROUNDS=200 "$BIN/telemetry-bench" --bench
fi

# --- 4. NCCL all-reduce -----------------------------------------------------------------------

export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV
if [ $MIG_ON = 1 ] && [ "$N_MIG" -ge 2 ]; then
  step "two-rank NCCL all-reduce on two MIG instances (flexrun)" 180 \
    flexsub_wait --leaves 2 --wrap "flexrun -l python3 $WORK/allreduce.py"
elif [ $MIG_ON = 1 ]; then
  echo "| two-rank NCCL all-reduce on MIG | SKIPPED: $N_MIG MIG instance(s); creating more would change the GPU's MIG layout | - |" >> "$SUMMARY"
else
  # Requests one GPU cannot hold: flexd must answer (exit 0 or 1), what it says is the record.
  answers() { "$@"; local rc=$?; echo "exit $rc"; [ $rc -le 1 ]; }
  export -f answers
  for req in "--leaves 2" "--gpus 2" "--gpu-fraction 0.5" "--gpu-fraction 1.5"; do
    step "MIG off: flexd's answer to $req (flexsub --test-only)" 20 \
      answers flexsub --test-only -t 5 $req --wrap true
  done
  step "MIG off: a one-rank NCCL all-reduce through flexrun in a one-GPU job" 120 \
    flexsub_wait --gpus 1 --wrap "flexrun -l python3 $WORK/allreduce.py"
  step "MIG off: flexrun -n 2 in a one-GPU job" 120 \
    flexsub_wait --gpus 1 --wrap "flexrun -l -n 2 python3 $WORK/allreduce.py"
  step "MIG off: two ranks on the one GPU with NCCL_MULTI_RANK_GPU_ENABLE=1, P2P off (by hand)" 100 \
    flexsub_wait --gpus 1 --wrap "$WORK/two_by_hand.sh multi $WORK/allreduce.py"
  step "MIG off: two ranks on the one GPU with no NCCL variables (by hand)" 100 \
    flexsub_wait --gpus 1 --wrap "$WORK/two_by_hand.sh plain $WORK/allreduce.py"
  halves() {
    local a b both=0 rc=0
    # The first job also lists what NVML reports per process on the shared GPU.
    a=$(flexsub --parsable -t 5 -o "$WORK/job-%j.out" --gpu-fraction 0.5 --wrap "python3 $WORK/nvml_probe.py 7 & python3 $WORK/device_check.py 10; r=\$?; wait; exit \$r" < /dev/null) || return 1
    b=$(flexsub --parsable -t 5 -o "$WORK/job-%j.out" --gpu-fraction 0.5 --wrap "python3 $WORK/device_check.py 10" < /dev/null) || return 1
    printf '%s\n' "$a" "$b" >> "$WORK/jobs"
    for _ in $(seq 300); do
      local q
      q=$(flexq -h -o '%i %T' 2>/dev/null)
      [ "$(echo "$q" | grep -c RUNNING)" = 2 ] && [ $both = 0 ] && { both=1; echo "both running at once:"; flexq; scrape > "$WORK/metrics-halves" 2>&1; }
      [ -z "$q" ] && break
      sleep 0.2
    done
    [ $both = 1 ] || { echo "the two half-GPU jobs never ran at the same time"; rc=1; }
    for j in "$a" "$b"; do
      echo "--- job $j"; grep -v 'NCCL INFO \(Channel\|Trees\)' "$WORK/job-$j.out"
      flexacct -n -P -j "$j" -o JobID,State,ExitCode,AllocTRES
      flexacct -n -P -j "$j" -o State | grep -q COMPLETED || rc=1
    done
    echo "--- metrics while both ran (flex_ lines)"
    grep '^flex_' "$WORK/metrics-halves" 2>/dev/null | grep -v ' 0$' | head -30
    return $rc
  }
  export -f halves
  step "MIG off: two jobs of --gpu-fraction 0.5 share the GPU" 120 halves
  # A share's own GPU memory and utilisation come from NVML's per-process figures, summed
  # over the job's processes.
  halves_telemetry() {
    local j rc=0
    for j in $(tail -2 "$WORK/jobs"); do
      echo "--- job $j"; telemetry_of "$j" || rc=1
    done
    return $rc
  }
  export -f halves_telemetry
  step "flexd's per-process NVML telemetry of the two half-GPU jobs (flexacct, flexeff)" 30 halves_telemetry
fi
unset NCCL_DEBUG NCCL_DEBUG_SUBSYS

# --- 5, 6. telemetry and accounting -------------------------------------------------------------

telemetry() {
  [ -s "$WORK/telemetry.csv" ] || { echo "no samples:"; cat "$WORK/telemetry.err"; return 1; }
  echo "$(($(wc -l < "$WORK/telemetry.csv") - 1)) samples; the first lines and the busiest:"
  head -3 "$WORK/telemetry.csv"
  echo "..."
  tail -n +2 "$WORK/telemetry.csv" | sort -t, -k5 -g -r | head -5
  awk -F', ' 'NR > 1 { u = $5 + 0; m = $7 + 0; p = $9 + 0; if (u > mu) mu = u; if (m > mm) mm = m; if (p > mp) mp = p }
    END { printf "peak: utilization.gpu %d %%, memory.used %d MiB, power.draw %.1f W\n", mu, mm, mp }' "$WORK/telemetry.csv"
}
export -f telemetry
step "nvidia-smi samples during the jobs" 20 telemetry

accounting() {
  [ -s "$WORK/jobs" ] || { echo "no job was submitted"; return 1; }
  flexacct -j "$(paste -sd, "$WORK/jobs")" -o JobID,JobName%40,State,ExitCode,Elapsed,AllocTRES%40 || return 1
  flexacct -j "$(paste -sd, "$WORK/jobs")" -o JobID,TotalCPU,MaxRSS,ConsumedEnergy,TRESUsageInMax%60,GPUTelemetry || return 1
  flexreport users -S now-1hours -E now
}
export -f accounting
# A job's GPU summary is written at the first telemetry sample after its end.
sleep 3
step "flexacct of the jobs" 20 accounting

kill "$FLEXD" 2>/dev/null

echo "gpu-check: $FAILED step(s) failed; report: $REPORT" >&2
[ $FAILED -eq 0 ]
