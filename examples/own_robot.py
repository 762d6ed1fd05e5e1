"""Your own robot on MuJoCo Warp: an MJCF quadruped, mjlab's velocity task on it, checked, registered, trained.

    python examples/own_robot.py                   # build it, check it, time a few steps
    python examples/ppo_continuous.py --env-id own_robot:MyLab/Quadruped-Velocity-v0 --num-envs 4096 \\
        --preset mjlab-go1 --save-dir runs/my_quadruped --device cuda
    python -m gym_graphreset play runs/my_quadruped/model_<N>.pt --env-id examples.own_robot:MyLab/Quadruped-Velocity-v0
    python -m gym_graphreset export runs/my_quadruped/model_<N>.pt --out exported/my_quadruped

``docs/own-robot.md`` walks through it. Importing this module registers the task; ``own_robot:<id>`` makes
Gymnasium import it first, from any script (``examples/`` is on ``sys.path`` for scripts run from there;
from the repository root, ``examples.own_robot:<id>``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.managers.registry import register_task
from gym_graphreset.tasks import LeggedRobot, ManagerBasedEnv, RewardTerm, TaskCfg, velocity_task

ENV_ID = "MyLab/Quadruped-Velocity-v0"
MODEL = Path(__file__).with_name("assets") / "my_quadruped.xml"
LEGS = ("FL", "FR", "RL", "RR")
JOINTS = tuple(f"{leg}_{j}_joint" for leg in LEGS for j in ("hip", "knee"))
KP, EFFORT = 25.0, 12.0  # the MJCF's position actuators

ROBOT = LeggedRobot(
    model=str(MODEL),
    joint_names=JOINTS,
    default_joint_pos={j: 0.7 if "hip" in j else -1.4 for j in JOINTS},
    action_scale=(0.25 * EFFORT / KP,) * len(JOINTS),  # mjlab's rule: a quarter of the torque limit's angle
    base_body="trunk",
    init_base_height=0.26,
    imu_site="imu",
    foot_sites=tuple(f"{leg}_foot" for leg in LEGS),
    foot_geoms=tuple(f"{leg}_foot_collision" for leg in LEGS),
    foot_contact_sensors=tuple(f"{leg}_foot_contact" for leg in LEGS),
    com_body="trunk",
)


def trunk_height_penalty(env: ManagerBasedEnv, target: float) -> torch.Tensor:
    """A term of your own: squared distance of the trunk's height from ``target`` (full width, no host read)."""
    return (env.qpos[:, 2] - target).square()


def my_quadruped_task() -> TaskCfg:
    """mjlab's flat velocity task on the quadruped, with one reward of its own and a gentler push."""
    cfg = velocity_task(ROBOT)
    cfg = cfg.with_term("rewards", "trunk_height", RewardTerm(trunk_height_penalty, -10.0, {"target": 0.25}))
    cfg = cfg.replace_term("events", "push_robot", params={"linear": (0.3, 0.3, 0.2), "angular": (0.3, 0.3, 0.5)})
    return cfg.replace_term(
        "rewards", "foot_clearance", params={**cfg.rewards["foot_clearance"].params, "target_height": 0.06}
    )


register_task(ENV_ID, my_quadruped_task, replace=True)


def check(num_envs: int = 8, steps: int = 60) -> None:
    """What to check before training: masked == the reference selected path, bit for bit; no host read."""
    from gym_graphreset.testing import check_env

    def make() -> ManagerBasedEnv:  # short episodes, so that resets happen inside the compared steps
        return ManagerBasedEnv(my_quadruped_task(), num_envs, device="cpu", max_episode_steps=40)

    print(check_env(make, steps=steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=64, help="worlds in the timing run (default: 64)")
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto (default: auto)")
    parser.add_argument("--no-check", action="store_true", help="skip the masked == selected check")
    args = parser.parse_args()
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    inner = ManagerBasedEnv(my_quadruped_task(), args.num_envs, device=device)
    for group, cols in inner.describe()["observations"].items():
        print(f"obs[{group!r}]:", ", ".join(f"{t} {a}:{b}" for t, (a, b) in cols.items()))
    if not args.no_check:
        check()
    env = FixedShapeAutoresetVectorEnv(inner, "step_graph" if device.type == "cuda" else "masked_persistent")
    env.reset(seed=0)
    action = torch.zeros(args.num_envs, len(JOINTS), device=device)
    env.step(action)
    start = time.perf_counter()
    for _ in range(50):
        env.step(action)
    if device.type == "cuda":
        torch.cuda.synchronize()
    rate = 50 * args.num_envs / (time.perf_counter() - start)
    print(f"{ENV_ID} x{args.num_envs} on {device}: {rate:,.0f} env-steps/s; train it with examples/ppo_continuous.py")
    env.close()


if __name__ == "__main__":
    main()
