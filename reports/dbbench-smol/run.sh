#!/usr/bin/env bash
# Reproduces reports/dbbench-smol: the methods and router variants of the CPU comparison, then the
# report. Each run is resumable and skipped when already finished, so re-running this script only
# does what is missing. About 110 minutes on 2 cores, plus the warm start (about 11) when missing:
# a training run takes 8-15 minutes and each evaluation (10 dev tasks, k = 3, 2 seeds) about 5.
#   bash reports/dbbench-smol/run.sh
# Not in the committed report for lack of time (same budget each): the fixed-mixture baseline
# (hs run configs/compare/fixed_mixture.yaml) and the rules router (hs train --config
# configs/compare/train_dbbench_smol.yaml --set router.kind=rules --set name=compare-rules); add
# them to the report with --baseline compare-fixed-mixture --baseline compare-rules.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAIN=configs/compare/train_dbbench_smol.yaml
for method in grpo h0_rescue harness_s; do            # RQ1/RQ2 baselines, then the method itself
  hs run configs/compare/$method.yaml
done
for kind in fixed_profiles random; do                 # RQ3: the re-anchoring ablation, random top-K
  hs train --config "$TRAIN" --set router.kind=$kind --set name=compare-${kind//_/-}
done
hs report --run compare-harness-s --baseline compare-grpo --baseline compare-h0-rescue \
  --baseline compare-fixed-profiles --baseline compare-random --out reports/dbbench-smol
