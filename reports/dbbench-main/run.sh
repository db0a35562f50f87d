#!/usr/bin/env bash
# Reproduces reports/dbbench-main: the evidence-scale comparison of issue 18 on DBBench, then the
# report and the export of the rows it reads. Every step is resumable: a finished training update,
# evaluation group or pipeline phase is skipped, so running this script again continues where it
# stopped (a session that ends mid-run loses at most the update or group in flight).
#   bash reports/dbbench-main/run.sh              # everything still missing, in this order
#   bash reports/dbbench-main/run.sh report       # only the report and the export, from what has finished
#   bash reports/dbbench-main/run.sh grpo random  # only these steps (still skipping finished ones)
# The committed export (rows.db.xz) is the record that accumulates across machines and sessions:
# a method whose run is already in it is skipped, and the report step merges every run finished in
# the working database (.hs/hs.db, or $HS_DATABASE_URL) into it before writing the report from it.
# Order: the method first, then the baselines, so the headline comparison (harness_s vs grpo on
# the test split) is available earliest.
set -euo pipefail
cd "$(dirname "$0")/../.."
HS=${HS:-.venv/bin/hs}
export HS_DATA_DIR=${HS_DATA_DIR:-../shared/data}
OUT=reports/dbbench-main
EXPORT=$OUT/rows.db
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
source reports/common.sh   # require_fast_bf16
# Each hs command runs in the background while the script waits for it, so a TERM or INT (timeout,
# kill, Ctrl-C) reaches the script at once and is passed on: the step in flight stops too (it answers
# after the torch operation in flight) instead of running on, orphaned.
child=
trap '[[ -n $child ]] && kill -TERM "$child" 2>/dev/null; wait; exit 143' TERM INT
hs() { "$HS" "$@" & child=$!; wait "$child"; }

BASELINES=(frozen_evolution harness_bandit harnessx whale harness_forge harnessx_coupled)   # issue 22
SEED_STEPS=(harness_s:1 grpo:1 harness_s:2 grpo:2)   # issue 52: training seeds 1 and 2 of the method and GRPO
STEPS=(harness_s grpo h0_rescue fixed_mixture random fixed_profiles pool "${BASELINES[@]}" "${SEED_STEPS[@]}")
declare -A RUN_NAME=([harness_s]=main-harness-s [grpo]=main-grpo [h0_rescue]=main-h0-rescue
  [fixed_mixture]=main-fixed-mixture [random]=main-random [fixed_profiles]=main-fixed-profiles
  [frozen_evolution]=main-frozen-evolution [harness_bandit]=main-harness-bandit [harnessx]=main-harnessx
  [whale]=main-whale [harness_forge]=main-harness-forge [harnessx_coupled]=main-harnessx-coupled)
for step in "${SEED_STEPS[@]}"; do RUN_NAME[$step]=${RUN_NAME[${step%%:*}]}-seed${step##*:}; done

[[ -f $EXPORT.xz && ! -f $EXPORT ]] && xz -dk "$EXPORT.xz"   # rows.db: the uncompressed export, not committed
exported() { [[ -f $EXPORT ]] && [[ -n "$(sqlite3 "$EXPORT" "SELECT id FROM runs WHERE name = '$1' AND status = 'completed'")" ]]; }

run_step() {
  local step=$1 name=${RUN_NAME[$1]:-}
  if [[ -n $name ]] && exported "$name"; then log "$step: $name is in the export, skipped"; return; fi
  [[ $step == pool ]] || require_fast_bf16 "$step"
  case $step in
    harness_s | grpo | h0_rescue | fixed_mixture)                  # RQ1/RQ2 (+ RQ4-RQ6 for harness_s)
      log "pipeline $step"; hs run configs/main/$step.yaml ;;
    random | fixed_profiles)                                       # RQ3: router ablations (training only)
      log "router $step"
      hs train --config configs/main/train_dbbench.yaml --set router.kind=$step --set name=$name ;;
    pool) pool_reports ;;                                          # phenomena on real evidence
    frozen_evolution | harness_bandit | harnessx | whale | harness_forge | harnessx_coupled)   # the paper's table
      log "baseline $step"; hs run configs/baselines/$step.yaml ;;
    harness_s:[0-9]* | grpo:[0-9]*)                               # another training seed (issue 52)
      log "pipeline ${step%%:*}, training seed ${step##*:}"
      hs run configs/main/${step%%:*}.yaml --set name=$name --set train.name=$name-train --set train.seed=${step##*:} ;;
    *) echo "unknown step '$step'; steps: ${STEPS[*]} report" >&2; exit 2 ;;
  esac
}

