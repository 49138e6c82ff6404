#!/usr/bin/env bash
# One run on a GPU machine: configure, build, run the GPU tests and the benchmarks, and leave logs and
# results JSON under $OUT (a remote runner may return only a few files, so extras go in one tarball, extra.tgz).
#   STEPS="build test bench"      what to do (default all three)
#   ROOFBENCH_COMMIT=<commit>     the commit the results name, where the machine's copy of the tree has git
#                                 metadata that is not the tree's own (cmake/RoofbenchCommit.cmake)
#   BENCH="micro/;suite:smoke"    one roofbench run per ';'-separated --benchmark_filter (suite:NAME: --suite NAME);
#                                 words before the filter are environment settings for that run, or, when
#                                 they start with --, roofbench flags, a value joined by =: "ROOFBENCH_GPT_WGRAD=v1 --graph=off gpt/R1_fused/"
#   (runs 1 and 2 come back as bench1.log/results1.json and bench2.log/results2.json; every run is in extra.tgz)
#   BENCH_TIMEOUT=240             seconds each roofbench run may take
#   STEPS may also hold "fidelity": PyTorch times the same bf16 GEMM and copy (scripts/fidelity_torch.py)
#   and "profile": Nsight Compute's per-kernel summary of each ';'-separated filter in PROFILE
#   (PROFILE_SKIP kernels skipped first, then PROFILE_COUNT profiled)
#   BENCH_ARGS="--max-time 2"     extra arguments for every roofbench run
#   CUDNN_ROOT=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn   build and run conv and transformer
#                                 against that cuDNN (include/, lib/) instead of the system's (-DROOFBENCH_CUDNN_ROOT)
#   CTEST_ARGS="-L gpu"           which tests (default: the gpu label); CTEST_TIMEOUT=600 seconds per test
#   STEPS may also hold "ladder": after the benches, scripts/torch_gpt_ladder.py on the same machine, PyTorch's ladder
#                                 on this GPU (trained LADDER_TRAINED_STEPS=300 steps first, as roofbench's gated
#                                 rungs are; LADDER_RUNGS, the strongest first by default; no rung starts after
#                                 LADDER_DEADLINE_S=260 s: the build, the gpt suite and a 200 s ladder took 491 s of a
#                                 600 s run on the H200; about 30 s more should reach the last rung;
#                                 its ceilings from results1.json), then the report over every results file and PyTorch's
#   STEPS may also hold "ab": BASE_TREE (the base commit's sources; BASE_COMMIT names it) is built beside this
#                                 tree with the same settings, and scripts/ab_runs.sh runs both on AB_SELECT
#                                 (';'-separated, AB_ROUNDS=3 rounds, BENCH_ARGS, AB_COMPARE_ARGS) and judges them;
#                                 the compare-*.md files come back
#   STEPS may also hold "timing": scripts/like_for_like.py, the micro add kernels (vec16, scalar; 1M, 4M, 16M), copy
#   16M, the GEMV at one token, a split-KV decode and a cuDNN convolution timed by roofbench's graph mode hot and cold
#   (events and --kernel-time), triton's do_bench and do_bench_cudagraph and torch.profiler's CUPTI records
#   (TORCH_PYTHON=/opt/torch/.venv/bin/python); the table comes back as like_for_like.md
#   STEPS may also hold "countersncu": roofbench --counters against Nsight Compute (ncu --clock-control none) on
#   the same kernels of eleven benchmarks and three near the L2's size, DRAM bytes and FLOPs side by side with the
#   % difference, in session.log (scripts/counters_vs_ncu.py; COUNTERS_NCU_ONLY=<regex> runs fewer; about 250 s
#   on an H200; REPEAT=3 counts both sides in three processes each and prints every process's DRAM writes)
#   STEPS may also hold "countersprobe": kernels of known traffic counted by the counters pass and by ncu, after the
#   same clean (--cache-control none) and after ncu's own flush (all), the copy again with its buffers moved a few
#   MiB at a time, and what each way of cleaning the L2 leaves, in session.log (tests/gpu/counters_probe.cu,
#   tests/gpu/l2_clean_probe.cu)
set -uo pipefail
OUT="${OUT:-$PWD/gpu-out}"
STEPS="${STEPS:-build test bench}"
BENCH="${BENCH:-micro/}"
BENCH_ARGS="${BENCH_ARGS:-}"
CTEST_ARGS="${CTEST_ARGS:--L gpu}"
build="${BUILD_DIR:-/tmp/roofbench-build}"
mkdir -p "$OUT" "$OUT/extra"
export NCCL_NVLS_ENABLE=0 ROOFBENCH_CACHE_DIR="$OUT/extra/cache"
cudnn_option=()
if [ -n "${CUDNN_ROOT:-}" ]; then
  cudnn_option=(-DROOFBENCH_CUDNN_ROOT="$CUDNN_ROOT")
  # The plugins' RUNPATH finds $CUDNN_ROOT/lib/libcudnn.so.9, whose own RUNPATH ($ORIGIN) finds its
  # sub-libraries; an LD_LIBRARY_PATH inherited from the machine would win over both, so it is led by that folder.
  for d in "$CUDNN_ROOT/lib" "$CUDNN_ROOT/lib64"; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
