#!/usr/bin/env bash
# Scale: step / own physics and env-steps/s from 512 to 65,536 envs, with and without compile, beside mjlab on
# Go1, then where the step's time goes at 16,384 (python -m gym_graphreset profile).
# On the GPU machine, from the repository root, after staging the ggkit (and the mjlab kit for the peer):
#   . /opt/ggkit/env.sh && OUT=/some/dir bash benchmarks/gpu/scale_sweep.sh
# Each bench call is cut to what is left of DEADLINE_S; a size that runs out of memory is logged and skipped
# (bench's JSON keeps the sizes measured; peak GPU memory per mode is in it, per env = peak / num_envs).
# What comes back under $OUT: scale_sweep.log, bench-*.json/png per task, profile-*.json/png.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
SIZES=${SIZES:-512,2048,4096,8192,16384,32768,65536}
PROFILE_SIZES=${PROFILE_SIZES:-4096,16384}
TASKS=${TASKS:-gym_graphreset/Go1-Velocity-Flat-v0 gym_graphreset/Ant-v5}
MODES=${MODES:-step graph,step graph+compile}
PHYSICS_GRAPH=${PHYSICS_GRAPH:-warp}  # the floor's replay: warp (its own graph) or torch (as the step graph embeds it)
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-20}
DEADLINE_S=${DEADLINE_S:-560}
MJ_PYTHONPATH=${MJ_PYTHONPATH-/opt/mjkit/site:/opt/ggkit/site}
MJ_PYTHON=${MJ_PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1 MUJOCO_GL=disable
LOG="$OUT/scale_sweep.log"
mkdir -p "$OUT"
: >"$LOG"
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$LOG"; }
left() { echo $((DEADLINE_S - SECONDS - 10)); }

GO1_XML=$(PYTHONPATH=$MJ_PYTHONPATH "$MJ_PYTHON" -c 'import importlib.util as u, pathlib as p
s = u.find_spec("mjlab"); print(p.Path(s.origin).parent / "asset_zoo/robots/unitree_go1/xmls/go1.xml" if s else "")')
for task in $TASKS; do
  args=(--env-id "$task" --num-envs "$SIZES" --modes "$MODES" --steps "$STEPS" --warmup "$WARMUP" --no-progress
    --physics-graph "$PHYSICS_GRAPH" --out "$OUT")
  if [[ $task == *Go1* && -n "$GO1_XML" && -f "$GO1_XML" ]]; then
    args+=(--variant "mjlab-go1:model_xml=$GO1_XML" --peer mjlab --peer-python "$MJ_PYTHON"
      --peer-pythonpath "$MJ_PYTHONPATH")
  fi
  (($(left) > 30)) || { log "no time left for $task"; continue; }
  log "bench $task at $SIZES"
  timeout "$(left)" python3 -m gym_graphreset bench "${args[@]}" 2>&1 | tee -a "$LOG" | tail -40
done
for task in $TASKS; do
  (($(left) > 30)) || { log "no time left to profile $task"; continue; }
  log "profile $task at $PROFILE_SIZES"
  timeout "$(left)" python3 -m gym_graphreset profile --env-id "$task" --num-envs "$PROFILE_SIZES" \
    --mode "step graph" --steps 20 --out "$OUT" --no-progress 2>&1 | tee -a "$LOG" | tail -20
done
log "done"
