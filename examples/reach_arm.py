"""A task that is not a legged robot: a two-link arm reaching a commanded point, with a command of its own.

    python examples/reach_arm.py          # build it and check it
    cd examples && python -m gym_graphreset bench --env-id reach_arm:MyLab/Arm-Reach-v0 --num-envs 1024  # time it
    python examples/ppo_continuous.py --env-id reach_arm:MyLab/Arm-Reach-v0 --num-envs 1024 \\
        --total-timesteps 5000000 --save-dir runs/arm --device cuda

``docs/tasks.md`` ("A task of another kind") walks through it: a ``TaskCfg`` with one observation group (the
env then returns a plain tensor with a ``Box`` space), the library's joint terms, and a command written
here (:class:`TargetCommand`: a point drawn at every reset from the reset draws it declares).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import torch

from gym_graphreset.managers.draws import span
from gym_graphreset.managers.registry import register_task
from gym_graphreset.tasks import (
    EventTerm,
    JointPositionAction,
    ManagerBasedEnv,
    ObsGroup,
    ObsTerm,
    RewardTerm,
    TaskCfg,
    TerminationTerm,
    mdp,
)

ENV_ID = "MyLab/Arm-Reach-v0"
JOINTS = ("shoulder", "elbow")
ARM_XML = """
<mujoco model="arm">
  <compiler angle="radian"/>
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <light pos="0 0 3"/>
    <geom name="table" type="plane" size="1 1 0.1" rgba="0.8 0.8 0.8 1"/>
    <body name="upper" pos="0 0 0.05">
      <joint name="shoulder" axis="0 0 1" range="-3 3" damping="0.5"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="1" contype="0" conaffinity="0"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="elbow" axis="0 0 1" range="-2.5 2.5" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.025" mass="0.5" contype="0" conaffinity="0"/>
        <site name="fingertip" pos="0.4 0 0" size="0.02"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="shoulder" joint="shoulder" kp="20" kv="1"/>
    <position name="elbow" joint="elbow" kp="10" kv="0.5"/>
  </actuator>
</mujoco>
"""


@dataclass(frozen=True)
class TargetCommandCfg:
    """A point in the arm's plane, uniform in a box, drawn at every reset (a :class:`CommandCfg`)."""

    x: tuple[float, float] = (-0.7, 0.7)
    y: tuple[float, float] = (-0.7, 0.7)

    def __post_init__(self) -> None:
        for name, (low, high) in (("x", self.x), ("y", self.y)):
            if not low <= high:
                raise ValueError(f"TargetCommandCfg: `{name}` must be (low, high) with low <= high, got {(low, high)}")

    def build(self, env: ManagerBasedEnv) -> TargetCommand:
        return TargetCommand(self, env)


class TargetCommand:
    """The target of every row (a :class:`~gym_graphreset.managers.protocols.CommandTerm`).

    ``reset_draws = 2``: the env hands :meth:`reset` two uniform words per row, drawn from the row's episode
    (so the masked path and the selected-row path draw the same target); ``step_draws = 0``: it never
    changes mid-episode. Every method writes full width through the mask: no host read.
    """

    reset_draws = 2
    step_draws = 0

    def __init__(self, cfg: TargetCommandCfg, env: ManagerBasedEnv) -> None:
        self.cfg, self.env = cfg, env
        self.command = torch.zeros(env.num_envs, 2, device=env.device)

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        drawn = torch.stack((span(u[:, 0], *self.cfg.x), span(u[:, 1], *self.cfg.y)), dim=1)
        self.command.copy_(torch.where(rows.unsqueeze(1), drawn, self.command))

    def step(self, u: torch.Tensor) -> None:
        """Nothing to do between resets."""

    def metrics(self) -> dict[str, torch.Tensor]:
        return {"distance": fingertip_distance(self.env, "target")}


def fingertip_distance(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """Distance [m] of the fingertip from the commanded point, in the plane, ``(n,)``."""
    tip = env.site_xpos[:, env.site_ids(("fingertip",))[0], :2]
    return torch.linalg.vector_norm(tip - env.commands[command_name].command, dim=1)


def reach_task() -> TaskCfg:
    policy = ObsGroup(
        {
            "joint_pos": ObsTerm(mdp.joint_pos_rel),
            "joint_vel": ObsTerm(mdp.joint_vel),
            "target": ObsTerm(mdp.generated_commands, {"command_name": "target"}),
            "actions": ObsTerm(mdp.last_action),
        }
    )
    return TaskCfg(
        model=ARM_XML,
        decimation=2,
        episode_length_s=3.0,
        actions={"joint_pos": JointPositionAction(JOINTS)},
        observations={"policy": policy},
        commands={"target": TargetCommandCfg()},
        rewards={
            "distance": RewardTerm(fingertip_distance, -1.0, {"command_name": "target"}),
            "action_rate": RewardTerm(mdp.action_rate_l2, -0.01),
        },
        terminations={"time_out": TerminationTerm(mdp.time_out, time_out=True)},
        events={
            "reset_joints": EventTerm(mdp.reset_joints_by_offset, "reset", {"position_range": (-1.0, 1.0)}, draws=2)
        },
    )


register_task(ENV_ID, reach_task, replace=True)  # replace: run as a script, then imported by `reach_arm:<id>`


def main() -> None:
    """Check the task as a user should before training, then show what the policy observes."""
    from gym_graphreset.testing import check_env

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print(check_env(lambda: ManagerBasedEnv(reach_task(), 8, device="cpu", max_episode_steps=40)))
    env = ManagerBasedEnv(reach_task(), 2, device="cpu")
    print(f"{ENV_ID}: observation {env.single_observation_space}, action {env.single_action_space}")
    env.close()


if __name__ == "__main__":
    main()
