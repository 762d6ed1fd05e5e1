#!/usr/bin/env bash
# Go1 flat x4096 on mjlab's go1.xml: this tree against an earlier release, alternated in one run (same GPU,
# same warm kernel cache), whole-step graph with and without torch.compile, each against its own physics
# timed on the states its step visits.
#   git archive <earlier-commit> gym_graphreset | tar -x -C /tmp/prev
#   OUT=/some/dir PREV=/tmp/prev GO1_XML=/path/to/mjlab/go1.xml bash benchmarks/gpu/go1_ab.sh
# Writes $OUT/go1_ab.log (each line tagged [new|prev]) and one JSON per run under $OUT/go1_ab/.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
PREV=${PREV:?set PREV to a folder holding an earlier release of gym_graphreset/}
GO1_XML=${GO1_XML:?set GO1_XML to the go1.xml of mjlab}
NUM_ENVS=${NUM_ENVS:-4096}
export PYTHONUNBUFFERED=1 MUJOCO_GL=disable
mkdir -p "$OUT/go1_ab"
root=$PWD
run() {  # label dir round
  local label=$1 dir=$2 round=$3
  (cd "$dir" && timeout 200 python3 -m gym_graphreset bench --no-progress \
    --env-id gym_graphreset/Go1-Velocity-Flat-v0 --num-envs "$NUM_ENVS" --steps 100 --warmup 20 \
    --modes "step graph,step graph+compile" --physics-states step --variant "mjlab-go1:model_xml=$GO1_XML" \
    --out "$OUT/go1_ab/$label-$round" 2>&1 | grep -E "^\| gym|x$NUM_ENVS:|Error|error" \
    | sed "s/^/[$label $round] /" | tee -a "$OUT/go1_ab.log")
}
for round in 1 2; do
  run new "$root" "$round"
  run prev "$PREV" "$round"
done
