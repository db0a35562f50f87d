#!/usr/bin/env bash
# The trainable harness editor on DBBench (issue 21), end to end at CPU scale, with its figures:
#   bundles   the frozen target's failures as evidence bundles (configs/editor_bundles_dbbench_smol.yaml)
#   sft       the engineer's cold start on validated offline-operator patches (configs/editor_sft_dbbench_smol.yaml)
#   train     GRPO for the engineer (configs/editor_train_dbbench_smol.yaml)
#   compare   offline operators vs SFT engineer vs GRPO engineer on held-out bundles
# Each command builds what it needs first and resumes (finished harness runs, checkpoints and
# updates are skipped), so running the script again continues. Outputs go to reports/editor-dbbench/*.txt.
#   bash reports/editor-dbbench/run.sh                 # every step, in this order
#   bash reports/editor-dbbench/run.sh compare         # only this one (it builds the rest when missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
HS=${HS:-.venv/bin/hs}
export HS_DATA_DIR=${HS_DATA_DIR:-../shared/data}
OUT=reports/editor-dbbench
(($#)) || set -- bundles sft train compare
log() { echo "[$(date -u +%H:%M:%S)] editor: $*"; }
for step in "$@"; do
  log "$step"
  start=$(date +%s)
  case $step in
    bundles) $HS editor bundles --config configs/editor_bundles_dbbench_smol.yaml ;;
    sft) $HS editor sft --config configs/editor_sft_dbbench_smol.yaml ;;
    train) $HS editor train --config configs/editor_train_dbbench_smol.yaml ;;
    compare) $HS editor compare --config configs/editor_train_dbbench_smol.yaml ;;
    *) echo "unknown step '$step'; steps: bundles sft train compare" >&2; exit 2 ;;
  esac 2>&1 | grep -v -e "Loading weights" -e "de-quantizing" -e "Finished in state Completed" -e "Writing model shards" | tee "$OUT/$step.txt"
  log "$step took $(($(date +%s) - start)) s" | tee -a "$OUT/$step.txt"
done
