#!/usr/bin/env bash
# Wall time and peak memory of `hs quickstart` from an empty .hs: a clean worktree of HEAD in a
# temporary folder (so the working .hs is untouched), the generated training split copied in, the
# resident memory of the whole process tree (Prefect server included) summed every 0.5 s.
#   bash benchmarks/quickstart_wall_memory.sh        # prints: wall N s, peak process-tree RSS N GiB
# Run it on idle cores: another job on the 2 cores changes the wall time, not the result table.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
export HS_DATA_DIR=${HS_DATA_DIR:-$(cd .. && pwd)/shared/data}
[[ -f .hs/data/dbbench/train.jsonl ]] || .venv/bin/hs data build-train dbbench
WORK=$(mktemp -d)
trap 'git -C "$REPO" worktree remove --force "$WORK" >/dev/null 2>&1 || true' EXIT
git worktree add -q --detach "$WORK" HEAD
mkdir -p "$WORK/.hs/data/dbbench" && cp .hs/data/dbbench/train.jsonl "$WORK/.hs/data/dbbench/"
cd "$WORK"
start=$(date +%s.%N)
"$REPO/.venv/bin/python" -m cli.launch quickstart > quickstart.log 2>&1 &
pid=$!
peak=0
while kill -0 $pid 2>/dev/null; do
  tree=$(ps -e -o pid=,ppid=,rss= | awk -v root=$pid '{p[$1]=$2; r[$1]=$3}
    END {s=0; for (x in p) {y=x; while (y && y!=root) y=p[y]; if (y==root) s+=r[x]} print s}')
  ((tree > peak)) && peak=$tree
  sleep 0.5
done
wait $pid || { tail -20 quickstart.log; exit 1; }
end=$(date +%s.%N)
grep -A 12 "┏" quickstart.log || true
echo "wall $(echo "$end - $start" | bc) s, peak process-tree RSS $(echo "scale=2; $peak/1048576" | bc) GiB"
