"""Records the Go1 task's reference rollout that ``test_reference.py`` compares against, bit for bit.

Run from the repository root: ``python tests/tasks/velocity/config/go1/record_reference.py``. Re-record only on
purpose, when a change is meant to change the task's results (and say so in the change).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

NUM_ENVS, STEPS, HORIZON, SEED = 8, 240, 90, 3
PATH = Path(__file__).with_name("data") / "go1_reference.npz"


def actions(step: int) -> torch.Tensor:
    """Deterministic, large enough to make some robots fall (terminations) within the horizon."""
    g = torch.Generator().manual_seed(1000 + step)
    return 1.5 * torch.randn(NUM_ENVS, 12, generator=g)


def rollout() -> dict[str, np.ndarray]:
    """Every step's policy/critic obs, reward, flags and weighted reward terms through the masked path.

    The recording predates the action's encoder-bias subtraction, the feet's air time counted per substep and
    the derived constants recomputed after the COM offset, so it runs without them (air time counted per
    step): everything else is the registered task.
    """
    import gymnasium as gym

    import gym_graphreset  # noqa: F401  (registers the ids)
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.tasks.velocity.config.go1 import go1_velocity_flat_cfg

    cfg = go1_velocity_flat_cfg().replace_term("actions", "joint_pos", subtract_encoder_bias=False)
    cfg = cfg.replace_term("sensors", "feet_contact", air_time="step").replace_term(
        "events", "base_com", recompute="none"
    )

    inner = gym.make_vec(
        "gym_graphreset/Go1-Velocity-Flat-v0",
        num_envs=NUM_ENVS,
        vectorization_mode="vector_entry_point",
        device="cpu",
        max_episode_steps=HORIZON,
        cfg=cfg,
    )
    env = FixedShapeAutoresetVectorEnv(inner, "masked_persistent")
    obs, _ = env.reset(seed=SEED)
    out: dict[str, list[np.ndarray]] = {
        k: [] for k in ("policy", "critic", "reward", "terminated", "truncated", "reward_terms")
    }
    out["policy"].append(obs["policy"].numpy().copy())
    out["critic"].append(obs["critic"].numpy().copy())
    for t in range(STEPS):
        obs, reward, terminated, truncated, info = env.step(actions(t))
        out["policy"].append(obs["policy"].numpy().copy())
        out["critic"].append(obs["critic"].numpy().copy())
        out["reward"].append(reward.numpy().copy())
        out["terminated"].append(terminated.numpy().copy())
        out["truncated"].append(truncated.numpy().copy())
        out["reward_terms"].append(info["reward_terms"].numpy().copy())
    env.close()
    return {k: np.stack(v) for k, v in out.items()}


if __name__ == "__main__":
    data = rollout()
    PATH.parent.mkdir(exist_ok=True)
    np.savez_compressed(PATH, **data)
    print(
        PATH,
        {k: v.shape for k, v in data.items()},
        "terminated:",
        int(data["terminated"].sum()),
        "truncated:",
        int(data["truncated"].sum()),
        f"{PATH.stat().st_size / 1e6:.2f} MB",
    )
