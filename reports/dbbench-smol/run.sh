#!/usr/bin/env bash
# Reproduces reports/dbbench-smol: every method and router variant of the CPU comparison, then the
# report. Each run is resumable and skipped when already finished, so re-running this script only
# does what is missing. About 90 minutes on 2 cores, plus the warm start (about 11) when missing.
#   bash reports/dbbench-smol/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAIN=configs/compare/train_dbbench_smol.yaml
for method in grpo h0_rescue fixed_mixture harness_s; do  # RQ1/RQ2 baselines, then the method itself
  hs run configs/compare/$method.yaml
done
for kind in random fixed_profiles rules; do           # RQ3: the other router variants (training only)
  hs train --config "$TRAIN" --set router.kind=$kind --set name=compare-${kind//_/-}
done
hs report --run compare-harness-s --baseline compare-grpo --baseline compare-h0-rescue \
  --baseline compare-fixed-mixture --baseline compare-random --baseline compare-rules \
  --baseline compare-fixed-profiles --out reports/dbbench-smol
