#!/usr/bin/env bash
# Go1 velocity tracking on the GPU: this library's PPO (examples/ppo_continuous.py with mjlab's PPO settings,
# --preset mjlab-go1) for a wall-clock budget, then its tracking curve on one figure with mjlab's own run
# (benchmarks/gpu/mjlab_train.py's JSON) and when it reached mjlab's final tracking reward.
# On the GPU machine, from the repository root, after staging the ggkit (../shared/gpu/README.md):
#   . /opt/ggkit/env.sh && OUT=/some/dir bash benchmarks/gpu/go1_train.sh
# BUDGET_S (240, mjlab's budget), NUM_ENVS (4096), MJLAB_JSON (mjlab's run), MODEL_XML (a Go1 MJCF with mjlab's
# names, e.g. mjlab's go1.xml, passed as --model-xml and recorded in the JSON; default: the library's own model). Kernel compilation and the graph
# captures come before the budget (about 2-3 minutes when cold). What comes back under $OUT:
# go1-train.log, ppo-Go1-Velocity-Flat-v0-<n>.{json,npz,png}, go1-train-vs-mjlab.png.
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
BUDGET_S=${BUDGET_S:-240}
NUM_ENVS=${NUM_ENVS:-4096}
MJLAB_JSON=${MJLAB_JSON:-benchmarks/results/h200-mjlab-train-Go1-4096.json}
MODEL_XML=${MODEL_XML:-}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1
mkdir -p "$OUT"
timeout $((BUDGET_S + 300)) python3 examples/ppo_continuous.py --preset mjlab-go1 --num-envs "$NUM_ENVS" \
  --time-limit-s "$BUDGET_S" --device cuda --out "$OUT" ${MODEL_XML:+--model-xml "$MODEL_XML"} 2>&1 | tr '\r' '\n' | grep -v "^Module" | tail -6 \
  | tee "$OUT/go1-train.log"
python3 - "$OUT/ppo-Go1-Velocity-Flat-v0-$NUM_ENVS.json" "$MJLAB_JSON" "$OUT/go1-train-vs-mjlab.png" <<'PY' 2>&1 \
  | tee -a "$OUT/go1-train.log"
import sys
from pathlib import Path

from gym_graphreset.bench.plotting import final_level, load_training_curve, plot_training_curves, time_to_reach

ours, mjlab, png = (Path(a) for a in sys.argv[1:])
runs = {"gym_graphreset": ours}
reference = None
if mjlab.is_file():
    runs["mjlab"], reference = mjlab, "mjlab"
    theirs = load_training_curve(mjlab)
    level, budget = final_level(theirs), theirs[-1]["wall_s"]
    reached = time_to_reach(load_training_curve(ours), level)
    print(f"mjlab: track_lin_vel {level:.3f} at the end of its {budget:.0f} s; gym_graphreset: "
          + (f"reached it at {reached:.1f} s ({reached / budget:.2f} of mjlab's time)" if reached is not None
             else "did not reach it within its budget"))
else:
    print(f"no mjlab run at {mjlab}: the figure has this library's curve only")
title = "Go1 flat velocity tracking, one H200"
print(f"figure: {png}" if plot_training_curves(runs, png, title, reference=reference) else "no figure")
PY
