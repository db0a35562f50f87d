#!/usr/bin/env bash
# Register every harness-s flow as a deployment (idempotent) and start a process worker that runs
# the flow runs started from the UI. Run it on each machine that has this checkout and `make setup`.
# Usage: PREFECT_API_URL=http://SERVER:4200/api HS_DATABASE_URL=postgresql+psycopg://postgres@DB:5432/harness_s \
#        infra/start-worker.sh [POOL]          (default pool: harness-s)
# Task results persist under $HS_RESULTS_DIR (default .hs/prefect-results): export it as storage all
# workers share (an NFS mount, say), so a re-run on any worker skips what another one finished.
set -euo pipefail
cd "$(dirname "$0")/.."
POOL="${1:-harness-s}"
: "${PREFECT_API_URL:?set PREFECT_API_URL to the Prefect server, e.g. http://127.0.0.1:4200/api}"
: "${HS_DATABASE_URL:?set HS_DATABASE_URL to the shared PostgreSQL (infra/start-postgres.sh prints it)}"
EXTRA=()
[ -n "${HS_RESULTS_DIR:-}" ] && EXTRA+=(--env "HS_RESULTS_DIR=$HS_RESULTS_DIR")
[ -n "${HS_DATA_DIR:-}" ] && EXTRA+=(--env "HS_DATA_DIR=$HS_DATA_DIR")
.venv/bin/hs deploy --pool "$POOL" --env "HS_DATABASE_URL=$HS_DATABASE_URL" "${EXTRA[@]}"
exec .venv/bin/prefect worker start --pool "$POOL" --type process
