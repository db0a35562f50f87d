#!/usr/bin/env bash
# Reproduces reports/dbbench-smol: the methods and the re-anchoring ablation of the CPU comparison,
# then the report. Each run is resumable and skipped when already finished, so re-running this
# script only does what is missing. About 85 minutes on 2 cores, plus the warm start (about 11)
# when missing: a training run takes 8-15 minutes and each evaluation (10 dev tasks, k = 3,
# 2 seeds) about 5.
#   bash reports/dbbench-smol/run.sh
# Not in the committed report for lack of time (about 15 minutes each): the fixed-mixture
# baseline (hs run configs/compare/fixed_mixture.yaml) and the random and rules routers
# (hs train --config configs/compare/train_dbbench_smol.yaml --set router.kind=random
#  --set name=compare-random, likewise rules); add them with --baseline compare-fixed-mixture
# --baseline compare-random --baseline compare-rules. The four routers at a larger budget are
# in the README (configs/router_dbbench_smol.yaml).
set -euo pipefail
cd "$(dirname "$0")/../.."
for method in grpo h0_rescue harness_s; do            # RQ1/RQ2 baselines, then the method itself
  hs run configs/compare/$method.yaml
done
# RQ3: the re-anchoring ablation (profiles of update 0, never re-anchored)
hs train --config configs/compare/train_dbbench_smol.yaml --set router.kind=fixed_profiles \
  --set name=compare-fixed-profiles
hs report --run compare-harness-s --baseline compare-grpo --baseline compare-h0-rescue \
  --baseline compare-fixed-profiles --out reports/dbbench-smol
