#!/usr/bin/env bash
# Training like for like with mjlab 1.6, one task per call (TASK), ONE run per invocation, so that each fits one
# GPU command (<= 600 s). Both sides train on mjlab's model file of the robot (go1.xml / g1.xml) with mjlab's PPO
# config for the task, with the same rsl-rl-lib (5.4.2, mjlab's pin: the mjlab kit and the trainers kit carry
# it), and log the same metrics as mjlab's env and rsl_rl's logger compute them. This library's rsl_rl runs keep
# the model file's sensors (--keep-sensors, as mjlab computes them) and run MuJoCo Warp's forward before the
# observations as mjlab's step does in every task (FORWARD, below); each JSON records both:
#
#   TASK=go1          Mjlab-Velocity-Flat-Unitree-Go1 / Go1-Velocity-Flat-v0 (default). Headline:
#                     Episode_Reward/track_linear_velocity (at each step with resets, the reset rows' mean of
#                     episode_sum / episode_length_s; then the mean over the iteration's steps with resets)
#   TASK=g1           Mjlab-Velocity-Flat-Unitree-G1 / G1-Velocity-Flat-v0, the same metric
#   TASK=g1-tracking  Mjlab-Tracking-Flat-Unitree-G1 / G1-Tracking-Flat-v0, both on one clip (MOTION, default the
#                     library's g1_sway.npz). Headline: Metrics/motion/error_body_pos (at each step with resets,
#                     the reset rows' mean of the motion command's last error; then the mean over the
#                     iteration's steps with resets); also the other Metrics/motion/* errors
#   TASK=go1-rough    Mjlab-Velocity-Rough-Unitree-Go1 / Go1-Velocity-Rough-v0. Headline:
#                     Curriculum/terrain_levels/mean (the envs' mean level after each step with resets, averaged
#                     over those steps); also /max and track_linear_velocity
#
#   RUN=mjlab        mjlab's own train loop (benchmarks/gpu/mjlab_train.py, its interpreter: MJ_PYTHONPATH)
#   RUN=stock        rsl_rl PPO + OnPolicyRunner on this library (benchmarks/gpu/rsl_rl_go1.py): the headline row
#   RUN=finalobs     ... with FinalObsPPO (time-outs bootstrapped from the true final observation)
#   RUN=syncfree     ... with stock PPO and SyncFreeOnPolicyRunner (no host read per rollout step)
#   RUN=fast         ... with FastPPO (rsl_rl's update, one host read per update, captured on CUDA) and
#                    SyncFreeOnPolicyRunner: the faster learner with the same algorithm
#   RUN=ppo-example  examples/ppo_continuous.py --preset mjlab-<ROBOT> (this library's own PPO, captured update;
#                    TASK=go1 and g1 only: it logs neither tracking errors nor terrain levels)
# SEED (42; run >= 2 seeds per RUN where time allows), BUDGET_S (240: the training loop's wall-clock, the same
# for every run), NUM_ENVS (4096), DEADLINE_S (570: this whole command, under the 600 s limit), MODEL_XML (default:
# <ROBOT>.xml from the staged mjlab kit), MOTION (TASK=g1-tracking: the clip both sides track), MJ_PYTHONPATH
# (/opt/mjkit/site:/opt/ggkit/site), TRAINERS_SITE (/opt/trainers/site), SAVE (1: this library's runs keep their
# final checkpoint under $OUT/<name>.ckpt/, for `python -m gym_graphreset play` / `export` afterwards; 0: none),
# DEVICE (cuda; cpu runs a few envs of this library's side as a smoke test of the whole command), FORWARD (full:
# mjlab's whole forward before the observations, the same work; declared: only the passes the observations read,
# the same values with less work; off: none, the task's default. RUN=ppo-example trains the task as registered:
# off, the model's sensors removed).
# Kernel compilation and graph capture happen before each training clock starts.
#
# The sequence of calls (one `run` each, back to back: a machine idle ~30 s is given back and a fresh one is
# bare; ../shared/gpu/README.md). Here first, once: ../shared/gpu/make-kit && ../shared/gpu/make-mjlab-kit &&
# bash benchmarks/gpu/make-trainers-kit.sh   (.gpu/part1, .gpu/part2, .gpu/mjlab, .gpu/trainers; git-ignored)
#   1. carry .gpu/part1:                bash .gpu/part1/stage.sh                                      ~1 min
#   2. carry .gpu/part2 .gpu/trainers:  bash .gpu/part2/stage.sh && bash .gpu/trainers/stage.sh       ~1 min
#   3. carry .gpu/mjlab:                bash .gpu/mjlab/stage.sh                                      ~1 min
#   4. no carry, one call per run (each ~BUDGET_S + 2-4 min cold, + ~1 min warm; ~6-8 min at BUDGET_S=240):
#        . /opt/ggkit/env.sh && TASK=go1 RUN=mjlab SEED=42 BUDGET_S=240 bash benchmarks/gpu/like_for_like.sh
#        . /opt/ggkit/env.sh && TASK=go1 RUN=stock SEED=42 BUDGET_S=240 bash benchmarks/gpu/like_for_like.sh
#        ... the same with TASK=g1-tracking, and TASK=go1-rough with BUDGET_S=200 on every run (its cold build
#        also compiles the ray kernels and generates the terrain); RUN=mjlab SEED=43, RUN=stock SEED=43,
#        RUN=finalobs SEED=42, RUN=syncfree SEED=42, RUN=ppo-example SEED=42 (go1, g1) where time allows
#      (set OUT to an output folder.) Steps 1-3 and about four runs take some 30 min of GPU time; run the rest
#      later, staged again (steps 1-3). Compare only runs on the same kind of card (each JSON's versions.gpu;
#      the plot script warns).
#   5. here: copy each call's <TASK>-l4l-<RUN>-s<SEED>.json into one folder per task (e.g.
#      benchmarks/results/g1-tracking-like-for-like) and draw the figure:
#      .venv/bin/python benchmarks/gpu/plot_like_for_like.py benchmarks/results/g1-tracking-like-for-like \
#        --task g1-tracking
# What comes back under $OUT: <TASK>-l4l-<RUN>-s<SEED>.{json,log} (the JSON rewritten after every iteration, so
# a run cut short keeps its curve: the log explains exit status 124 and 137, the JSON records the status as
# exit_status, and the plot script warns of a cut run), for ppo-example its own output folder
# <TASK>-l4l-ppo-example-s<SEED>.d/, and with SAVE=1 the final checkpoint in <TASK>-l4l-<RUN>-s<SEED>.ckpt/ (the
# PPO example's: in its .d/ folder).
# benchmarks/gpu/go1_like_for_like.sh is this script with ROBOT (go1, g1) for TASK.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
TASK=${TASK:-go1}
RUN=${RUN:?set RUN to one of: mjlab stock finalobs syncfree fast ppo-example}
SEED=${SEED:-42}
BUDGET_S=${BUDGET_S:-240}
NUM_ENVS=${NUM_ENVS:-4096}
DEADLINE_S=${DEADLINE_S:-570}
MODEL_XML=${MODEL_XML:-}
MOTION=${MOTION:-}
SAVE=${SAVE:-1}
DEVICE=${DEVICE:-cuda}
FORWARD_GIVEN=${FORWARD:+1}
FORWARD=${FORWARD:-full}
MJ_PYTHONPATH=${MJ_PYTHONPATH-/opt/mjkit/site:/opt/ggkit/site}
TRAINERS_SITE=${TRAINERS_SITE:-/opt/trainers/site}
WORK=${WORK:-/tmp/${TASK}_like_for_like}
NAME="$TASK-l4l-$RUN-s$SEED"
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
case $TASK in
  go1) ROBOT=go1 PEER_TASK=Mjlab-Velocity-Flat-Unitree-Go1 ENV_ID=gym_graphreset/Go1-Velocity-Flat-v0 ;;
  g1) ROBOT=g1 PEER_TASK=Mjlab-Velocity-Flat-Unitree-G1 ENV_ID=gym_graphreset/G1-Velocity-Flat-v0 ;;
  g1-tracking) ROBOT=g1 PEER_TASK=Mjlab-Tracking-Flat-Unitree-G1 ENV_ID=gym_graphreset/G1-Tracking-Flat-v0 ;;
  go1-rough) ROBOT=go1 PEER_TASK=Mjlab-Velocity-Rough-Unitree-Go1 ENV_ID=gym_graphreset/Go1-Velocity-Rough-v0 ;;
  *) log "TASK must be one of: go1 g1 g1-tracking go1-rough, got '$TASK'"; exit 2 ;;
