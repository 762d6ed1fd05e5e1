#!/usr/bin/env bash
# A velocity task (ROBOT=go1 or g1 flat, go1-rough or g1-rough on generated terrain with a height scan) or G1 motion
# tracking (ROBOT=g1-tracking, both sides on one clip): this library against mjlab on the same GPU, both model variants,
# 512 / 4096 / 16384 envs. On the GPU machine, from the repository root, with warp, mujoco-warp and gymnasium
# installed for python3 and mjlab (with its own mujoco-warp) on MJ_PYTHONPATH:
#   OUT=/some/dir ROBOT=g1 bash benchmarks/gpu/vs_mjlab.sh
# mjlab runs in its own interpreter with MJ_PYTHONPATH (its mujoco / mujoco-warp shadow ours).
# Budget: DEADLINE_S (470 s) in all. The kernels of both sides compile first, in parallel, untimed (~100 s
# when cold; at most PREWARM_S: 150 s, 300 s for the rough tasks); then per size (4096 first: the headline)
# our `bench` once per model variant and the mjlab runner, each under its own timeout, cut to what is left of
# the budget, ours keeping mjlab's timeout in reserve (a step with no time left is skipped).
# SENSORS=1 keeps the model's own sensors on the variant of mjlab's model file (keep_sensors=true): both
# sides then compute the same sensors. What comes back under $OUT (flat, 4 files): <robot>_vs_mjlab.{log,json,md,png}.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
ROBOT=${ROBOT:-go1}
MOTION=${MOTION:-}  # g1-tracking: the clip both sides track (default: the library's shipped G1 clip)
case $ROBOT in
  go1) ENV_ID=${ENV_ID:-gym_graphreset/Go1-Velocity-Flat-v0} PEER_TASK=Mjlab-Velocity-Flat-Unitree-Go1 MODEL=go1 ;;
  g1) ENV_ID=${ENV_ID:-gym_graphreset/G1-Velocity-Flat-v0} PEER_TASK=Mjlab-Velocity-Flat-Unitree-G1 MODEL=g1 ;;
  go1-rough) ENV_ID=${ENV_ID:-gym_graphreset/Go1-Velocity-Rough-v0} PEER_TASK=Mjlab-Velocity-Rough-Unitree-Go1 MODEL=go1 ;;
  g1-rough) ENV_ID=${ENV_ID:-gym_graphreset/G1-Velocity-Rough-v0} PEER_TASK=Mjlab-Velocity-Rough-Unitree-G1 MODEL=g1 ;;
  g1-tracking)
    ENV_ID=${ENV_ID:-gym_graphreset/G1-Tracking-Flat-v0} PEER_TASK=Mjlab-Tracking-Flat-Unitree-G1 MODEL=g1
    MOTION=$(realpath "${MOTION:-gym_graphreset/assets/robots/g1/motions/g1_sway.npz}")
    ;;
  *) echo "ROBOT must be go1, g1, go1-rough, g1-rough or g1-tracking, got $ROBOT" >&2; exit 2 ;;
esac
SENSORS=${SENSORS:-0}
MJ_PYTHONPATH=${MJ_PYTHONPATH-/opt/mjkit/site:/opt/ggkit/site}
MJ_PYTHON=${MJ_PYTHON:-python3}
MJ_DEVICE=${MJ_DEVICE:-cuda:0}
MODES=${MODES:-step graph}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-20}
WORK=${WORK:-/tmp/${ROBOT}_vs_mjlab}
# the states each side's own physics is timed on: step (those its step visits) or free (bench --physics-states)
PHYSICS_STATES=${PHYSICS_STATES:-step}
DEADLINE_S=${DEADLINE_S:-470}
# the untimed kernel compilation of both sides (in parallel); the terrain's heightfield collision kernels alone
# take about a minute to compile on mjlab's side, so the rough tasks get longer
case $ROBOT in *-rough) PREWARM_S=${PREWARM_S:-300} ;; *) PREWARM_S=${PREWARM_S:-150} ;; esac
# size:our timeout per variant (s):mjlab's timeout (s), in the order run
SPECS=${SPECS:-4096:60:40 512:40:30 16384:70:60}
# which model variants of ours run: "all", or "mjlab" for the model file of mjlab alone (the same-model headline)
VARIANTS=${VARIANTS:-all}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1 MUJOCO_GL=disable IMAGEIO_FFMPEG_EXE=/bin/true
export MJ_PYTHON MJ_PYTHONPATH MJ_DEVICE STEPS WARMUP PHYSICS_STATES PEER_TASK MOTION
LOG="$OUT/${ROBOT}_vs_mjlab.log"
mkdir -p "$OUT" "$WORK"
: >"$LOG"
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$LOG"; }
left() {  # seconds this step may take: its cap ($1), cut to the budget left (20 s kept for the merge, $2 s more)
  local rest=$((DEADLINE_S - SECONDS - 20 - ${2:-0}))
  echo $((rest < $1 ? rest : $1))
}

