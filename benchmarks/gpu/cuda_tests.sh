#!/usr/bin/env bash
# The CUDA-marked tests (pytest -m cuda) on a GPU machine, with the warm caches when staged, output under $OUT.
# From the repository root, with warp, mujoco-warp and gymnasium importable:
#   OUT=/some/dir bash benchmarks/gpu/cuda_tests.sh                                   # every CUDA test
#   OUT=/some/dir PATHS="tests/managers tests/tasks" DEADLINE_S=420 bash benchmarks/gpu/cuda_tests.sh
# Writes $OUT/card.txt (the GPU and driver), $OUT/cuda-tests.log (pytest -v, slowest 20) and $OUT/cuda-tests.xml
# (JUnit: what passed before a deadline cut the run short). Kernels compiled by the tests go into ROOT's caches
# (/opt/ggcache, or the staged warm cache's env.sh), so `warm_cache.py build --no-prewarm` packs them afterwards.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
PATHS=${PATHS:-tests}
DEADLINE_S=${DEADLINE_S:-540}
ROOT=${ROOT:-/opt/ggcache}
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MUJOCO_GL=disable IMAGEIO_FFMPEG_EXE=/bin/true
if [[ -f $ROOT/env.sh ]]; then . "$ROOT/env.sh"; else export WARP_CACHE_PATH=$ROOT/warp TORCHINDUCTOR_CACHE_DIR=$ROOT/inductor; fi
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
# shellcheck disable=SC2086  # PATHS is a list of paths
timeout "$DEADLINE_S" python3 -m pytest $PATHS -m cuda -p no:cacheprovider -v -rfE --durations=20 \
  -o addopts="--strict-markers --benchmark-disable" --junitxml="$OUT/cuda-tests.xml" >"$OUT/cuda-tests.log" 2>&1
status=$?
grep -E "PASSED|FAILED|ERROR|SKIPPED" "$OUT/cuda-tests.log" | sed 's/ *\[ *[0-9]*%\]//' | tail -n 60
tail -n 3 "$OUT/cuda-tests.log"
[[ $status == 124 ]] && echo "cut short at DEADLINE_S=$DEADLINE_S s: the JUnit file holds what finished"
exit $status