esac
if [[ $RUN == ppo-example && $TASK != go1 && $TASK != g1 ]]; then
  log "RUN=ppo-example trains TASK=go1 or g1 only (it logs no tracking errors or terrain levels), got TASK=$TASK"
  exit 2
fi
motion=()
if [[ $TASK == g1-tracking ]]; then
  MOTION=${MOTION:-gym_graphreset/assets/robots/g1/motions/g1_sway.npz}
  if [[ ! -f $MOTION ]]; then
    log "MOTION must be a clip file (mjlab's npz), got '$MOTION'"
    exit 2
  fi
  MOTION=$(realpath "$MOTION")
  motion=(--motion-file "$MOTION")
elif [[ -n $MOTION ]]; then
  log "MOTION is for TASK=g1-tracking (the clip to track), got TASK=$TASK"
  exit 2
fi
case $SAVE in
  0 | 1) ;;
  *) log "SAVE must be 0 or 1, got '$SAVE'"; exit 2 ;;
esac
case $FORWARD in
  off | declared | full) ;;
  *) log "FORWARD must be one of: off declared full (MuJoCo Warp's forward before the observations), got '$FORWARD'"
    exit 2 ;;
esac
if [[ $RUN == ppo-example ]]; then
  if [[ -n $FORWARD_GIVEN && $FORWARD != off ]]; then
    log "RUN=ppo-example trains the task as registered (the example takes no forward before the observations): \
leave FORWARD unset or set it to off, got FORWARD=$FORWARD"
    exit 2
  fi
  FORWARD=off
