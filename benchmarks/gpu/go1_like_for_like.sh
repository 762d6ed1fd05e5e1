#!/usr/bin/env bash
# Flat velocity training (ROBOT=go1, default, or g1), like for like with mjlab 1.6: ONE run per invocation, so
# that each fits one GPU command (<= 600 s). Both sides train on mjlab's model file (go1.xml / g1.xml) with mjlab's
# PPO config for the robot, with the
# same rsl-rl-lib (5.4.2, mjlab's pin: the mjlab kit and the trainers kit carry it), and log the same metric
# (mjlab's Episode_Reward/track_linear_velocity: at each step with resets, the reset rows' mean of
# episode_sum / episode_length_s; then the mean over the iteration's steps with resets).
#
#   RUN=mjlab        mjlab's own train loop (benchmarks/gpu/mjlab_train.py, its interpreter: MJ_PYTHONPATH)
#   RUN=stock        rsl_rl PPO + OnPolicyRunner on this library (benchmarks/gpu/rsl_rl_go1.py): the headline row
#   RUN=finalobs     ... with FinalObsPPO (time-outs bootstrapped from the true final observation)
#   RUN=syncfree     ... with stock PPO and SyncFreeOnPolicyRunner (no host read per rollout step)
#   RUN=fast         ... with FastPPO (rsl_rl's update, one host read per update, captured on CUDA) and
#                    SyncFreeOnPolicyRunner: the faster learner with the same algorithm
#   RUN=ppo-example  examples/ppo_continuous.py --preset mjlab-<ROBOT> (this library's own PPO, captured update)
# SEED (42; run >= 2 seeds per RUN where time allows), BUDGET_S (240: the training loop's wall-clock, the same
# for every run), NUM_ENVS (4096), DEADLINE_S (570: this whole command, under the 600 s limit), MODEL_XML (default:
# <ROBOT>.xml from the staged mjlab kit), MJ_PYTHONPATH (/opt/mjkit/site:/opt/ggkit/site), TRAINERS_SITE
# (/opt/trainers/site), SAVE (1: this library's runs keep their final checkpoint under $OUT/<name>.ckpt/, for
# `python -m gym_graphreset play` / `export` afterwards; 0: none). Kernel compilation and graph capture happen
# before each training clock starts.
#
# The sequence of calls (one `run` each, back to back: a machine idle ~30 s is given back and a fresh one is
# bare; ../shared/gpu/README.md). Here first, once: ../shared/gpu/make-kit && ../shared/gpu/make-mjlab-kit &&
# bash benchmarks/gpu/make-trainers-kit.sh   (.gpu/part1, .gpu/part2, .gpu/mjlab, .gpu/trainers; git-ignored)
#   1. carry .gpu/part1:                bash .gpu/part1/stage.sh                                      ~1 min
#   2. carry .gpu/part2 .gpu/trainers:  bash .gpu/part2/stage.sh && bash .gpu/trainers/stage.sh       ~1 min
#   3. carry .gpu/mjlab:                bash .gpu/mjlab/stage.sh                                      ~1 min
#   4. no carry, one call per run (each ~BUDGET_S + 2-3 min cold, + ~1 min warm; ~6 min at BUDGET_S=240):
#        . /opt/ggkit/env.sh && RUN=mjlab SEED=42 BUDGET_S=240 bash benchmarks/gpu/go1_like_for_like.sh
#        . /opt/ggkit/env.sh && RUN=stock SEED=42 BUDGET_S=240 bash benchmarks/gpu/go1_like_for_like.sh
#        ... RUN=mjlab SEED=43, RUN=stock SEED=43, RUN=finalobs SEED=42, RUN=syncfree SEED=42,
#        RUN=ppo-example SEED=42 (then more seeds of those where time allows)
#      (set OUT to an output folder.) Steps 1-3 and about four runs take some 30 min of GPU time; run the rest
#      later, staged again (steps 1-3). Compare only runs on the same kind of card (each JSON's versions.gpu;
#      the plot script warns).
#   5. here: copy each call's go1-l4l-<RUN>-s<SEED>.json into one folder (e.g. benchmarks/results/go1-like-for-like)
#      and draw the figure: .venv/bin/python benchmarks/gpu/plot_like_for_like.py benchmarks/results/go1-like-for-like
# What comes back under $OUT: <ROBOT>-l4l-<RUN>-s<SEED>.{json,log} (the JSON rewritten after every iteration, so
# a run cut short keeps its curve), for ppo-example its own output folder <ROBOT>-l4l-ppo-example-s<SEED>.d/, and
# with SAVE=1 the final checkpoint in <ROBOT>-l4l-<RUN>-s<SEED>.ckpt/ (the PPO example's: in its .d/ folder).
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
RUN=${RUN:?set RUN to one of: mjlab stock finalobs syncfree fast ppo-example}
SEED=${SEED:-42}
BUDGET_S=${BUDGET_S:-240}
NUM_ENVS=${NUM_ENVS:-4096}
DEADLINE_S=${DEADLINE_S:-570}
MODEL_XML=${MODEL_XML:-}
ROBOT=${ROBOT:-go1}
SAVE=${SAVE:-1}
MJ_PYTHONPATH=${MJ_PYTHONPATH-/opt/mjkit/site:/opt/ggkit/site}
TRAINERS_SITE=${TRAINERS_SITE:-/opt/trainers/site}
WORK=${WORK:-/tmp/${ROBOT}_like_for_like}
NAME="$ROBOT-l4l-$RUN-s$SEED"
JSON="$OUT/$NAME.json"
LOG="$OUT/$NAME.log"
export PYTHONUNBUFFERED=1 MUJOCO_GL=disable IMAGEIO_FFMPEG_EXE=/bin/true
OURS_PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}.
mkdir -p "$OUT" "$WORK"
: >"$LOG"
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$LOG"; }
left() { echo $((DEADLINE_S - SECONDS - 20)); }  # what the training may take: 20 s kept for the record

