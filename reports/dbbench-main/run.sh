#!/usr/bin/env bash
# Reproduces reports/dbbench-main: the evidence-scale comparison of issue 18 on DBBench, then the
# report and the export of the rows it reads. Every step is resumable: a finished training update,
# evaluation group or pipeline phase is skipped, so running this script again continues where it
# stopped (a session that ends mid-run loses at most the update or group in flight).
#   bash reports/dbbench-main/run.sh            # everything still missing, in this order
#   bash reports/dbbench-main/run.sh report     # only the report and the export, from what has finished
# Order: the method first, then the baselines, so the headline comparison (harness_s vs grpo on
# the test split) is available earliest.
set -euo pipefail
cd "$(dirname "$0")/../.."
HS=${HS:-.venv/bin/hs}
export HS_DATA_DIR=${HS_DATA_DIR:-../shared/data}
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

if [[ "${1:-}" != "report" ]]; then
  for method in harness_s grpo h0_rescue fixed_mixture; do        # RQ1/RQ2 (+ RQ4-RQ6 for harness_s)
    log "pipeline $method"; $HS run configs/main/$method.yaml
  done
  for router in random fixed_profiles; do                          # RQ3: router ablations (training only)
    log "router $router"
    $HS train --config configs/main/train_dbbench.yaml --set router.kind=$router --set name=main-$router
  done
  log "pool report v1 on 60 training tasks"                        # phenomena on real evidence
  $HS pool report v1 --warm-start configs/sft_dbbench_smol.yaml --n-tasks 60 --k 2 \
    --set report_dir=reports/dbbench-main
fi
log "report"
$HS report --run main-harness-s --baseline main-grpo --baseline main-h0-rescue --baseline main-fixed-mixture \
  --baseline main-random --baseline main-fixed-profiles --out reports/dbbench-main
log "export"                                                       # the rows the report reads, no turns
rm -f reports/dbbench-main/rows.db reports/dbbench-main/rows.db.xz
$HS db copy --to sqlite:///reports/dbbench-main/rows.db --no-turns --run main-harness-s --run main-grpo \
  --run main-h0-rescue --run main-fixed-mixture --run main-random --run main-fixed-profiles
sqlite3 reports/dbbench-main/rows.db VACUUM && xz -9 reports/dbbench-main/rows.db   # rows.db.xz, committed
# Re-run the report from the export alone:
#   xz -dk reports/dbbench-main/rows.db.xz && hs report --run main-harness-s ... --database-url sqlite:///reports/dbbench-main/rows.db
