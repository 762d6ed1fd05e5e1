#!/usr/bin/env bash
# This library against mjlab on identical work, the sides alternated ROUNDS times in one run (bench --rounds):
# mjlab's model file with its sensors kept and mjlab's forward pass before the observations on our side
# (whole as mjlab's and reduced to the passes the observations read; tracking tracks the same clip), our step
# graph with and without compile="inductor".
# From the repository root on a GPU machine, with warp, mujoco-warp and gymnasium importable and mjlab on
# MJ_PYTHONPATH (it runs in its own process):
#   OUT=/some/dir ROBOT=go1 bash benchmarks/gpu/peer_rounds.sh       # go1, go1-rough, g1, g1-rough, g1-tracking
# Writes $OUT/bench-<task>-cuda{.json,-rounds.md,.png} and $OUT/<robot>-rounds.log. The JSON is written after each
# round (a stopped run keeps its whole rounds); DEADLINE_S (570) stops the run with a message before a command
# limit would. Warm (warp's kernels cached), one robot's three rounds of MODES="step graph+compile", two variants,
# took ~5 min on an H100; both modes take about twice that.
# BUDGET_VARIANT="njmax=64,nconmax=16" adds a variant "budget": the mjlab-work variant (the same model and work)
# with that contact/constraint budget, timed in the same alternated rounds. Size it with
# benchmarks/contact_budget.py (the peak x 2); its results equal mjlab-work's bit for bit unless the poll
# reports an overflow. From the CPU probe (docs/mjwarp.md): go1 "njmax=64,nconmax=16", go1-rough "njmax=104",
# g1 "njmax=232", g1-rough "njmax=280", g1-tracking "njmax=232" (nconmax: the shipped one holds their peaks).
# OUTPUTS=0 leaves out the mjlab-outputs variant (a shorter run: the identical work alone, with the budget variant
# if one is given).
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
ROBOT=${ROBOT:-go1}
SIZES=${SIZES:-4096}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-20}
MODES=${MODES:-step graph,step graph+compile}
DEADLINE_S=${DEADLINE_S:-570}
MJ_PYTHONPATH=${MJ_PYTHONPATH-/opt/mjkit/site:/opt/ggkit/site}
BUDGET_VARIANT=${BUDGET_VARIANT:-}
OUTPUTS=${OUTPUTS:-1}
if [[ $OUTPUTS != 0 && $OUTPUTS != 1 ]]; then
  echo "OUTPUTS must be 1 (time the mjlab-outputs variant too) or 0 (leave it out), got $OUTPUTS" >&2
  exit 2
fi
if [[ -n $BUDGET_VARIANT && ! $BUDGET_VARIANT =~ ^(njmax|nconmax)=[1-9][0-9]*(,(njmax|nconmax)=[1-9][0-9]*)?$ ]]; then
  echo "BUDGET_VARIANT must be njmax=N and/or nconmax=N, comma-separated (e.g. njmax=64,nconmax=16), got $BUDGET_VARIANT" >&2
  exit 2
fi
case $ROBOT in
  go1) ENV_ID=gym_graphreset/Go1-Velocity-Flat-v0 PEER_TASK=Mjlab-Velocity-Flat-Unitree-Go1 MODEL=go1 ;;
  g1) ENV_ID=gym_graphreset/G1-Velocity-Flat-v0 PEER_TASK=Mjlab-Velocity-Flat-Unitree-G1 MODEL=g1 ;;
  go1-rough) ENV_ID=gym_graphreset/Go1-Velocity-Rough-v0 PEER_TASK=Mjlab-Velocity-Rough-Unitree-Go1 MODEL=go1 ;;
  g1-rough) ENV_ID=gym_graphreset/G1-Velocity-Rough-v0 PEER_TASK=Mjlab-Velocity-Rough-Unitree-G1 MODEL=g1 ;;
  g1-tracking) ENV_ID=gym_graphreset/G1-Tracking-Flat-v0 PEER_TASK=Mjlab-Tracking-Flat-Unitree-G1 MODEL=g1 ;;
  *) echo "ROBOT must be go1, g1, go1-rough, g1-rough or g1-tracking, got $ROBOT" >&2; exit 2 ;;
esac
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MUJOCO_GL=disable IMAGEIO_FFMPEG_EXE=/bin/true
ROBOTS=$(PYTHONPATH=$MJ_PYTHONPATH python3 -c 'import importlib.util as u, pathlib as p
s = u.find_spec("mjlab"); print(p.Path(s.origin).parent / "asset_zoo/robots" if s else "")')
if [[ -z $ROBOTS ]]; then echo "mjlab is not importable with PYTHONPATH=$MJ_PYTHONPATH" >&2; exit 2; fi
XML=$ROBOTS/unitree_$MODEL/xmls/$MODEL.xml
model="model_xml=$XML,keep_sensors=true"
peer_clip=()
if [[ $ROBOT == g1-tracking ]]; then
  CLIP=$(realpath "$(find gym_graphreset -name g1_sway.npz | head -1)")
  model="$model,motion_file=$CLIP"
  peer_clip=(--peer-motion-file "$CLIP")
fi
# mjlab's step runs one forward before the observations in every task. mjlab-work: that whole forward (the same
# work); mjlab-outputs: only the passes the observations read (the same observations, rewards and flags, bit for
# bit on the CPU: less work)
work="$model,forward_before_obs=true,forward_passes=full"
variants=(--variant "mjlab-work:$work")
if ((OUTPUTS)); then variants+=(--variant "mjlab-outputs:$model,forward_before_obs=true,forward_passes=declared"); fi
if [[ -n $BUDGET_VARIANT ]]; then variants+=(--variant "budget:$work,$BUDGET_VARIANT"); fi
mkdir -p "$OUT"
timeout -k 10 "$DEADLINE_S" python3 -m gym_graphreset bench --no-progress --env-id "$ENV_ID" --num-envs "$SIZES" --modes "$MODES" \
  --steps "$STEPS" --warmup "$WARMUP" --rounds "$ROUNDS" "${variants[@]}" \
  --peer mjlab --peer-python python3 --peer-pythonpath "$MJ_PYTHONPATH" --peer-task "$PEER_TASK" "${peer_clip[@]}" \
  --out "$OUT" 2>&1 | grep -v "^Module \|^Warp \|^   " | tee "$OUT/$ROBOT-rounds.log"
status=${PIPESTATUS[0]}
if ((status == 124 || status == 137)); then
  echo "stopped at DEADLINE_S=$DEADLINE_S s before the rounds ended: the JSON holds the rounds done; fewer MODES," \
    "SIZES or ROUNDS fit one command" | tee -a "$OUT/$ROBOT-rounds.log"
fi
exit "$status"