case $RUN in
  mjlab | stock | finalobs | syncfree | fast | ppo-example) ;;
  *) log "RUN must be one of: mjlab stock finalobs syncfree fast ppo-example, got '$RUN'"; exit 2 ;;
esac
case $ROBOT in
  go1) PEER_TASK=Mjlab-Velocity-Flat-Unitree-Go1 ENV_ID=gym_graphreset/Go1-Velocity-Flat-v0 ;;
  g1) PEER_TASK=Mjlab-Velocity-Flat-Unitree-G1 ENV_ID=gym_graphreset/G1-Velocity-Flat-v0 ;;
  *) log "ROBOT must be go1 or g1, got '$ROBOT'"; exit 2 ;;
esac
case $SAVE in
  0 | 1) ;;
  *) log "SAVE must be 0 or 1, got '$SAVE'"; exit 2 ;;
esac
if ((BUDGET_S + 60 > DEADLINE_S)); then
  log "BUDGET_S=$BUDGET_S leaves no time for setup within DEADLINE_S=$DEADLINE_S (cold: ~150 s): lower it"
  exit 2
fi
rsl_version() {  # rsl-rl-lib's version on a PYTHONPATH (without importing rsl_rl)
  PYTHONPATH=$1 python3 -c 'from importlib.metadata import version; print(version("rsl-rl-lib"))' 2>/dev/null || echo none
}
log "run $RUN, seed $SEED, budget $BUDGET_S s, $NUM_ENVS envs, deadline $DEADLINE_S s; $(nvidia-smi --query-gpu=name \
  --format=csv,noheader 2>/dev/null | head -1)"
log "rsl-rl-lib: mjlab kit $(rsl_version "$MJ_PYTHONPATH"), trainers kit $(rsl_version "$TRAINERS_SITE")"

