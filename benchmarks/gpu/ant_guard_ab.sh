#!/usr/bin/env bash
# Ant-v5 x4096, whole-step graph against bare physics: this tree and an earlier release, alternated in one
# run (same GPU, same warm kernel cache), on the free-running floor twice and on the step-state floor once.
#   git archive <earlier-commit> gym_graphreset | tar -x -C /tmp/prev    # the earlier release's package
#   OUT=/some/dir PREV=/tmp/prev bash benchmarks/gpu/ant_guard_ab.sh
# Writes $OUT/ab.log (the tables, each line tagged [new|prev floor]) and one JSON per run under $OUT/ab/.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
PREV=${PREV:?set PREV to a folder holding an earlier release of gym_graphreset/}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/ab"
root=$PWD
run() {  # label dir floor
  local label=$1 dir=$2 floor=$3
  (cd "$dir" && timeout 240 python3 -m gym_graphreset bench --no-progress --env-id gym_graphreset/Ant-v5 \
    --num-envs 4096 --steps 300 --modes "step graph" --physics-states "$floor" --out "$OUT/ab/$label-$floor" 2>&1 \
    | grep -E "^\| gym|x4096:|Error" | sed "s/^/[$label $floor] /" | tee -a "$OUT/ab.log")
}
for floor in free free step; do
  run new "$root" "$floor"
  run prev "$PREV" "$floor"
done
