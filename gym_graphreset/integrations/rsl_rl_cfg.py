"""rsl_rl's on-policy runner configuration as dataclasses, and mjlab's PPO settings for the shipped tasks.

The dataclasses mirror the dict ``rsl_rl.runners.OnPolicyRunner`` reads (rsl-rl-lib 5.x): :meth:`RslRlRunnerCfg.to_dict`
returns it. Being dataclasses, every field is a command-line flag of ``gym-graphreset train`` (``--agent.<field>``,
``--agent.algorithm.learning-rate 3e-4``). No rsl_rl import here: the settings are plain data.

:func:`mjlab_ppo_cfg` is mjlab 1.6's PPO of the legged tasks (``tasks/velocity/config/go1/rl_cfg.py``,
``tasks/velocity/config/g1/rl_cfg.py``, ``tasks/tracking/config/g1/rl_cfg.py``): 512-256-128 ELU actor and critic,
normalised observations, initial std 1 (scalar), 24 steps per env, 5 epochs of 4 minibatches, lr 1e-3 with the adaptive
KL schedule (target 0.01), entropy 0.01, gamma 0.99, lambda 0.95, clip 0.2 (the value loss clipped too, weight 1), max
grad norm 1, advantages normalised per rollout, Adam, seed 42. The Go1 velocity tasks run 10 000 iterations with a
checkpoint every 50, the G1 velocity tasks 30 000 (every 50), G1 tracking 30 000 (every 500) with entropy 0.005.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "ALGORITHMS",
    "MJLAB_RUN_LENGTHS",
    "MJLAB_TASKS",
    "RslRlActorCfg",
    "RslRlDistributionCfg",
    "RslRlModelCfg",
    "RslRlPpoCfg",
    "RslRlRunnerCfg",
    "mjlab_ppo_cfg",
]

ALGORITHMS = {
    "ppo": "PPO",
    "finalobs": "gym_graphreset.integrations.rsl_rl:FinalObsPPO",
    "fast": "gym_graphreset.integrations.rsl_rl_fast:FastPPO",
}
"""Short names of the rsl_rl algorithms: rsl_rl's ``PPO`` (mjlab's), the library's ``FinalObsPPO`` and ``FastPPO``
(``FinalObsPPO`` with an update that makes no host read per minibatch)."""

TRACKING_TASK = "gym_graphreset/G1-Tracking-Flat-v0"
MJLAB_TASKS = (
    "gym_graphreset/Go1-Velocity-Flat-v0",
    "gym_graphreset/G1-Velocity-Flat-v0",
    "gym_graphreset/Go1-Velocity-Rough-v0",
    "gym_graphreset/G1-Velocity-Rough-v0",
    TRACKING_TASK,
)
"""The tasks whose PPO settings are mjlab's (:func:`mjlab_ppo_cfg`); their observations have a ``critic`` group."""
MJLAB_RUN_LENGTHS = {
    "gym_graphreset/G1-Velocity-Flat-v0": (30_000, 50),
    "gym_graphreset/G1-Velocity-Rough-v0": (30_000, 50),
    TRACKING_TASK: (30_000, 500),
}
"""Task -> mjlab's ``(max_iterations, save_interval)`` where it is not the Go1 config's ``(10_000, 50)``."""


@dataclass(kw_only=True)
class RslRlModelCfg:
    """An rsl_rl network (``MLPModel``): the critic, and the actor's body."""

    class_name: str = "MLPModel"
    """rsl_rl's model class."""
    hidden_dims: tuple[int, ...] = (512, 256, 128)
    """Hidden layer widths."""
    activation: str = "elu"
    """rsl_rl's activation name (``elu``, ``relu``, ``tanh``, ...)."""
    obs_normalization: bool = True
    """Normalise the observations with running statistics (folded into exported policies)."""


@dataclass(kw_only=True)
class RslRlDistributionCfg:
    """The actor's action distribution."""

    class_name: str = "GaussianDistribution"
    """rsl_rl's distribution class."""
    init_std: float = 1.0
    """Initial standard deviation of the actions."""
    std_type: Literal["scalar", "log"] = "scalar"
    """How the standard deviation is parametrised."""


@dataclass(kw_only=True)
class RslRlActorCfg(RslRlModelCfg):
    """The actor: a network and its action distribution."""

    distribution_cfg: RslRlDistributionCfg = field(default_factory=RslRlDistributionCfg)
    """The action distribution."""