fi
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/session.log"; }
# The report needs matplotlib and plotly: the first python3 that has both (a venv first on PATH may not).
report_python=python3
for py in python3 /usr/bin/python3; do
  if "$py" -c "import matplotlib, plotly" 2>/dev/null; then report_python="$py"; break; fi
done

log "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>&1)"
if [[ " $STEPS " == *" build "* ]]; then
  log "configure + build"
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DROOFBENCH_WERROR=ON "${cudnn_option[@]}" &&
    cmake --build "$build" -j "$(nproc)" -- -k 0; } > "$OUT/build.log" 2>&1
  rc=$?; log "build rc=$rc"
  grep -E "roofbench: |error" "$OUT/build.log" | head -40 | tee -a "$OUT/session.log"
  [ -x "$build/bin/roofbench" ] || { tail -60 "$OUT/build.log"; exit 1; }  # keep going past a broken plugin
fi
if [[ " $STEPS " == *" test "* ]]; then
  log "ctest $CTEST_ARGS"
  (cd "$build" && ctest $CTEST_ARGS --output-on-failure -j 4 --timeout "${CTEST_TIMEOUT:-600}") > "$OUT/ctest.log" 2>&1
  log "ctest rc=$?"; tail -25 "$OUT/ctest.log" | tee -a "$OUT/session.log"
fi
if [[ " $STEPS " == *" bench "* ]]; then
  IFS=';' read -ra filters <<< "$BENCH"
  i=0
  for item in "${filters[@]}"; do
    i=$((i + 1))
    read -ra words <<< "$item"
    f="${words[-1]}"
    settings=() flags=()
    for w in "${words[@]:0:${#words[@]}-1}"; do
      if [[ "$w" == --* ]]; then flags+=("$w"); elif [[ "$w" == *=* ]]; then settings+=("$w");
      else log "BENCH run $i: '$w' is neither NAME=value nor a --flag (a flag's value joins it by =)"; continue 2; fi
    done
    if [[ "$f" == suite:* ]]; then select=(--suite "${f#suite:}"); else select=(--benchmark_filter="$f"); fi
    log "${settings[*]} roofbench ${select[*]} ${flags[*]} $BENCH_ARGS"
    started=$SECONDS
    env "${settings[@]}" timeout "${BENCH_TIMEOUT:-240}" "$build/bin/roofbench" "${select[@]}" "${flags[@]}" \
      --results-dir "$OUT/extra/results$i" --benchmark_out="$OUT/extra/gbench$i.json" --benchmark_out_format=json \
      $BENCH_ARGS > "$OUT/extra/bench$i.log" 2>&1
    log "roofbench rc=$? in $((SECONDS - started)) s"
    cp "$OUT/extra/results$i/latest.json" "$OUT/extra/results$i.json" 2>/dev/null
    if [ "$i" -le 2 ]; then cp "$OUT/extra/bench$i.log" "$OUT/extra/results$i.json" "$OUT/" 2>/dev/null; fi
    grep -E "roofbench:|ERROR|FAIL \(|no GPU used:|^summary:|^  (not run|sweep|results):" "$OUT/extra/bench$i.log" | head -30 | tee -a "$OUT/session.log"
    python3 scripts/run_phases.py "$OUT/extra/results$i.json" 2>&1 | tee -a "$OUT/session.log"
  done
  # With the ladder, the report waits for PyTorch's file.
  [[ " $STEPS " == *" ladder "* ]] ||
    "$report_python" reports/roofbench-report "$OUT"/extra/results*.json -o "$OUT/extra/report" >> "$OUT/session.log" 2>&1
