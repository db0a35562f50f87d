#!/usr/bin/env bash
# Reproduces reports/dbbench-hard: the hard-task regime of issue 52, with training seeds as the unit
# of replication. Every step is resumable as in reports/dbbench-main/run.sh (a finished update,
# evaluation group or phase is skipped), and a run already in the committed export is skipped.
#   bash reports/dbbench-hard/run.sh                    # everything still missing, in this order
#   bash reports/dbbench-hard/run.sh dead_share         # the warm start's H0 dead share per training tier
#   bash reports/dbbench-hard/run.sh harness_s:1 report # one method at one seed, then the report
# Steps: dead_share, then METHOD:SEED for seeds 0, 1, 2 of harness_s and grpo (seed 0 of both
# first, so the first paired comparison is available earliest), then report.
# The committed export (rows.db.xz) accumulates runs from any machine; a session that ends
# mid-run loses that run's progress with its .hs (the export keeps only finished runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
HS=${HS:-.venv/bin/hs}
export HS_DATA_DIR=${HS_DATA_DIR:-../shared/data}
OUT=reports/dbbench-hard
EXPORT=$OUT/rows.db
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
source reports/common.sh   # require_fast_bf16
child=
trap '[[ -n $child ]] && kill -TERM "$child" 2>/dev/null; wait; exit 143' TERM INT
hs() { "$HS" "$@" & child=$!; wait "$child"; }

SEEDS=(0 1 2)
STEPS=(dead_share)
for seed in "${SEEDS[@]}"; do STEPS+=("harness_s:$seed" "grpo:$seed"); done
declare -A PREFIX=([harness_s]=hard-harness-s [grpo]=hard-grpo)

[[ -f $EXPORT.xz && ! -f $EXPORT ]] && xz -dk "$EXPORT.xz"
exported() { [[ -f $EXPORT ]] && [[ -n "$(sqlite3 "$EXPORT" "SELECT id FROM runs WHERE name = '$1' AND status = 'completed'")" ]]; }

# The warm start's H0 dead share (no success in K = 8) on 40 tasks of each training tier
# (every 3rd task of the tier, one seed): the regime trains on the tier where it is at least 60%.
dead_share() {
  for tier in easy medium hard; do
    log "dead share, tier $tier"
    hs eval --warm-start configs/sft_dbbench_smol.yaml --split train --tiers $tier --every 3 --limit 40 \
      --k 8 --seeds 1 --concurrency 16 --set name=hard-dead-share-$tier | tee "$OUT/dead_share_$tier.txt"
  done
}

run_step() {
  local step=$1 method=${1%%:*} seed=${1##*:}
  [[ $step == dead_share ]] && { dead_share; return; }
  [[ -n ${PREFIX[$method]:-} && $seed =~ ^[0-9]+$ ]] || { echo "unknown step '$step'; steps: ${STEPS[*]} report" >&2; exit 2; }
  local name=${PREFIX[$method]}-seed$seed
  if exported "$name"; then log "$step: $name is in the export, skipped"; return; fi
  require_fast_bf16 "$step"
  log "pipeline $method, training seed $seed"
  hs run configs/hard/$method.yaml --set name=$name --set train.name=$name-train --set train.seed=$seed
}

if [[ $# -eq 0 ]]; then set -- "${STEPS[@]}" report; fi
for step in "$@"; do
  [[ $step == report ]] && continue
  run_step "$step"
done

log "export: runs finished here, merged into $EXPORT"
WORK=${HS_DATABASE_URL:-sqlite:///.hs/hs.db}
finished=()
if [[ $WORK == sqlite:///* && -f ${WORK#sqlite:///} ]]; then
  for method in harness_s grpo; do for seed in "${SEEDS[@]}"; do
    name=${PREFIX[$method]}-seed$seed
    [[ -n "$(sqlite3 "${WORK#sqlite:///}" "SELECT id FROM runs WHERE name = '$name' AND status = 'completed'")" ]] \
      && finished+=(--run "$name")
  done; done
fi
if ((${#finished[@]})); then hs db copy --from "$WORK" --to "sqlite:///$EXPORT" --no-turns "${finished[@]}"; fi
[[ -f $EXPORT ]] || { log "no finished run yet: no report"; exit 0; }

log "report"
main= baselines=()
for method in harness_s grpo; do for seed in "${SEEDS[@]}"; do
  name=${PREFIX[$method]}-seed$seed
  exported "$name" || continue
  if [[ -z $main ]]; then main=$name; else baselines+=(--baseline "$name"); fi
done; done
[[ -n $main ]] || { log "no finished run in the export: no report"; exit 0; }
hs report --run "$main" "${baselines[@]}" --database-url "sqlite:///$EXPORT" --out $OUT
cp "$EXPORT" "$EXPORT.tmp" && sqlite3 "$EXPORT.tmp" VACUUM && xz -9f "$EXPORT.tmp" && mv "$EXPORT.tmp.xz" "$EXPORT.xz"
