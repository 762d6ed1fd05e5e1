#!/usr/bin/env bash
# The GPU runs behind docs/benchmarks.md (one NVIDIA H200; 16 CPU cores for the CPU engines), in phases
# that each take under 10 minutes. From the repository root, with the package and its extras installed:
#   OUT=/some/dir bash benchmarks/h200.sh tests|light|heavy|sizes|baselines|compile|ppo
# Logs, JSON and PNGs go to $OUT (flat, a few files per phase).
set -uo pipefail
phase=${1:?usage: h200.sh tests|light|heavy|sizes|baselines|compile|ppo|trainers|rsl_rl}
OUT=${OUT:?set OUT to an output folder}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1
bench() { python3 -m gym_graphreset bench --no-progress --out "$OUT" "$@"; }
case $phase in
  tests)  # every CUDA test but the 10k-step memory ones, then the light workload's modes at 4096
    python3 -m pytest -m "cuda and not slow" tests -q -rs -s -p no:cacheprovider --durations=10 2>&1 | tee "$OUT/cuda-tests.log"
    bench --env-id gym_graphreset/Ant-v5 --num-envs 4096 --steps 200 2>&1 | tee "$OUT/bench-ant.log" ;;
  heavy)  # the reset-heavy workload, the memory check, what users run today
    bench --env-id gym_graphreset/ResetHeavyHalfCheetah-v0 --num-envs 512,4096 --steps 300 \
      --async-baseline Ant-v5 --async-envs 16,64 2>&1 | tee "$OUT/bench-heavy.log"
    python3 -m pytest -m "cuda and slow" tests -q -s -p no:cacheprovider 2>&1 | tee "$OUT/cuda-slow-tests.log" ;;
  light)  # the light workload at a latency-bound size
    bench --env-id gym_graphreset/Ant-v5 --num-envs 512 --steps 200 2>&1 | tee "$OUT/bench-ant-512.log" ;;
  sizes)  # env-steps/s over batch sizes: bare physics, non-physics, selected, whole-step graph
    for task in Ant HalfCheetah Humanoid; do
      bench --env-id "gym_graphreset/$task-v5" --num-envs 1024,4096,16384,65536 --steps 50 \
        --modes "selected,step graph" 2>&1 | tee -a "$OUT/bench-sizes.log"
    done ;;
  baselines)  # same-task CPU baselines (EnvPool's best, Gymnasium AsyncVectorEnv) next to the GPU modes over sizes.
    # EnvPool may sit in its own site directory (ENVPOOL_SITE), installed without the Atari/MyoSuite
    # assets: stub those registries before importing envpool.
    export PYTHONPATH=$PYTHONPATH:${ENVPOOL_SITE:-/opt/epkit/site}
    for task in Ant HalfCheetah; do
      python3 -c 'import sys, types; sys.modules["envpool.entry"] = types.ModuleType("envpool.entry")
import envpool, envpool.mujoco.gym.registration
from gym_graphreset.cli import main; raise SystemExit(main(sys.argv[1:]))' \
        bench --no-progress --out "$OUT" --env-id "gym_graphreset/$task-v5" --num-envs 512,4096,16384,65536 \
        --steps 50 --modes "selected,step graph" --cpu-baseline envpool,gymnasium-async --async-envs 16,64 \
        --envpool-envs 64,256,512,1024 2>&1 | tee -a "$OUT/bench-baselines.log"
    done ;;
  compile)  # the reset-heavy workload with and without compile_step (one CLI run per size: JSON per size), the
    # compiled step graph's CUDA tests (canary, statistical equivalence), then Ant-4096 with and without compile
    modes="selected,step graph,step graph+compile"
    heavy=(python3 -m gym_graphreset bench --no-progress --env-id gym_graphreset/ResetHeavyHalfCheetah-v0 --steps 200)
    timeout 240 "${heavy[@]}" --num-envs 4096 --modes "$modes" --out "$OUT/reset-heavy-4096" 2>&1 | tee -a "$OUT/bench-compile.log"
    timeout 200 python3 -m pytest tests/capture/test_compiling.py -m cuda -q -s -p no:cacheprovider -p no:logging 2>&1 \
      | grep -v "^Module\|^Warp\|^   \|settotalmass" | tee "$OUT/compile-tests.log"
    timeout 200 "${heavy[@]}" --num-envs 512 --modes "$modes" --out "$OUT/reset-heavy-512" 2>&1 | tee -a "$OUT/bench-compile.log"
    timeout 200 "${heavy[@]}" --num-envs 16384 --modes "$modes" --out "$OUT/reset-heavy-16384" 2>&1 | tee -a "$OUT/bench-compile.log"
    timeout 200 python3 -m gym_graphreset bench --no-progress --env-id gym_graphreset/Ant-v5 --num-envs 4096 --steps 200 \
      --modes "$modes" --out "$OUT/ant-4096" 2>&1 | tee "$OUT/bench-ant.log" ;;
  ppo)  # PPO on Ant-v5 x4096: the eager update (before) and the captured update (after), in one run
    python3 examples/ppo_continuous.py --env-id gym_graphreset/Ant-v5 --num-envs 4096 --device cuda \
      --update-graph false --time-limit-s 60 --out "$OUT" 2>&1 | tr '\r' '\n' | grep -v "^Module" | tail -4 | tee "$OUT/ppo.log"
    python3 examples/ppo_continuous.py --env-id gym_graphreset/Ant-v5 --num-envs 4096 --device cuda \
      --time-limit-s 200 --out "$OUT" 2>&1 | tr '\r' '\n' | grep -v "^Module" | tail -4 | tee -a "$OUT/ppo.log" ;;
  trainers)  # the adapters' CUDA tests (step_graph); needs the trainers kit on PYTHONPATH (benchmarks/gpu/make-trainers-kit.sh)
    python3 -m pytest -m cuda tests/integrations/test_rsl_rl.py tests/integrations/test_skrl.py tests/core/test_buffers.py tests/integrations/test_cleanrl.py \
      tests/integrations/test_sb3.py tests/integrations/test_torchrl.py -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/trainers-cuda-tests.log" ;;
  rsl_rl)  # rsl_rl's OnPolicyRunner on Ant-v5 x4096 through the adapter, whole-step graph, 200 s of training
    python3 benchmarks/gpu/rsl_rl_ant.py --seconds 200 --out "$OUT/rsl_rl_ant.json" 2>&1 | tr '\r' '\n' \
      | grep -v "^Module\|^Actor\|^Critic" | tail -6 | tee "$OUT/rsl_rl_ant.log" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