fi
if [[ " $STEPS " == *" ladder "* ]]; then
  rungs="${LADDER_RUNGS:-R3_batch_reduce_overhead,R4_checkpoint,R3_batch,R1_compile_reduce_overhead,R2_bf16_reduce_overhead,R0_eager,fp32_control,R1_compile,R2_bf16}"
  ceilings=()
  [ -f "$OUT/extra/results1.json" ] && ceilings=(--ceilings-from "$OUT/extra/results1.json")
  log "PyTorch's ladder: $rungs"
  started=$SECONDS
  timeout "${LADDER_TIMEOUT:-420}" python3 scripts/torch_gpt_ladder.py "${ceilings[@]}" \
    --trained-steps "${LADDER_TRAINED_STEPS:-300}" --deadline-s "${LADDER_DEADLINE_S:-260}" --rungs "$rungs" \
    -o "$OUT/extra/torch_ladder.json" \
    > "$OUT/extra/torch_ladder.log" 2>&1
  log "torch_gpt_ladder rc=$? in $((SECONDS - started)) s"
  grep -E "tokens/s" "$OUT/extra/torch_ladder.log" | tee -a "$OUT/session.log"
  cp "$OUT/extra/torch_ladder.json" "$OUT/" 2>/dev/null
  "$report_python" reports/roofbench-report "$OUT"/extra/results*.json "$OUT/extra/torch_ladder.json" -o "$OUT/extra/report" \
    >> "$OUT/session.log" 2>&1
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
if [[ " $STEPS " == *" ab "* ]]; then
  log "configure + build the base, $BASE_TREE"
  { ROOFBENCH_COMMIT="${BASE_COMMIT:-}" cmake -S "$BASE_TREE" -B "$build-base" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DROOFBENCH_WERROR=ON "${cudnn_option[@]}" &&
    ROOFBENCH_COMMIT="${BASE_COMMIT:-}" cmake --build "$build-base" -j "$(nproc)" -- -k 0; } > "$OUT/extra/build-base.log" 2>&1
  log "base build rc=$?"
  log "interleaved base and new runs: ${AB_SELECT:-}"
  OUT="$OUT/extra/ab" SELECT="${AB_SELECT:-suite:micro}" ROUNDS="${AB_ROUNDS:-3}" RUN_ARGS="$BENCH_ARGS" \
    RUN_TIMEOUT="${BENCH_TIMEOUT:-240}" COMPARE_ARGS="${AB_COMPARE_ARGS:-}" \
    scripts/ab_runs.sh "$build-base/bin/roofbench" "$build/bin/roofbench" 2>&1 | tee -a "$OUT/session.log"
  cp "$OUT"/extra/ab/compare-*.md "$OUT/" 2>/dev/null
fi
if [[ " $STEPS " == *" timing "* ]]; then
  log "like for like: the same kernels under every timer"
  cmake --build "$build" --target roofbench_add_shim roofbench_transformer_shim >> "$OUT/build.log" 2>&1
  timeout 400 "${TORCH_PYTHON:-/opt/torch/.venv/bin/python}" scripts/like_for_like.py --roofbench "$build/bin/roofbench" \
    --shim "$build/lib/libroofbench_add_shim.so" --transformer-shim "$build/lib/libroofbench_transformer_shim.so" \
    --out "$OUT" > "$OUT/extra/like_for_like.log" 2>&1
  log "like_for_like rc=$?"
  cat "$OUT/like_for_like.md" 2>/dev/null | tee -a "$OUT/session.log" || tail -20 "$OUT/extra/like_for_like.log"
fi
if [[ " $STEPS " == *" countersncu "* ]]; then
  log "roofbench --counters against Nsight Compute"
  timeout "${COUNTERS_NCU_TIMEOUT:-400}" python3 scripts/counters_vs_ncu.py "$build/bin/roofbench" "$OUT/extra/countersncu" \
    ${COUNTERS_NCU_ONLY:-} 2>&1 | tee -a "$OUT/session.log"
fi
if [[ " $STEPS " == *" countersprobe "* ]]; then
  log "the counters pass against ncu on kernels of known traffic"
  timeout 120 "$build/bin/roofbench_counters_probe" count 2>&1 | tee -a "$OUT/session.log"
  probe_ncu() {  # the cache control, then ncu's other arguments and the probe's command line
    local cache=$1; shift
    timeout 120 ncu --clock-control none --cache-control "$cache" -k regex:'(probe|target)_' \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv --print-units base "$@" 2>&1 |
      grep -E '^"|^==(ERROR|WARNING)==|^clean |moves read' | tee -a "$OUT/session.log"
  }
  for cache in none all; do
    log "ncu --cache-control $cache: roofbench_counters_probe launch (its 4 warm-up launches skipped)"
    probe_ncu "$cache" --launch-skip 4 "$build/bin/roofbench_counters_probe" launch
    log "ncu --cache-control $cache: roofbench_l2_clean_probe"
    probe_ncu "$cache" "$build/bin/roofbench_l2_clean_probe"
  done
fi
log "nvidia-smi after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,memory.used --format=csv,noheader 2>&1)"
tar -czf "$OUT/extra${EXTRA_SUFFIX:-}.tgz" -C "$OUT" extra && rm -rf "$OUT/extra"  # EXTRA_SUFFIX: one tarball per invocation