@dataclass(kw_only=True)
class RslRlPpoCfg:
    """rsl_rl's PPO settings."""

    class_name: str = ALGORITHMS["ppo"]
    """The algorithm class: ``PPO``, ``gym_graphreset.integrations.rsl_rl:FinalObsPPO`` (time-outs bootstrapped
    from the final observation) or ``gym_graphreset.integrations.rsl_rl_fast:FastPPO`` (the same, with an update
    that makes no host read per minibatch)."""
    num_learning_epochs: int = 5
    """Passes over each rollout."""
    num_mini_batches: int = 4
    """Minibatches per pass."""
    learning_rate: float = 1e-3
    """Adam's initial learning rate."""
    schedule: Literal["adaptive", "fixed"] = "adaptive"
    """``adaptive``: the learning rate follows the KL divergence towards ``desired_kl``."""
    gamma: float = 0.99
    """Discount factor."""
    lam: float = 0.95
    """GAE lambda."""
    entropy_coef: float = 0.01
    """Entropy bonus."""
    desired_kl: float = 0.01
    """Target KL divergence of the adaptive schedule."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    value_loss_coef: float = 1.0
    """Weight of the value loss."""
    use_clipped_value_loss: bool = True
    """Clip the value loss as the policy loss."""
    clip_param: float = 0.2
    """PPO's ratio clip."""
    normalize_advantage_per_mini_batch: bool = False
    """Normalise advantages per minibatch (else per rollout)."""
    optimizer: str = "adam"
    """The optimiser."""


@dataclass(kw_only=True)
class RslRlRunnerCfg:
    """``OnPolicyRunner``'s configuration (:meth:`to_dict` is the dict rsl_rl reads)."""

    seed: int = 42
    """The seed of the run (torch's and the env's first reset)."""
    num_steps_per_env: int = 24
    """Steps per env per iteration (the rollout length)."""
    max_iterations: int = 10_000
    """Iterations of a run (``gym-graphreset train --max-iterations`` overrides it)."""
    save_interval: int = 50
    """A checkpoint every this many iterations (and one at the end)."""
    obs_groups: dict[str, list[str]] = field(default_factory=lambda: {"actor": ["policy"], "critic": ["critic"]})
    """The env's observation groups each network reads (``actor``, ``critic``)."""
    actor: RslRlActorCfg = field(default_factory=RslRlActorCfg)
    """The actor."""
    critic: RslRlModelCfg = field(default_factory=RslRlModelCfg)
    """The critic."""
    algorithm: RslRlPpoCfg = field(default_factory=RslRlPpoCfg)
    """The learning algorithm."""
    check_for_nan: bool = True
    """rsl_rl's per-step NaN check of observations and rewards (a host read per step)."""

    def to_dict(self) -> dict[str, Any]:
        """The dict ``OnPolicyRunner`` reads (tuples as lists, as a JSON round trip gives them)."""
        return _lists(asdict(self))


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


def mjlab_ppo_cfg(env_id: str, algorithm: Literal["ppo", "finalobs", "fast"] = "ppo") -> RslRlRunnerCfg:
    """The PPO settings of ``env_id``: mjlab's for the shipped legged tasks (:data:`MJLAB_TASKS`).

    The entropy coefficient (0.005 for G1 tracking), the iterations and the checkpoint interval
    (:data:`MJLAB_RUN_LENGTHS`) are the task's own in mjlab. Other tasks get the Go1 numbers with both networks
    reading the ``policy`` observation (no ``critic`` group).

    ``algorithm``: ``"ppo"``, rsl_rl's ``PPO`` (as mjlab), ``"finalobs"``,
    :class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO`, or ``"fast"``,
    :class:`~gym_graphreset.integrations.rsl_rl_fast.FastPPO`.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"`algorithm` must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    entropy = 0.005 if env_id == TRACKING_TASK else 0.01
    groups = {"actor": ["policy"], "critic": ["critic" if env_id in MJLAB_TASKS else "policy"]}
    iterations, save_interval = MJLAB_RUN_LENGTHS.get(env_id, (10_000, 50))
    return RslRlRunnerCfg(
        max_iterations=iterations,
        save_interval=save_interval,
        obs_groups=groups,
        algorithm=RslRlPpoCfg(class_name=ALGORITHMS[algorithm], entropy_coef=entropy),
    )