fi
if ((BUDGET_S + 60 > DEADLINE_S)); then
  log "BUDGET_S=$BUDGET_S leaves no time for setup within DEADLINE_S=$DEADLINE_S (cold: ~150 s): lower it"
  exit 2
fi
rsl_version() {  # rsl-rl-lib's version on a PYTHONPATH (without importing rsl_rl)
  PYTHONPATH=$1 python3 -c 'from importlib.metadata import version; print(version("rsl-rl-lib"))' 2>/dev/null || echo none
}
ours_side="forward before obs $FORWARD, model sensors kept"
[[ $RUN == ppo-example ]] && ours_side="the task as registered: no forward before obs, model sensors removed"
[[ $RUN == mjlab ]] && ours_side="mjlab's env"
log "task $TASK ($PEER_TASK / $ENV_ID${MOTION:+, clip $MOTION}), run $RUN ($ours_side), seed $SEED, \
budget $BUDGET_S s, $NUM_ENVS envs, deadline $DEADLINE_S s; \
$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
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
      --task "$PEER_TASK" --num-envs "$NUM_ENVS" --seed "$SEED" --device "$DEVICE" --out "$OUT" --name "$NAME.json" \
      "${motion[@]}" >"$WORK/$NAME.out" 2>&1
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
      --device "$DEVICE" --algorithm "$algorithm" --runner "$runner" --out "$OUT" --name "$NAME.json" \
      --keep-sensors --forward-before-obs "$FORWARD" "${motion[@]}" "${save[@]}" >"$WORK/$NAME.out" 2>&1
    ;;
  ppo-example)
    save=()
    ((SAVE)) && save=(--save-dir "$OUT/$NAME.d")  # the final checkpoint alone (--save-every 0)
    PYTHONPATH=$OURS_PYTHONPATH timeout -k 10 "$t" python3 examples/ppo_continuous.py --preset "mjlab-$ROBOT" \
      --env-id "$ENV_ID" --num-envs "$NUM_ENVS" --time-limit-s "$BUDGET_S" --total-timesteps 100000000000 \
      --seed "$SEED" --model-xml "$MODEL_XML" --device "$DEVICE" --out "$OUT/$NAME.d" "${save[@]}" \
      >"$WORK/$NAME.out" 2>&1
    ;;
