#!/usr/bin/env bash
# The trainable harness editor on DBBench (issue 21), end to end at CPU scale, with its figures:
#   bundles   the frozen target's failures as evidence bundles (configs/editor_bundles_dbbench_smol.yaml)
#   sft       the engineer's cold start on validated offline-operator patches (configs/editor_sft_dbbench_smol.yaml)
#   train     GRPO for the engineer (configs/editor_train_dbbench_smol.yaml)
#   compare   offline operators vs SFT engineer vs GRPO engineer on held-out bundles
#   export    the four runs' rows (no turns) into rows.db.xz, which `hs report editor RUN --database-url
#             sqlite:///reports/editor-dbbench/rows.db` reads after `xz -dk reports/editor-dbbench/rows.db.xz`
# Each command builds what it needs first and resumes (finished harness runs, checkpoints and
# updates are skipped), so running the script again continues. Outputs go to reports/editor-dbbench/*.txt.
#   bash reports/editor-dbbench/run.sh                 # every step, in this order
#   bash reports/editor-dbbench/run.sh compare         # only this one (it builds the rest when missing)
#   SIZE=96 bash reports/editor-dbbench/run.sh         # the larger run: configs/editor_*_dbbench_96.yaml,
#                                                      # outputs in reports/editor-dbbench/96/
set -euo pipefail
cd "$(dirname "$0")/../.."
HS=${HS:-.venv/bin/hs}
export HS_DATA_DIR=${HS_DATA_DIR:-../shared/data}
export COLUMNS=${COLUMNS:-140}   # rich tables at a readable width in the .txt files
SIZE=${SIZE:-smol}                                   # smol: the first run; 96: the larger one
case $SIZE in
  smol) OUT=reports/editor-dbbench ;;
  96) OUT=reports/editor-dbbench/96 ;;
  *) echo "unknown SIZE '$SIZE'; sizes: smol 96" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
(($#)) || set -- bundles sft train compare export
log() { echo "[$(date -u +%H:%M:%S)] editor: $*"; }
for step in "$@"; do
  log "$step"
  start=$(date +%s)
  case $step in
    bundles) $HS editor bundles --config configs/editor_bundles_dbbench_$SIZE.yaml ;;
    sft) $HS editor sft --config configs/editor_sft_dbbench_$SIZE.yaml ;;
    train) $HS editor train --config configs/editor_train_dbbench_$SIZE.yaml ;;
    compare) $HS editor compare --config configs/editor_train_dbbench_$SIZE.yaml ;;
    export)
      $HS db copy --to "sqlite:///$OUT/rows.db" --no-turns --run editor-bundles-dbbench-$SIZE \
        --run engineer-sft-dbbench-$SIZE --run engineer-grpo-dbbench-$SIZE --run engineer-grpo-dbbench-$SIZE-compare
      sqlite3 "$OUT/rows.db" VACUUM && xz -9kf "$OUT/rows.db" ;;
    *) echo "unknown step '$step'; steps: bundles sft train compare export" >&2; exit 2 ;;
  esac 2>&1 | grep --line-buffered -v -e "Loading weights" -e "de-quantizing" -e "Finished in state" \
    -e "Writing model shards" -e "wandb:" -e "Converting" | tee "$OUT/$step.txt"
  log "$step took $(($(date +%s) - start)) s" | tee -a "$OUT/$step.txt"
done
