#!/usr/bin/env bash
# The per-benchmark figures of the README's Benchmarks table (issues 19, 20), for textworld, bfcl or repair:
#   gold    ground truth replayed through the environment and verifier (dev split)
#   sft     the supervised warm start on ground-truth demonstrations (configs/sft_<b>_smol.yaml)
#   base    the base policy under H0 on a dev subsample (every 3rd task, k = 3, 1 seed): Pass@3 / Avg@3
#   warm    the warm start, same tasks and budget
#   dead    dead-group share on training tasks: the warm start, 8 of the training run's tasks (every 5th,
#           so every tier of a 4-tier cycle is drawn), K = 8 rollouts each under H0 (dead share = 1 - Pass@8)
# Episodes get the training config's round budget (env.max_rounds), so the figures describe the
# groups training sees.
#   train   a short `hs train --mode harness_s` (2 updates x 4 tasks, K = 8), then `hs report` on it
#   evolve  a one-round `hs evolve` (1 parent, 2 children, 8 diagnosis tasks), pool written to /tmp
# Every step resumes (finished groups, updates and phases are skipped), so running it again continues.
#   bash reports/benchmarks/run.sh textworld              # every step, in this order
#   bash reports/benchmarks/run.sh bfcl base warm         # only these steps
#   repair needs its task set first: `hs data build-repair` (about 20 min)
set -euo pipefail
cd "$(dirname "$0")/../.."
HS=${HS:-.venv/bin/hs}
export HS_DATA_DIR=${HS_DATA_DIR:-../shared/data}
b=${1:?usage: run.sh textworld|bfcl|repair [gold sft base warm dead train evolve]}; shift
(($#)) || set -- gold sft base warm dead train evolve
SFT=configs/sft_${b}_smol.yaml
ROUNDS=$(sed -n 's/^  max_rounds: *//p' "configs/train_${b}_smol.yaml")
DEV=(--benchmark "$b" --split dev --every 3 --k 3 --seeds 1 --set env.max_rounds="$ROUNDS")
log() { echo "[$(date -u +%H:%M:%S)] $b: $*"; }
for step in "$@"; do
  log "$step"
  case $step in
    gold) $HS env check-gold "$b" --split dev ;;
    sft) $HS sft --config "$SFT" ;;
    base) $HS eval "${DEV[@]}" --set name="$b-base-dev" ;;
    warm) $HS eval "${DEV[@]}" --warm-start "$SFT" --set name="$b-warm-dev" ;;
    dead) $HS eval --benchmark "$b" --split train --every 5 --limit 8 --k 8 --seeds 1 --warm-start "$SFT" \
            --set env.max_rounds="$ROUNDS" --set name="$b-warm-train-k8" ;;
    train)
      $HS train --config "configs/train_${b}_smol.yaml" --updates 2 --batch-tasks 4 \
        --set name="$b-short" --set validation.n_tasks=4
      $HS report --run "$b-short" --out "reports/benchmarks/$b" ;;
    evolve) $HS evolve --config "configs/evolve_${b}_smol.yaml" --rounds 1 --set parents_per_round=1 \
              --set children_per_parent=2 --set diagnose.n_tasks=8 --set validation.max_tasks=8 \
              --set validation.n_controls=4 --set pool.root=/tmp/hs-pools --set pool.dvc=false ;;
    *) echo "unknown step '$step'; steps: gold sft base warm dead train evolve" >&2; exit 2 ;;
  esac
done
