#!/usr/bin/env bash
# One call on a GPU machine: configure, build, run the GPU tests and the benchmarks, and leave logs and
# results JSON under $OUT (at most 8 files come back from the device tool, so extras go in one tarball).
#   STEPS="build test bench"      what to do (default all three)
#   BENCH="micro/;suite:smoke"    one roofbench run per ';'-separated --benchmark_filter (suite:NAME: --suite NAME)
#   BENCH_TIMEOUT=240             seconds each roofbench run may take
#   STEPS may also hold "fidelity": PyTorch times the same bf16 GEMM and copy (scripts/fidelity_torch.py)
#   and "profile": Nsight Compute's per-kernel summary of each ';'-separated filter in PROFILE
#   (PROFILE_SKIP kernels skipped first, then PROFILE_COUNT profiled)
#   BENCH_ARGS="--max-time 2"     extra arguments for every roofbench run
#   CTEST_ARGS="-L gpu"           which tests (default: the gpu label)
set -uo pipefail
OUT="${OUT:-$PWD/gpu-out}"
STEPS="${STEPS:-build test bench}"
BENCH="${BENCH:-micro/}"
BENCH_ARGS="${BENCH_ARGS:-}"
CTEST_ARGS="${CTEST_ARGS:--L gpu}"
build="${BUILD_DIR:-/tmp/roofbench-build}"
mkdir -p "$OUT" "$OUT/extra"
export NCCL_NVLS_ENABLE=0 ROOFBENCH_CACHE_DIR="$OUT/extra/cache"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/session.log"; }

log "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>&1)"
if [[ " $STEPS " == *" build "* ]]; then
  log "configure + build"
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DROOFBENCH_WERROR=ON &&
    cmake --build "$build" -j "$(nproc)" -- -k 0; } > "$OUT/build.log" 2>&1
  rc=$?; log "build rc=$rc"
  grep -E "roofbench: |error" "$OUT/build.log" | head -40 | tee -a "$OUT/session.log"
  [ -x "$build/bin/roofbench" ] || { tail -60 "$OUT/build.log"; exit 1; }  # keep going past a broken plugin
fi
if [[ " $STEPS " == *" test "* ]]; then
  log "ctest $CTEST_ARGS"
  (cd "$build" && ctest $CTEST_ARGS --output-on-failure -j 4 --timeout 600) > "$OUT/ctest.log" 2>&1
  log "ctest rc=$?"; tail -25 "$OUT/ctest.log" | tee -a "$OUT/session.log"
fi
if [[ " $STEPS " == *" bench "* ]]; then
  IFS=';' read -ra filters <<< "$BENCH"
  i=0
  for f in "${filters[@]}"; do
    i=$((i + 1))
    if [[ "$f" == suite:* ]]; then select=(--suite "${f#suite:}"); else select=(--benchmark_filter="$f"); fi
    log "roofbench ${select[*]} $BENCH_ARGS"
    timeout "${BENCH_TIMEOUT:-240}" "$build/bin/roofbench" "${select[@]}" --results-dir "$OUT/extra/results$i" \
      --benchmark_out="$OUT/extra/gbench$i.json" --benchmark_out_format=json $BENCH_ARGS > "$OUT/bench$i.log" 2>&1
    log "roofbench rc=$?"
    cp "$OUT/extra/results$i/latest.json" "$OUT/results$i.json" 2>/dev/null
    grep -E "roofbench:|ERROR" "$OUT/bench$i.log" | head -30 | tee -a "$OUT/session.log"
  done
  python3 reports/roofbench-report "$OUT"/results*.json -o "$OUT/extra/report" >> "$OUT/session.log" 2>&1
fi
if [[ " $STEPS " == *" fidelity "* ]]; then
  log "fidelity: PyTorch events on the same operations"
  timeout 120 python3 scripts/fidelity_torch.py > "$OUT/extra/torch.json" 2>> "$OUT/session.log"
  cat "$OUT/extra/torch.json" | tee -a "$OUT/session.log"
fi
if [[ " $STEPS " == *" profile "* ]]; then
  IFS=';' read -ra targets <<< "${PROFILE:-}"
  j=0
  for f in "${targets[@]}"; do
    j=$((j + 1))
    log "ncu per-kernel summary of $f"
    timeout 240 ncu --clock-control none ${NCU_ARGS:-} --launch-skip "${PROFILE_SKIP:-2000}" --launch-count "${PROFILE_COUNT:-300}" \
      --print-summary per-kernel "$build/bin/roofbench" --benchmark_filter="$f" --gate off --max-time 1 --no-results \
      > "$OUT/extra/ncu$j.txt" 2>&1
    log "ncu rc=$?"
  done
fi
log "nvidia-smi after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,memory.used --format=csv,noheader 2>&1)"
tar -czf "$OUT/extra.tgz" -C "$OUT" extra && rm -rf "$OUT/extra"
