#!/usr/bin/env bash
# Runs the bench from a snapshot of the committed tree (git archive HEAD) in a directory of its own,
# so that builds by others in the work tree during a long run cannot change what is measured.
# The bench's own files are taken from the work tree. Results land in the work tree's bench/results.
#   [BENCH_REF=<commit>] bash bench/snapshot.sh [bench options...]   (default: HEAD)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Node 24 from the npm registry (node_modules/.bin), as the Makefile uses it.
export PATH="$root/node_modules/.bin:$PATH"
snap=${BENCH_SNAPSHOT_DIR:-/tmp/knr-bench-src}
rm -rf "$snap" && mkdir -p "$snap"
ref=${BENCH_REF:-HEAD}
git -C "$root" archive "$ref" | tar -x -C "$snap"
rm -rf "$snap/bench" && cp -r "$root/bench" "$snap/bench" && rm -rf "$snap/bench/results"
ln -s "$root/node_modules" "$snap/node_modules"
commit=$(git -C "$root" rev-parse --short=12 "$ref")
cd "$snap"
KNR_COMMIT=$commit node scripts/bundle.mjs --quiet
node bench/build.mjs
KNR_COMMIT=$commit exec node dist/bench.mjs "$@"
