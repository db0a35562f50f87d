#!/usr/bin/env bash
# Multi-GPU GRPO training: rank 0 runs the Prefect flow (rollouts, database, checkpoints); every rank
# trains its share of each update with DeepSpeed ZeRO (stage from trainer.zero_stage). One node:
#   infra/train-multi-gpu.sh 8 configs/train_dbbench_smol.yaml
# Several nodes (run on each, same MASTER_ADDR/PORT, NODE_RANK 0..NNODES-1):
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 infra/train-multi-gpu.sh 8 configs/train_dbbench_smol.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
GPUS="${1:?GPUs per node}"; CONFIG="${2:?training config}"; shift 2
exec .venv/bin/torchrun --nnodes "${NNODES:-1}" --node_rank "${NODE_RANK:-0}" --nproc_per_node "$GPUS" \
  --master_addr "${MASTER_ADDR:-127.0.0.1}" --master_port "${MASTER_PORT:-29500}" \
  -m cli.main train --config "$CONFIG" --set trainer.backend=deepspeed --set trainer.device=cuda \
  --set "trainer.zero_stage=${ZERO_STAGE:-2}" "$@"
