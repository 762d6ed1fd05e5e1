"""The step profiler: kernel names grouped as documented, a CPU profile of real steps, its JSON, plot and CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gym_graphreset.bench.profile import (
    GROUPS,
    group_of,
    plot_profiles,
    profile_step,
    profile_sweep,
    profile_table,
    save_profiles,
)
from gym_graphreset.cli import main
from gym_graphreset.envs import CartPoleVectorEnv
from tests.conftest import needs_cuda


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("kinematics_1a2b3c4d_cuda_kernel_forward", "physics"),
        ("_masked_reset_kernel_3c4d5e6f_cuda_kernel_forward", "warp"),
        ("Memcpy DtoD (Device -> Device)", "copies"),
        ("Memset (Device)", "copies"),
        ("aten::copy_", "copies"),
        ("void at::native::vectorized_elementwise_kernel<4, ...>", "torch"),
        ("aten::where", "torch"),
    ],
)
def test_kernel_names_fall_in_their_group(name: str, group: str) -> None:
    assert group_of(name) == group


def test_own_warp_kernels_are_the_reset_modules_kernels() -> None:
    """The names the profiler counts as the library's warp work are the kernels the engine adapter defines."""
    pytest.importorskip("warp", reason="the `mjwarp` extra")
    import warp as wp

    from gym_graphreset.bench.profile import OWN_WARP_KERNELS
    from gym_graphreset.envs.mjwarp import reset

    defined = {k.key for k in vars(reset).values() if isinstance(k, wp.Kernel)}
    assert defined == set(OWN_WARP_KERNELS)


def test_a_cpu_profile_of_masked_steps_times_the_torch_operators() -> None:
    prof = profile_step(lambda: CartPoleVectorEnv(32), "masked+persistent", steps=6, warmup=2, env_id="cartpole")
    assert (prof.num_envs, prof.steps, prof.device, prof.mode) == (32, 6, "cpu", "masked+persistent")
    assert set(prof.us_per_step) == set(GROUPS)
    assert prof.us_per_step["torch"] > 0 and prof.us_per_step["physics"] == 0.0  # no warp kernel on this env
    assert prof.top and [t[2] for t in prof.top] == sorted((t[2] for t in prof.top), reverse=True)
    assert any(name == "aten::where" for name, *_ in prof.top), "the masked reset selects rows with where"
    assert abs(sum(prof.share(g) for g in GROUPS) - 1.0) < 1e-9


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=re.escape("`mode` must be one of")):
        profile_step(lambda: CartPoleVectorEnv(4), "fastest")
    with pytest.raises(ValueError, match=re.escape("`steps` must be >= 1, `warmup` >= 0 and `top` >= 0, got 0")):
        profile_step(lambda: CartPoleVectorEnv(4), "masked", steps=0)


def test_a_sweep_is_saved_as_json_tabled_and_plotted(tmp_path: Path) -> None:
    profiles = profile_sweep(CartPoleVectorEnv, [8, 64], "masked", steps=3, warmup=1, show_progress=False)
    assert [p.num_envs for p in profiles] == [8, 64]
    records = json.loads(save_profiles(profiles, tmp_path / "p.json").read_text())
    assert [r["num_envs"] for r in records] == [8, 64] and set(records[0]["us_per_step"]) == set(GROUPS)
    assert profile_table(profiles).splitlines()[0].split()[:2] == ["envs", "mode"]
    pytest.importorskip("matplotlib")
    assert plot_profiles(profiles, tmp_path / "p.png", "cartpole") and (tmp_path / "p.png").stat().st_size > 0


def test_cli_profile_writes_json_and_refuses_a_graph_mode_on_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["profile", "--env-id", "gym_graphreset/CartPole-v1", "--num-envs", "16", "--device", "cpu"]
    argv += ["--steps", "3", "--warmup", "1", "--out", str(tmp_path), "--no-progress"]
    assert main([*argv, "--mode", "masked"]) == 0
    assert (tmp_path / "profile-CartPole-v1-cpu.json").is_file()
    assert main([*argv, "--mode", "step graph"]) == 2
    assert "--mode 'step graph' captures a CUDA graph; the device is cpu" in capsys.readouterr().err
    assert main([*argv, "--mode", "nope"]) == 2


@needs_cuda
@pytest.mark.cuda
def test_a_step_graph_profile_on_cuda_sees_the_physics_inside_the_graph() -> None:
    """Kernels replayed by the captured step are in the trace, and MuJoCo Warp's are grouped as physics."""
    pytest.importorskip("mujoco_warp", reason="the `mjwarp` extra")
    import gymnasium as gym

    def make() -> gym.vector.VectorEnv:
        return gym.make_vec("gym_graphreset/Ant-v5", 256, vectorization_mode="vector_entry_point", device="cuda")

    prof = profile_step(make, "step graph", steps=5, warmup=5)
    print({g: round(v, 1) for g, v in prof.us_per_step.items()})
    assert prof.device == "cuda" and prof.us_per_step["physics"] > 0 and prof.share("physics") > 0.3
