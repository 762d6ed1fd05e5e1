#!/usr/bin/env bash
# Builds the warm GPU cache (benchmarks/gpu/warm_cache.py) on a GPU machine, then checks it as a fresh machine
# would meet it: the pack staged into an empty root, each task's first captured step timed in a new process.
# From the repository root, with warp, mujoco-warp and gymnasium importable and mjlab on MJ_PYTHONPATH:
#   OUT=/some/dir bash benchmarks/gpu/warm_start.sh
# Writes under $OUT: pack/warmcache.part* and pack/warmcache.json (copy them to the next machine),
# and warm_start.log (with the seconds to each task's first captured step from the staged pack).
# PHASE=build or PHASE=check runs one half.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
MJ_PYTHONPATH=${MJ_PYTHONPATH-/opt/mjkit/site:/opt/ggkit/site}
DEADLINE_S=${DEADLINE_S:-420}   # compile time before packing
NUM_ENVS=${NUM_ENVS:-4096}      # the size Inductor compiles our step for
SEED_PACK=${SEED_PACK:-}        # an earlier pack to start from: the new pack holds both
ROOT=${ROOT:-/opt/ggcache}      # where this machine's caches are built
PHASE=${PHASE:-all}             # build, check or all
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MUJOCO_GL=disable IMAGEIO_FFMPEG_EXE=/bin/true
export WARP_CACHE_PATH=$ROOT/warp TORCHINDUCTOR_CACHE_DIR=$ROOT/inductor
mkdir -p "$OUT"
LOG=$OUT/warm_start.log
build() {
  if [[ -n $SEED_PACK ]]; then python3 benchmarks/gpu/warm_cache.py stage "$SEED_PACK" --root "$ROOT" || return; fi
  echo "[$(date +%T)] build: compile for up to $DEADLINE_S s, then pack"
  mj=()
  [[ -n $MJ_PYTHONPATH ]] && mj=(--mjlab-pythonpath "$MJ_PYTHONPATH")
  python3 benchmarks/gpu/warm_cache.py build --out "$OUT/pack" --num-envs "$NUM_ENVS" --deadline-s "$DEADLINE_S" "${mj[@]}"
  cat "$OUT"/pack/warmcache-build-*.log > /tmp/warmcache-build.log 2>/dev/null && rm -f "$OUT"/pack/warmcache-build-*.log
  grep -E "Error|error|Traceback" /tmp/warmcache-build.log | sort | uniq -c | sort -rn | head -20
}
check() {
  echo "[$(date +%T)] check: stage the pack into an empty root, first captured steps in new processes"
  rm -rf /tmp/ggverify
  python3 benchmarks/gpu/warm_cache.py stage "$OUT/pack" --root /tmp/ggverify && . /tmp/ggverify/env.sh &&
    python3 benchmarks/gpu/warm_cache.py first-step --num-envs "$NUM_ENVS" --out /tmp/first-step.json && cat /tmp/first-step.json
  echo "[$(date +%T)] done"
}
case $PHASE in
  build) build 2>&1 | tee -a "$LOG" ;;
  check) check 2>&1 | tee -a "$LOG" ;;
  all) { build; check; } 2>&1 | tee -a "$LOG" ;;
  *) echo "PHASE must be build, check or all, got $PHASE" >&2; exit 2 ;;
esac
