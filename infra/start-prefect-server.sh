#!/usr/bin/env bash
# A Prefect server (API + UI) backed by PostgreSQL, reachable by every worker.
# Usage: infra/start-prefect-server.sh [PG_HOST] [BIND_HOST] [PORT]     (defaults 127.0.0.1 0.0.0.0 4200)
# Then open http://BIND_HOST:PORT, and on every machine: export PREFECT_API_URL=http://SERVER:PORT/api
set -euo pipefail
PG_HOST="${1:-127.0.0.1}"; BIND="${2:-0.0.0.0}"; PORT="${3:-4200}"
export PREFECT_API_DATABASE_CONNECTION_URL="${PREFECT_API_DATABASE_CONNECTION_URL:-postgresql+asyncpg://postgres@$PG_HOST:5432/prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
exec "$(dirname "$0")/../.venv/bin/prefect" server start --host "$BIND" --port "$PORT"
