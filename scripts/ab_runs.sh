#!/usr/bin/env bash
# Did a change alter what roofbench measures? Runs two roofbench executables (a base build and a new
# one) on this machine, interleaved round by round, over the same selections, then judges every
# selection with reports/roofbench-compare (docs/compare.md: independent runs, at least 3 a side).
#   scripts/ab_runs.sh BASE_ROOFBENCH NEW_ROOFBENCH
#   SELECT="suite:micro;suite:transformer"  ';'-separated selections (suite:NAME, or a --benchmark_filter)
#   ROUNDS=3                              runs of each side per selection; odd rounds run the base first
#   RUN_ARGS="--max-time 0.2"             extra arguments for every run
#   RUN_TIMEOUT=300                       seconds one run may take
#   COMPARE_ARGS="--allow-removed"        extra arguments for roofbench-compare
#   OUT=ab-out                            results/<selection>/<side><round>/ and compare-<selection>.md
# Exit status: the highest of roofbench-compare's (0 no regression, 1 a regression, 2 bad input, 3 cannot judge).
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BASE_ROOFBENCH NEW_ROOFBENCH" >&2; exit 2; }
declare -A exe=([base]="$1" [new]="$2")
for side in base new; do
  [ -x "${exe[$side]}" ] || { echo "$0: ${exe[$side]}: not an executable" >&2; exit 2; }
done
OUT="${OUT:-ab-out}"
ROUNDS="${ROUNDS:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
worst=0

run_side() {  # side round selection folder
  local select=(--benchmark_filter="$3")
  [[ "$3" == suite:* ]] && select=(--suite "${3#suite:}")
  timeout "${RUN_TIMEOUT:-300}" "${exe[$1]}" "${select[@]}" ${RUN_ARGS:-} --results-dir "$4/$1$2" \
    > "$4/$1$2.log" 2>&1
  echo "$3 $1 round $2: exit $? ($(grep -E '^summary:' "$4/$1$2.log" | head -1))"
}

IFS=';' read -ra selections <<< "${SELECT:-suite:micro}"
for selection in "${selections[@]}"; do
  folder="$OUT/results/$(echo "$selection" | tr -c 'A-Za-z0-9_.-' '_')"
  mkdir -p "$folder"
  for round in $(seq "$ROUNDS"); do
    order=(base new)
    [ $((round % 2)) -eq 0 ] && order=(new base)
    for side in "${order[@]}"; do run_side "$side" "$round" "$selection" "$folder"; done
  done
  extra=()
  for round in $(seq 2 "$ROUNDS"); do
    extra+=(--base "$folder/base$round/latest.json" --new "$folder/new$round/latest.json")
  done
  report="$OUT/compare-$(basename "$folder").md"
  "$here/../reports/roofbench-compare" "$folder/base1/latest.json" "$folder/new1/latest.json" "${extra[@]}" \
    ${COMPARE_ARGS:-} > "$report"
  status=$?
  echo "$selection: roofbench-compare exit $status ($report)"
  [ "$status" -gt "$worst" ] && worst=$status
done
exit "$worst"