# Phenomena on 60 training tasks: pool v1 (H0 + 4 evolved siblings, k = 2; H0 8 rollouts per task)
# under the warm start and under the trained checkpoints at updates 10 and 20 of every run whose
# checkpoints are in this machine's registry (non-stationarity: how each sibling's edge moves).
POOL_RUNS=(pool-warm)
for run in harness-s grpo; do for u in 10 20; do POOL_RUNS+=(pool-$run-u$u); done; done
pool_reports() {
  local args=(v1 --n-tasks 60 --k 2 --set report_dir=$OUT --set concurrency=2) name checkpoint   # 4 in flight: OOM at 24 GB
  exported pool-warm && log "pool-warm is in the export, skipped" \
    || { log "pool report v1 on 60 tasks: warm start"; hs pool report "${args[@]}" --warm-start configs/sft_dbbench_smol.yaml --set name=pool-warm; }
  for name in "${POOL_RUNS[@]:1}"; do
    if exported "$name"; then log "$name is in the export, skipped"; continue; fi
    run=${name#pool-}; run=${run%-u*}; u=${name##*-u}
    checkpoint=$(sqlite3 .hs/hs.db "SELECT c.id FROM checkpoints c JOIN runs r ON r.id = c.run_id WHERE r.name = 'main-$run-train' AND c.step = $u" 2>/dev/null || true)
    if [[ -z $checkpoint ]]; then log "$name: no checkpoint of main-$run-train at update $u here, skipped"; continue; fi
    log "pool report v1 on 60 tasks: $checkpoint"; hs pool report "${args[@]}" --model "$checkpoint" --set name=$name
  done
}

if [[ $# -eq 0 ]]; then set -- "${STEPS[@]}" report; fi
for step in "$@"; do
  [[ $step == report ]] && continue
  run_step "$step"
done

log "export: runs finished here, merged into $EXPORT"                # the rows the report reads, no turns
WORK=${HS_DATABASE_URL:-sqlite:///.hs/hs.db}
finished=()
if [[ $WORK == sqlite:///* && -f ${WORK#sqlite:///} ]]; then
  for name in "${RUN_NAME[@]}" "${POOL_RUNS[@]}"; do
    [[ -n "$(sqlite3 "${WORK#sqlite:///}" "SELECT id FROM runs WHERE name = '$name' AND status = 'completed'")" ]] \
      && finished+=(--run "$name")
  done
fi
if ((${#finished[@]})); then hs db copy --from "$WORK" --to "sqlite:///$EXPORT" --no-turns "${finished[@]}"; fi

log "report"
baselines=()
for step in grpo h0_rescue fixed_mixture random fixed_profiles "${BASELINES[@]}" "${SEED_STEPS[@]}"; do
  exported "${RUN_NAME[$step]}" && baselines+=(--baseline "${RUN_NAME[$step]}")
done
for name in "${POOL_RUNS[@]}"; do exported "$name" && baselines+=(--pool-report "$name"); done
hs report --run main-harness-s "${baselines[@]}" --database-url "sqlite:///$EXPORT" --out $OUT
cp "$EXPORT" "$EXPORT.tmp" && sqlite3 "$EXPORT.tmp" VACUUM && xz -9f "$EXPORT.tmp" && mv "$EXPORT.tmp.xz" "$EXPORT.xz"
# Re-run the report from the export alone (what tests/analysis/test_committed_report.py checks):
#   xz -dk reports/dbbench-main/rows.db.xz && hs report --run main-harness-s --baseline main-grpo ... \
#     --database-url sqlite:///reports/dbbench-main/rows.db --out reports/dbbench-main