esac
status=$?
case $status in
  0) why="" ;;
  124) why=" (timed out: still training when the $t s timeout sent TERM; the JSON holds the iterations done, \
without 'stopped': a run cut short before its budget)" ;;
  137) why=" (killed: still running 10 s after the $t s timeout's TERM, or by the out-of-memory killer; the JSON \
holds the iterations done, without 'stopped': a run cut short before its budget)" ;;
  *) why=" (failed: the output below says why)" ;;
esac
log "training: exit status $status$why"
tr '\r' '\n' <"$WORK/$NAME.out" \
  | grep -v "^Module \|^Warp \|^   \|^G1 rsl_rl:\|^Go1 rsl_rl:\|^Go1-Velocity\|^G1-Velocity\|^G1-Tracking" \
  | tail -25 | tee -a "$LOG"

# one record per run: the run's label and seed, and (PPO example) its JSON copied out with the versions
PYTHONPATH=$OURS_PYTHONPATH python3 - "$RUN" "$SEED" "$JSON" "$OUT/$NAME.d" "$TASK" "$status" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
from pathlib import Path

run, seed, path, example, task = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]
status = int(sys.argv[6])  # the training's exit status: 124 timed out, 137 killed (the curve is cut short)
headline = {"g1-tracking": "error_body_pos", "go1-rough": "terrain_levels"}.get(task, "track_lin_vel")
if run == "ppo-example":
    found = sorted(example.glob("ppo-*.json"))
    if not found:
        sys.exit(f"no JSON from the PPO example in {example}")
    record = json.loads(found[0].read_text())
    from gym_graphreset.bench.results import env_versions  # this library's: an import error is a broken checkout

    record["versions"] = env_versions()
    record["rsl_rl_lib"] = None  # the library's own PPO
    record |= {"keep_sensors": False, "forward_before_obs": "off"}  # the task as registered
    if status == 0:  # it stops at --time-limit-s alone (its --total-timesteps is out of reach): the budget spent
        record["stopped"] = "budget"
elif path.is_file():
    record = json.loads(path.read_text())
else:
    sys.exit(f"no JSON at {path}: the run wrote nothing")
record |= {"run": run, "seed": record.get("seed", seed), "like_for_like_task": task, "exit_status": status,
           "driver": "benchmarks/gpu/like_for_like.sh"}
path.write_text(json.dumps(record, indent=1))
rows = [r for r in record["rows"] if r.get(headline) is not None]
last = rows[-1] if rows else {}
why = ([f"exit status {status}"] if status else []) + ([] if "stopped" in record else ["no 'stopped' in its JSON"])
cut = f" (CUT SHORT: {', '.join(why)})" if why else ""
print(f"{task} {run} seed {seed}: {len(record['rows'])} rows{cut}, {last.get('env_steps', 0):,} env steps, "
      f"{headline} {last.get(headline)} at {last.get('wall_s', 0):.0f} s; "
      f"rsl-rl-lib {record.get('rsl_rl_lib')}; gpu {record.get('versions', {}).get('gpu')}; wrote {path}")
PY
recorded=${PIPESTATUS[0]}
if ((recorded != 0)); then
  log "recording the run failed (exit status $recorded, the error above): $JSON is not annotated"
  exit "$recorded"
fi
log "done"