# the model file of mjlab (found without importing mjlab, which would load its mujoco here)
XML=$(PYTHONPATH=$MJ_PYTHONPATH "$MJ_PYTHON" -c 'import importlib.util as u, pathlib as p, sys
s = u.find_spec("mjlab"); r = sys.argv[1]
print(p.Path(s.origin).parent / f"asset_zoo/robots/unitree_{r}/xmls/{r}.xml" if s else "")' "$MODEL")
variants=("ours-mjcf")
if [[ -n "$XML" && -f "$XML" ]]; then
  same="mjlab-$ROBOT:model_xml=$XML"
  ((SENSORS)) && same="$same,keep_sensors=true"
  [[ -n $MOTION ]] && same="$same,motion_file=$MOTION"
  variants+=("$same")
  [[ $VARIANTS == mjlab ]] && variants=("$same")
  peer=1
else
  log "mjlab not found with $MJ_PYTHON on MJ_PYTHONPATH=$MJ_PYTHONPATH: this library's MJCF only, no peer"
  peer=0
fi
bench=(python3 -m gym_graphreset bench --no-progress --env-id "$ENV_ID" --modes "$MODES" --physics-states "$PHYSICS_STATES")

log "compiling kernels (untimed): ours (each variant) and mjlab, in parallel"
pids=()
for v in "${variants[@]}"; do
  label=${v%%:*}
  timeout "$PREWARM_S" "${bench[@]}" --num-envs 64 --steps 2 --warmup 2 --variant "$v" --out "$WORK/prewarm-$label" \
    >"$WORK/prewarm-$label.log" 2>&1 &
  pids+=("$!:$label")
done
if ((peer)); then
  PYTHONPATH=$MJ_PYTHONPATH timeout "$PREWARM_S" "$MJ_PYTHON" gym_graphreset/bench/peers/mjlab_runner.py --num-envs 64 --steps 2 \
    --warmup 2 --device "$MJ_DEVICE" --task "$PEER_TASK" ${MOTION:+--motion-file "$MOTION"} >"$WORK/prewarm-mjlab.log" 2>&1
  log "mjlab prewarm: exit status $? ($(tail -1 "$WORK/prewarm-mjlab.log" | cut -c1-160))"
fi
for p in "${pids[@]}"; do
  wait "${p%%:*}"
  log "ours ${p#*:} prewarm: exit status $? ($(tail -1 "$WORK/prewarm-${p#*:}.log" | cut -c1-160))"
done

peer_at() {  # size, timeout (s): the mjlab runner in its own interpreter, saved as $WORK/x<size>/mjlab.json
  python3 - "$1" "$2" "$WORK/x$1/mjlab.json" <<'EOF'
import os, sys
from pathlib import Path
from gym_graphreset.bench.runner import ModeResult, save_json
from gym_graphreset.bench.peers.compare import PeerConfig, run_peer
n, limit, path = int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
config = PeerConfig(
    python=os.environ["MJ_PYTHON"], pythonpath=os.environ["MJ_PYTHONPATH"], device=os.environ["MJ_DEVICE"],
    timeout_s=limit, physics_states=os.environ["PHYSICS_STATES"], task=os.environ["PEER_TASK"],
    motion_file=os.environ.get("MOTION") or None,
)
result = run_peer(config, n, steps=int(os.environ["STEPS"]), warmup=int(os.environ["WARMUP"]))
if isinstance(result, ModeResult):
    save_json([result], path)
    print(f"mjlab x{n}: {result.ms_per_step:.2f} ms/step, {result.extra['physics_ms']:.2f} ms own physics, "
          f"{result.host_syncs_per_step} torch host syncs/step, {result.env_steps_per_s:,.0f} env-steps/s")
EOF
}

# each side and variant writes its JSON as soon as it is done: a timeout loses that one alone
for spec in $SPECS; do
  IFS=: read -r n ours_cap peer_cap <<<"$spec"
  for v in "${variants[@]}"; do
    label=${v%%:*}
    t=$(left "$ours_cap" $((peer ? peer_cap : 0)))  # mjlab's cap kept for it: the reference is never squeezed out
    if ((t < 5)); then log "x$n $label: skipped, the budget is spent"; continue; fi
    log "x$n $label (timeout $t s)"
    timeout "$t" "${bench[@]}" --num-envs "$n" --steps "$STEPS" --warmup "$WARMUP" --variant "$v" \
      --out "$WORK/x$n/$label" 2>&1 | grep -v "^Module \|^Warp \|^   " | tee -a "$LOG"
    log "x$n $label: exit status ${PIPESTATUS[0]}"
  done
  if ((peer)); then
    t=$(left "$peer_cap")
    if ((t < 5)); then log "x$n mjlab: skipped, the budget is spent"; continue; fi
    log "x$n mjlab (timeout $t s)"
    peer_at "$n" "$t" 2>&1 | tee -a "$LOG"
  fi
done

python3 - "$WORK" "$OUT" "$ENV_ID" "$ROBOT" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
from dataclasses import asdict
from pathlib import Path
from gym_graphreset.bench.runner import env_versions
from gym_graphreset.bench.peers.compare import comparison_table, load_results
from gym_graphreset.bench.plotting import plot_peer_comparison
work, out, env_id, robot = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
paths = sorted(work.glob("x*/**/*.json"), key=lambda p: (int(p.relative_to(work).parts[0][1:]), str(p)))
results = load_results(paths)
table = comparison_table(results)
print(table)
(out / f"{robot}_vs_mjlab.md").write_text(table + "\n")
record = {"versions": env_versions(), "sources": [str(p) for p in paths], "results": [asdict(r) for r in results]}
(out / f"{robot}_vs_mjlab.json").write_text(json.dumps(record, indent=1))
plot_peer_comparison(results, out / f"{robot}_vs_mjlab.png", f"{env_id} vs mjlab, same GPU")
print(f"wrote {out}/{robot}_vs_mjlab.{{json,md,png}} from {len(paths)} file(s)")
EOF
log "done"
