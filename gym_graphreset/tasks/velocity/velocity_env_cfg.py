"""Legged velocity tracking on flat ground, for any robot: mjlab 1.6's ``make_velocity_env_cfg`` as a TaskCfg.

:func:`velocity_task` takes a :class:`LeggedRobot` (names and numbers of one robot) and returns the whole
task: the twist command with heading, standing and forward-only rows and its speed curriculum, mjlab's
observation groups (a noisy ``policy`` group with encoder-biased joints, a clean ``critic`` group with foot
state), every reward term and weight, the fall and time-out terminations, and the reset, push and
domain-randomisation events. A robot's own config then changes what differs for it (see
:func:`gym_graphreset.tasks.velocity.config.go1.env_cfgs.go1_velocity_flat_cfg`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gym_graphreset import mdp
from gym_graphreset.assets.robot_model import RobotModel
from gym_graphreset.managers.binding import FINITE, number
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.terms import (
    CurriculumTerm,
    EventTerm,
    JointPositionAction,
    MetricTerm,
    ObsGroup,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
    UniformNoise,
)
from gym_graphreset.terrains.terrain_generator import TerrainCfg, TerrainGeneratorCfg

__all__ = ["LeggedRobot", "on_rough_terrain", "robot_on_terrain", "velocity_task"]


@dataclass(frozen=True)
class LeggedRobot:
    """What the velocity task needs to know of a legged robot (names as in its MJCF)."""

    model: str | Callable[[], str]
    """The MJCF: a path, a function returning its text, or a
    :class:`~gym_graphreset.assets.robot_model.RobotModel` (then :meth:`with_model` varies its file)."""
    joint_names: tuple[str, ...]
    """Actuated joints in action order (one position actuator each)."""
    default_joint_pos: Mapping[str, float]
    action_scale: tuple[float, ...]
    base_body: str
    init_base_height: float
    imu_site: str
    foot_sites: tuple[str, ...]
    foot_geoms: tuple[str, ...]
    foot_contact_sensors: tuple[str, ...]
    """MuJoCo ``contact`` sensors of the feet against the floor (found, net force)."""
    com_body: str
    """The body whose centre of mass the ``base_com`` event shifts."""
    njmax: int | None = None
    nconmax: int | None = None

    def __post_init__(self) -> None:
        k = len(self.joint_names)
        if not number(size=k).ok(self.action_scale):
            raise ValueError(
                f"LeggedRobot: `action_scale` must be {number(size=k).text} (one per joint), got {self.action_scale!r}"
            )
        sites, sensors = len(self.foot_sites), len(self.foot_contact_sensors)
        if sites == 0 or sites != sensors or not self.foot_geoms:
            raise ValueError(
                f"LeggedRobot: one foot site and one contact sensor per foot, and the feet's collision geoms; got "
                f"{sites} foot_sites, {sensors} foot_contact_sensors, {len(self.foot_geoms)} foot_geoms"
            )
        if not FINITE.ok(self.init_base_height):
            raise ValueError(f"LeggedRobot: `init_base_height` must be {FINITE.text}, got {self.init_base_height!r}")

    def with_model(self, model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> LeggedRobot:
        """This robot on another MJCF file of it (``None``: the package's own), its own sensors kept or not.

        One edit of its :class:`~gym_graphreset.assets.robot_model.RobotModel`; the builder applies the task's
        settings to that file. Refused for a model given as a path or text (give that model instead).
        """
        if not isinstance(self.model, RobotModel):
            raise ValueError(
                f"LeggedRobot: `model` is a {type(self.model).__name__}, not a RobotModel: another model file is "
                "another `model`"
            )
        return replace(self, model=replace(self.model, model_xml=model_xml, keep_sensors=keep_sensors))


def velocity_task(robot: LeggedRobot) -> TaskCfg:
    """Mjlab 1.6's flat velocity task for ``robot`` (its base numbers; robots override what they change)."""
    twist = "twist"
    feet = {"sites": robot.foot_sites}
    gate = {"command_name": twist, "command_threshold": 0.05}

    def noisy(func: Callable[..., object], noise: float, **params: object) -> ObsTerm:
        return ObsTerm(func, params=params, noise=UniformNoise(-noise, noise))

    policy = {
        "base_lin_vel": noisy(mdp.imu_lin_vel, 0.5, site=robot.imu_site),
        "base_ang_vel": noisy(mdp.base_ang_vel, 0.2),
        "projected_gravity": noisy(mdp.projected_gravity, 0.05),
        "joint_pos": noisy(mdp.joint_pos_rel, 0.01, biased=True),
        "joint_vel": noisy(mdp.joint_vel, 1.5),
        "actions": ObsTerm(mdp.last_action),
        "command": ObsTerm(mdp.generated_commands, params={"command_name": twist}),
    }
    critic = {
        **{k: ObsTerm(t.func, params=t.params) for k, t in policy.items()},
        "joint_pos": ObsTerm(mdp.joint_pos_rel),
        "foot_height": ObsTerm(mdp.site_height, params=feet),
        "foot_air_time": ObsTerm(mdp.contact_air_time, params={"sensor_name": "feet_contact"}),
        "foot_contact": ObsTerm(mdp.contact_found, params={"sensor_name": "feet_contact"}),
        "foot_contact_forces": ObsTerm(mdp.contact_force_log, params={"sensor_name": "feet_contact"}),
    }
    contact = {"sensor_name": "feet_contact"}
    rewards = {
        "track_linear_velocity": RewardTerm(
            mdp.track_linear_velocity, 2.0, {"std": math.sqrt(0.25), "command_name": twist}
        ),
        "track_angular_velocity": RewardTerm(
            mdp.track_angular_velocity, 2.0, {"std": math.sqrt(0.5), "command_name": twist}
        ),
        "upright": RewardTerm(mdp.upright, 1.0, {"std": math.sqrt(0.2)}),
        "pose": RewardTerm(
            mdp.VariablePosture,
            1.0,
            {
                "std_standing": 0.05,
                "std_walking": 0.3,
                "std_running": 0.6,
                "walking_threshold": 0.05,
                "running_threshold": 1.5,
                "command_name": twist,
            },
        ),
        "dof_pos_limits": RewardTerm(mdp.joint_pos_limits, -1.0),
        "action_rate_l2": RewardTerm(mdp.action_rate_l2, -0.1),
        "foot_clearance": RewardTerm(mdp.feet_clearance, -2.0, {**feet, "target_height": 0.1, **gate}),
        "foot_swing_height": RewardTerm(mdp.FootSwingHeight, -0.25, {**feet, **contact, "target_height": 0.1, **gate}),
        "foot_slip": RewardTerm(mdp.feet_slip, -0.1, {**feet, **contact, **gate}),
        "soft_landing": RewardTerm(mdp.soft_landing, -1e-5, {**contact, **gate}),
    }
    events = {
        "reset_base": EventTerm(
            mdp.reset_root_state_uniform, "reset", {"xy": 0.5, "z": (0.01, 0.05), "yaw": 3.14}, draws=4
        ),
        "reset_robot_joints": EventTerm(
            mdp.reset_joints_by_offset, "reset", {"position_range": (0.0, 0.0)}, draws=len(robot.joint_names)
        ),
        "push_robot": EventTerm(
            mdp.push_by_setting_velocity,
            "interval",
            {"linear": (0.5, 0.5, 0.4), "angular": (0.52, 0.52, 0.78)},
            draws=6,
            interval_range_s=(1.0, 3.0),
        ),
        "foot_friction": EventTerm(
            mdp.randomize_geom_friction,
            "startup",
            {"geoms": robot.foot_geoms, "slide": (0.3, 1.2), "spin": (1e-4, 2e-2), "roll": (1e-5, 5e-3)},
            draws=3,
            model_fields=("geom_friction",),
        ),
        "encoder_bias": EventTerm(mdp.randomize_encoder_bias, "startup", {"bias": 0.015}, draws=len(robot.joint_names)),
        "base_com": EventTerm(
            mdp.randomize_body_com,
            "startup",
            {"body": robot.com_body, "offset": (0.025, 0.025, 0.03)},
            draws=3,
            model_fields=("body_ipos",),
            recompute="set_const",  # mjlab's: inverse weights (contact softness) follow the shifted COM
        ),
    }
    return TaskCfg(
        model=robot.model,
        decimation=4,
        episode_length_s=20.0,
        actions={
            # the target's offset is the biased encoder's zero, as mjlab's JointPositionAction writes it
            "joint_pos": JointPositionAction(robot.joint_names, scale=robot.action_scale, subtract_encoder_bias=True)
        },
        observations={"policy": ObsGroup(policy), "critic": ObsGroup(critic, enable_corruption=False)},
        rewards=rewards,
        terminations={
            "time_out": TerminationTerm(mdp.time_out, time_out=True),
            "fell_over": TerminationTerm(mdp.bad_orientation, {"limit_angle": math.radians(70.0)}),
        },
        events=events,
        commands={
            twist: mdp.VelocityCommandCfg(
                velocity_stages=(
                    (0, (-1.0, 1.0), (-0.5, 0.5)),
                    (5000 * 24, (-1.5, 2.0), (-0.7, 0.7)),
                    (10000 * 24, (-2.0, 3.0), (-0.7, 0.7)),
                ),
                rel_forward_envs=0.2,
            )
        },
        sensors={"feet_contact": mdp.ContactSensorCfg(robot.foot_contact_sensors)},
        default_joint_pos=robot.default_joint_pos,
        soft_joint_limit_factor=0.9,
        base_body=robot.base_body,
        init_base_height=robot.init_base_height,
        refresh="kinematics",  # the critic reads foot heights (site_xpos) after a reset
        njmax=robot.njmax,
        nconmax=robot.nconmax,
    )


def on_rough_terrain(
    flat: TaskCfg,
    *,
    model: Callable[[], str],
    scan_body: str,
    geom_group: int,
    terrain: TerrainCfg,
    feet: mdp.TerrainHeightSensorCfg | None = None,
) -> TaskCfg:
    """What mjlab's rough velocity config adds to a flat one: the terrain and its scan, spawn and curriculum.

    ``model`` builds the robot on the terrain (its MJCF text); ``terrain`` is the
    :class:`~gym_graphreset.terrains.terrain_generator.TerrainCfg` task part; the height scan (a 1.6 x 1.0 m grid at
    0.1 m under ``scan_body``, cast against ``geom_group``) enters both observation groups right after the
    command (noise +-0.1 in ``policy``, scaled by 1/5 m); rows spawn on their terrain cell; the terrain-level
    curriculum and metric are added, and leaving the terrain ends an episode as a time-out. With ``feet`` (a
    ring of rays under each foot site, mjlab's ``foot_height_scan``) the foot terms read each foot's
    clearance above the terrain instead of its world height: the critic's ``foot_height``, ``foot_clearance``
    and ``foot_swing_height``. Both ray sensors cast as mjlab's ``sense()`` does (``cast="before_obs"``):
    once per observation, so rewards read the scan made before the step's physics. A robot's rough config
    changes the rest (terminations, contact terms, solver budgets).
    """
    scan = {"sensor_name": "terrain_scan"}

    def with_scan(group: str, noise: UniformNoise | None) -> ObsGroup:
        items = list(flat.observations[group].terms.items())
        at = [name for name, _ in items].index("command") + 1  # mjlab's order: the scan right after the command
        items.insert(at, ("height_scan", ObsTerm(mdp.height_scan, scan, noise=noise, scale=1 / 5.0)))
        return replace(flat.observations[group], terms=dict(items))

    rewards, sensors = dict(flat.rewards), dict(flat.sensors)
    critic = with_scan("critic", None)
    if feet is not None:
        height = {"height_sensor_name": "foot_height_scan"}
        sensors["foot_height_scan"] = replace(feet, cast="before_obs")
        critic = replace(
            critic,
            terms={
                **critic.terms,
                "foot_height": ObsTerm(mdp.terrain_height, params={"sensor_name": "foot_height_scan"}),
            },
        )
        for name in ("foot_clearance", "foot_swing_height"):
            rewards[name] = replace(rewards[name], params={**rewards[name].params, **height})
    events = list(flat.events.items())
    spawn = ("reset_to_terrain_origin", EventTerm(mdp.reset_to_terrain_origin, "reset"))
    events.insert([name for name, _ in events].index("reset_base") + 1, spawn)
    return replace(
        flat,
        model=model,
        observations={
            **flat.observations,
            "policy": with_scan("policy", UniformNoise(-0.1, 0.1)),
            "critic": critic,
        },
        rewards=rewards,
        events=dict(events),
        terminations={
            **flat.terminations,
            "out_of_terrain_bounds": TerminationTerm(mdp.out_of_terrain_bounds, time_out=True),
        },
        curriculum={**flat.curriculum, "terrain_levels": CurriculumTerm(mdp.terrain_levels_vel)},
        metrics={**flat.metrics, "terrain_level": MetricTerm(mdp.terrain_level)},
        sensors={
            **sensors,
            "terrain": terrain,
            "terrain_scan": mdp.RayCastSensorCfg(scan_body, geom_group=geom_group, cast="before_obs"),
        },
    )


def robot_on_terrain(robot_xml: str, terrain: TerrainGeneratorCfg, *, where: str) -> Any:
    """The ``MjSpec`` of a robot model (MJCF text) on the generated ``terrain``; 500 CCD iterations (mjlab rough).

    Refused (``where`` names the caller) when robot geoms share the terrain's geom group, which the height
    scan casts against.
    """
    import mujoco

    from gym_graphreset.terrains.terrain_generator import add_terrain, generate_terrain

    robot = mujoco.MjSpec.from_string(robot_xml)
    clash = [g.name or "#" for g in robot.geoms if g.group == terrain.geom_group]
    if clash:
        raise ValueError(
            f"{where}: the robot's geoms {clash[:4]} are in the terrain's geom group {terrain.geom_group}, "
            "which the height scan casts against; give the terrain another `geom_group`"
        )
    spec = mujoco.MjSpec.from_string(add_terrain(robot_xml, generate_terrain(terrain)))
    spec.option.ccd_iterations = 500
    return spec
