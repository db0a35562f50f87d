#!/usr/bin/env bash
# Start the local PostgreSQL cluster if it is down and create the two databases of a shared set-up:
#   harness_s  (the trajectory database: HS_DATABASE_URL=postgresql+psycopg://postgres@HOST:5432/harness_s)
#   prefect    (the Prefect server's own database)
# Usage: infra/start-postgres.sh [HOST] [PORT]      (defaults 127.0.0.1 5432, user postgres)
set -euo pipefail
HOST="${1:-127.0.0.1}"; PORT="${2:-5432}"
if ! pg_isready -q -h "$HOST" -p "$PORT"; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 30); do pg_isready -q -h "$HOST" -p "$PORT" && break; sleep 1; done
fi
for db in harness_s prefect; do
  psql -h "$HOST" -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$db'" | grep -q 1 \
    || psql -h "$HOST" -p "$PORT" -U postgres -c "CREATE DATABASE $db" >/dev/null
done
HS_DATABASE_URL="postgresql+psycopg://postgres@$HOST:$PORT/harness_s" "$(dirname "$0")/../.venv/bin/hs" db upgrade
echo "HS_DATABASE_URL=postgresql+psycopg://postgres@$HOST:$PORT/harness_s"
echo "PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://postgres@$HOST:$PORT/prefect"
