#!/usr/bin/env bash
# A newcomer's minutes (issue 34), measured as a newcomer meets them: a fresh clone of this
# repository in a temporary directory, every cache empty (pip, npm, the model caches), then
#   1. .ci/run             (= make test; it prints the suite's seconds and the total)
#   2. make run            until /healthz answers, and until the first search has answered
#   3. app.py search       three calls, each timed from the shell
#
#   bash ops/newcomer_minutes.sh [WORKDIR]      # WORKDIR defaults to a new temporary directory
#
# Needs what CI needs (PostgreSQL, Redis, Debian's chromium or root to install it). Prints one
# line per figure; the README quotes them.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/newcomer.XXXXXX)}"
mkdir -p "$WORK"
export XDG_CACHE_HOME="$WORK/cache" PIP_NO_CACHE_DIR=1 npm_config_cache="$WORK/npm-cache"
git clone -q "$REPO" "$WORK/taskfinder"
cd "$WORK/taskfinder"

now() { date +%s.%N; }
seconds() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

start=$(now)
.ci/run 2>&1 | tee "$WORK/ci.log" | tail -n 3
echo "newcomer: make test (via .ci/run) $(seconds "$start" "$(now)") s"

PORT=8765
export TASKFINDER_DATA_DIR="$WORK/run-data" CACHE_DIR="$WORK/run-cache" PORT
start=$(now)
make run >"$WORK/run.log" 2>&1 &
runner=$!
until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null; do sleep 0.05; done
healthy=$(now)
curl -sf "http://127.0.0.1:$PORT/api/search?q=kids+shots" >/dev/null
answered=$(now)
echo "newcomer: make run -> /healthz $(seconds "$start" "$healthy") s, -> first search answered $(seconds "$start" "$answered") s"
pkill -TERM -f "app.py serve" || true
wait "$runner" 2>/dev/null || true

for i in 1 2 3; do
    start=$(now)
    .venv/bin/python app.py search "hearing and vision screening" >/dev/null
    echo "newcomer: app.py search, call $i: $(seconds "$start" "$(now)") s"
done