if [[ $RUN != mjlab && -z $MODEL_XML ]]; then  # mjlab's <ROBOT>.xml, found without importing mjlab here
  MODEL_XML=$(PYTHONPATH=$MJ_PYTHONPATH python3 -c 'import importlib.util as u, pathlib as p
import sys; s = u.find_spec("mjlab"); r = sys.argv[1]
print(p.Path(s.origin).parent / f"asset_zoo/robots/unitree_{r}/xmls/{r}.xml" if s else "")' "$ROBOT")
fi
if [[ $RUN != mjlab && ! -f $MODEL_XML ]]; then
  log "no $ROBOT.xml (MODEL_XML='$MODEL_XML'): stage the mjlab kit (step 3) or set MODEL_XML"
  exit 2
fi
if [[ $RUN == stock || $RUN == finalobs || $RUN == syncfree || $RUN == fast ]]; then
  ours=$(rsl_version "$TRAINERS_SITE") theirs=$(rsl_version "$MJ_PYTHONPATH")
  if [[ $ours == none ]]; then
    log "rsl-rl-lib is not staged in $TRAINERS_SITE: stage the trainers kit (step 2)"
    exit 2
  fi
  [[ $ours == "$theirs" ]] || log "WARNING: rsl-rl-lib $ours here and $theirs in mjlab's kit: not like for like"
fi

t=$(left)
log "training ($NAME, timeout $t s) -> $JSON"
case $RUN in
  mjlab)
    PYTHONPATH=$MJ_PYTHONPATH timeout -k 10 "$t" python3 benchmarks/gpu/mjlab_train.py --budget-s "$BUDGET_S" \
      --task "$PEER_TASK" --num-envs "$NUM_ENVS" --seed "$SEED" --out "$OUT" --name "$NAME.json" >"$WORK/$NAME.out" 2>&1
    ;;
  stock | finalobs | syncfree | fast)
    algorithm=ppo runner=stock
    [[ $RUN == finalobs ]] && algorithm=finalobs
    [[ $RUN == syncfree ]] && runner=syncfree
    [[ $RUN == fast ]] && algorithm=fast runner=syncfree
    save=()
    ((SAVE)) && save=(--save-dir "$OUT/$NAME.ckpt" --save-every 1000000)  # the final checkpoint alone
    PYTHONPATH=$TRAINERS_SITE:$OURS_PYTHONPATH timeout -k 10 "$t" python3 benchmarks/gpu/rsl_rl_go1.py \
      --env-id "$ENV_ID" --budget-s "$BUDGET_S" --num-envs "$NUM_ENVS" --seed "$SEED" --model-xml "$MODEL_XML" \
      --algorithm "$algorithm" --runner "$runner" --out "$OUT" --name "$NAME.json" "${save[@]}" >"$WORK/$NAME.out" 2>&1
    ;;
  ppo-example)
    save=()
    ((SAVE)) && save=(--save-dir "$OUT/$NAME.d")  # the final checkpoint alone (--save-every 0)
    PYTHONPATH=$OURS_PYTHONPATH timeout -k 10 "$t" python3 examples/ppo_continuous.py --preset "mjlab-$ROBOT" \
      --env-id "$ENV_ID" --num-envs "$NUM_ENVS" --time-limit-s "$BUDGET_S" --total-timesteps 100000000000 \
      --seed "$SEED" --model-xml "$MODEL_XML" --device cuda --out "$OUT/$NAME.d" "${save[@]}" >"$WORK/$NAME.out" 2>&1
    ;;
esac
status=$?
log "training: exit status $status$( ((status == 124)) && echo ' (timed out: the JSON has the iterations done)')"
tr '\r' '\n' <"$WORK/$NAME.out" | grep -v "^Module \|^Warp \|^   \|^G1 rsl_rl:\|^Go1 rsl_rl:\|^Go1-Velocity\|^G1-Velocity" | tail -25 | tee -a "$LOG"

# one record per run: the run's label and seed, and (PPO example) its JSON copied out with the versions
python3 - "$RUN" "$SEED" "$JSON" "$OUT/$NAME.d" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
from pathlib import Path

run, seed, path, example = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
if run == "ppo-example":
    found = sorted(example.glob("ppo-*.json"))
    if not found:
        sys.exit(f"no JSON from the PPO example in {example}")
    record = json.loads(found[0].read_text())
    try:
        from gym_graphreset.bench.runner import env_versions

        record["versions"] = env_versions()
    except Exception as exc:  # the record still counts without them
        print(f"no versions: {exc}")
    record["rsl_rl_lib"] = None  # the library's own PPO
elif path.is_file():
    record = json.loads(path.read_text())
else:
    sys.exit(f"no JSON at {path}: the run wrote nothing")
record |= {"run": run, "seed": record.get("seed", seed), "driver": "benchmarks/gpu/go1_like_for_like.sh"}
path.write_text(json.dumps(record, indent=1))
rows = [r for r in record["rows"] if r.get("track_lin_vel") is not None]
last = rows[-1] if rows else {}
print(f"{run} seed {seed}: {len(record['rows'])} rows, {last.get('env_steps', 0):,} env steps, "
      f"track_lin_vel {last.get('track_lin_vel')} at {last.get('wall_s', 0):.0f} s; "
      f"rsl-rl-lib {record.get('rsl_rl_lib')}; gpu {record.get('versions', {}).get('gpu')}; wrote {path}")
PY
log "done"
