"""The CLI runs a short comparison on the CPU, prints the table and writes JSON and PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from gym_graphreset.cli import main


def test_demo_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "demo",
            "--device",
            "cpu",
            "--num-envs",
            "64",
            "--steps",
            "20",
            "--warmup",
            "2",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "running on the CPU" in out and "| masked+persistent |" in out and "1.00x" in out
    data = json.loads((tmp_path / "demo-CartPole-v1-cpu.json").read_text())
    assert [r["mode"] for r in data["results"]] == ["selected", "masked", "masked+persistent"]
    assert all(r["env_steps_per_s"] > 0 for r in data["results"]) and "torch" in data["versions"]
    assert (tmp_path / "demo-CartPole-v1-cpu.png").stat().st_size > 1000


def test_unknown_mode_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--device", "cpu", "--modes", "fast"]) == 2
    assert "unknown mode(s) ['fast']" in capsys.readouterr().err


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0 and "demo" in capsys.readouterr().out


def test_async_baseline_is_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--async-baseline times Gymnasium's own env in AsyncVectorEnv processes and prints the ratio."""
    args = ["bench", "--device", "cpu", "--num-envs", "32", "--steps", "10", "--warmup", "1", "--modes", "masked"]
    status = main(
        [*args, "--out", str(tmp_path), "--no-progress", "--async-baseline", "CartPole-v1", "--async-envs", "2"]
    )
    out = capsys.readouterr().out
    assert status == 0 and "| gymnasium async x2 |" in out and "x Gymnasium AsyncVectorEnv" in out
    modes = [r["mode"] for r in json.loads((tmp_path / "bench-CartPole-v1-cpu.json").read_text())["results"]]
    assert modes == ["masked", "gymnasium async x2"]


def test_demo_without_matplotlib_writes_json_and_skips_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An optional extra that is missing never crashes a run after its work is done."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    args = ["demo", "--device", "cpu", "--num-envs", "16", "--steps", "5", "--warmup", "1"]
    assert main([*args, "--out", str(tmp_path), "--no-progress"]) == 0
    err = capsys.readouterr().err  # the library's warning, printed by the command line as one line
    assert "warning: matplotlib is not installed (the `plot` extra): skipped the plot" in err
    assert list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.png"))


def test_a_size_out_of_memory_is_skipped_and_the_others_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep's largest size running out of device memory costs that size only, not the sizes measured."""
    import json

    from gym_graphreset.bench import runner
    from gym_graphreset.cli import bench

    real = runner.measure_modes

    def measure(make_inner: Any, *args: Any, **kwargs: Any) -> Any:
        if make_inner.__defaults__[0] == 32:  # make_inner(n=32, ...)
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
        return real(make_inner, *args, **kwargs)

    monkeypatch.setattr(bench, "measure_modes", measure)
    args = ["bench", "--device", "cpu", "--num-envs", "8,32,16", "--steps", "3", "--warmup", "1", "--modes", "masked"]
    assert main([*args, "--out", str(tmp_path), "--no-progress", "--env-id", "gym_graphreset/CartPole-v1"]) == 0
    assert "gym_graphreset/CartPole-v1 x32: out of device memory; skipped this size" in capsys.readouterr().out
    saved = json.loads((tmp_path / "bench-CartPole-v1-cpu.json").read_text())
    rows = saved["results"] if isinstance(saved, dict) else saved
    assert sorted(r["num_envs"] for r in rows) == [8, 16]


def test_no_ratio_across_tasks_and_same_task_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A speed-up is printed only against the same task; a bare --async-baseline picks it."""
    from gym_graphreset.cli import same_task

    assert same_task("gym_graphreset/Ant-v5", "Ant-v5") and not same_task(
        "gym_graphreset/ResetHeavyHalfCheetah-v0", "Ant-v5"
    )
    args = ["bench", "--device", "cpu", "--num-envs", "16", "--steps", "5", "--warmup", "1", "--modes", "masked"]
    main([*args, "--out", str(tmp_path), "--no-progress", "--async-baseline", "Acrobot-v1", "--async-envs", "2"])
    out = capsys.readouterr().out
    assert "no ratio: Gymnasium AsyncVectorEnv ran another task, Acrobot-v1" in out and "x Gymnasium" not in out
    main([*args, "--out", str(tmp_path), "--no-progress", "--async-baseline", "--async-envs", "2"])
    assert "x Gymnasium AsyncVectorEnv on the same task" in capsys.readouterr().out


def test_table_reports_compile_time_and_breaks_apart_from_the_step() -> None:
    """A compiled mode's line gives its compile time (not in ms/step), its graphs, and names any problem."""
    from gym_graphreset.bench.results import ModeResult, table

    def result(mode: str, ms: float, report: dict | None = None) -> ModeResult:
        extra = {} if report is None else {"compile": report}
        return ModeResult(mode, "e", 512, "cuda:0", 10, ms, 512 / ms * 1e3, 0.0, None, extra)

    fresh = {"compile_seconds": 33.3, "graphs": 17, "declared_breaks": {"WarpRuntime.run": 8}, "recompiles": []}
    fresh["graph_breaks"] = ["graph break: Data-dependent branching (...)"]
    reused = {"compile_seconds": 0.01, "graphs": 0, "declared_breaks": {}, "graph_breaks": [], "recompiles": []}
    text = table(
        [
            result("bare physics", 2.0),
            result("non-physics+compile", 0.3, fresh),
            result("step graph+compile", 2.2, reused),
        ]
    )
    assert "e x512: step graph+compile 2.200 ms = 0.957 x (bare physics 2.000 + non-physics+compile 0.300)" in text
    assert "non-physics+compile: compiled in 33.3 s (first compiled call, not in ms/step), 17 graph(s)" in text
    assert "other graph breaks 1" in text and "  - graph break: Data-dependent branching" in text
    assert "step graph+compile: reused the graphs compiled for an earlier env in this process" in text


HEAVY = (
    "torch._dynamo",
    "mujoco_warp",
    "warp",
    "mujoco",
    "matplotlib",
    "tensorboard",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "rsl_rl",
    "tyro",
    "moviepy",
)
"""Modules that cost seconds to import or belong to an optional extra: loaded only when a command needs them."""


@pytest.mark.parametrize(
    "code",
    [
        "import gym_graphreset",
        "import gym_graphreset.cli",
        "from gym_graphreset.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
        "from gym_graphreset.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass",
    ],
    ids=["import", "import-cli", "help", "version"],
)
def test_import_and_help_load_no_heavy_module(code: str) -> None:
    """``import gym_graphreset`` and ``gym-graphreset --help`` start without ``torch._dynamo`` (seconds: imported
    when something compiles), a physics engine or an optional extra (plotting, logging, export, trainers)."""
    import subprocess
    import sys

    check = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps", "-5"], "argument --steps: must be an int >= 1, got -5"),
        (["--steps", "0"], "argument --steps: must be an int >= 1, got 0"),
        (["--warmup", "-1"], "argument --warmup: must be an int >= 0, got -1"),
        (["--steps", "ten"], "argument --steps: must be an int >= 1, got 'ten'"),
        (["--num-envs", "8,0"], "argument --num-envs: must be comma-separated ints >= 1, got '8,0'"),
        (["--async-envs", "two"], "argument --async-envs: must be comma-separated ints >= 1, got 'two'"),
        (["--envpool-envs", "64,"], "argument --envpool-envs: must be comma-separated ints >= 1, got '64,'"),
        (["--peer-timeout", "nan"], "argument --peer-timeout: must be a finite number of seconds > 0, got 'nan'"),
        (["--peer-timeout", "0"], "argument --peer-timeout: must be a finite number of seconds > 0, got '0'"),
    ],
)
def test_bad_numbers_are_argparse_errors_before_anything_runs(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--device", "cpu", "--out", str(tmp_path / "out"), *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--modes", "reset graph,step graph"], "no runnable mode: --modes 'reset graph,step graph' needs CUDA"),
        (["--modes", ","], "no runnable mode: --modes ',' names none"),
        (["--physics-graph", "torch"], "--physics-graph torch needs a CUDA device (a CUDA graph), and the device is"),
        (["--device", "gpu"], "--device must be cuda, cuda:N, cpu or auto, got 'gpu'"),
        (["--device", "meta"], "--device must be cuda, cuda:N, cpu or auto, got 'meta'"),
        (["--variant", "v:model_xml=/no/such/go1.xml"], "`--variant v`: model_xml '/no/such/go1.xml' is not a file"),
    ],
)
def test_unrunnable_arguments_fail_early_by_name(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["demo", "--device", "cpu", "--num-envs", "8", "--steps", "2", "--warmup", "1", "--no-progress"]
    assert main([*args, "--out", str(tmp_path), *flags]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "|" not in captured.out  # nothing was measured
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_an_out_folder_that_cannot_hold_the_results_fails_before_measuring(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("")
    out = blocker if kind == "a file" else blocker / "sub"
    args = ["demo", "--device", "cpu", "--num-envs", "8", "--steps", "2", "--warmup", "1", "--no-progress"]
    assert main([*args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert f"--out {str(out)!r} cannot hold the results" in captured.err and "|" not in captured.out


def test_variant_values_are_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--variant`` values reach the constructor as bools, ints, floats or strings."""
    import gymnasium as gym

    seen: list[dict[str, object]] = []
    make_vec = gym.make_vec

    def recording_make_vec(env_id: str, **kwargs: object) -> gym.vector.VectorEnv:
        seen.append({k: kwargs.pop(k) for k in ("n", "scale", "flat", "name") if k in kwargs})
        return make_vec(env_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gym, "make_vec", recording_make_vec)
    args = ["demo", "--device", "cpu", "--num-envs", "8", "--steps", "2", "--warmup", "1", "--modes", "masked"]
    variant = "v:n=3,scale=0.5,flat=True,name=go1"
    assert main([*args, "--no-progress", "--out", str(tmp_path), "--variant", variant]) == 0
    assert seen[0] == {"n": 3, "scale": 0.5, "flat": True, "name": "go1"}
    assert [type(v) for v in seen[0].values()] == [int, float, bool, str]


def test_play_prints_returns_and_writes_a_video_of_the_asked_worlds(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PPO example checkpoint on its own task: returns printed; a video of worlds 0 and 1 side by side."""
    _, folder = ppo_run
    video = tmp_path / "play.mp4"
    argv = ["play", str(folder / "ckpt" / "model_3.pt"), "--steps", "5", "--worlds", "0,1", "--device", "cpu"]
    assert main([*argv, "--video", str(video)]) == 0
    out = capsys.readouterr().out
    assert "gym_graphreset/InvertedPendulum-v5 x4, 5 steps of the deterministic policy" in out
    assert "world 0:" in out and "world 1:" in out
    if "no video" in out:
        pytest.skip(f"no OpenGL context here: {out.splitlines()[0]}")
    written = video if video.is_file() else video.with_suffix(".gif")
    assert f"wrote {written} (6 frames of worlds [0, 1])" in out
    if written.suffix == ".gif":
        from PIL import Image

        with Image.open(written) as gif:
            assert gif.n_frames == 6 and gif.size == (2 * 320, 240)


def test_play_without_video_and_on_another_env_width(
    ppo_run: tuple[Any, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """--no-video prints the returns only; a task of another observation width is refused by name."""
    _, folder = ppo_run
    ckpt = str(folder / "ckpt" / "model_3.pt")
    assert main(["play", ckpt, "--steps", "3", "--no-video", "--device", "cpu"]) == 0
    assert "wrote" not in capsys.readouterr().out
    other = "gym_graphreset/InvertedDoublePendulum-v5"
    assert main(["play", ckpt, "--env-id", other, "--steps", "2", "--device", "cpu"]) == 2
    assert f"the checkpoint's policy reads 4 observation columns, {other} has 9" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--worlds", "4"], "--worlds must be distinct, in [0, 4) (--num-envs), got '4'"),
        (["--worlds", "a"], "--worlds must be comma-separated integers, got 'a'"),
        (["--worlds", "0,0"], "--worlds must be distinct, in [0, 4) (--num-envs), got '0,0'"),
        (["--env-id", "nope/Nope-v0"], "--env-id must be a registered env id (or module:id), got 'nope/Nope-v0'"),
        (
            ["--env-id", "no_such_module:Nope-v0"],
            "--env-id 'no_such_module:Nope-v0': the module 'no_such_module' that registers it cannot be imported",
        ),
    ],
)
def test_play_refuses_bad_arguments_by_name(
    ppo_run: tuple[Any, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, folder = ppo_run
    assert main(["play", str(folder / "ckpt" / "model_3.pt"), "--device", "cpu", *extra]) == 2
    assert message in capsys.readouterr().err


def test_play_and_export_refuse_a_missing_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("play", "export"):
        assert main([command, str(tmp_path / "none.pt")]) == 2
        assert "`path` must be a checkpoint file" in capsys.readouterr().err


def test_play_and_export_refuse_a_non_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    for command in ("play", "export"):
        assert main([command, str(tmp_path / "notes.pt")]) == 2
        assert f"checkpoint {str(tmp_path / 'notes.pt')!r} is not a file torch.save wrote" in capsys.readouterr().err


def test_export_refuses_an_out_that_is_a_file(ppo_run: tuple[Any, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, folder = ppo_run
    (folder / "taken").write_text("")
    assert main(["export", str(folder / "ckpt" / "model_3.pt"), "--out", str(folder / "taken")]) == 2
    assert "--out must be a directory (the exported files go in it)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seed", "-1"], "--seed: must be an int >= 0, got -1"),
        (["--camera-distance", "0"], "--camera-distance: must be a finite number of metres > 0, got '0'"),
    ],
)
def test_play_refuses_bad_numbers_as_usage_errors(
    ppo_run: tuple[Any, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, folder = ppo_run
    with pytest.raises(SystemExit) as exit_:
        main(["play", str(folder / "ckpt" / "model_3.pt"), *extra])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_play_passes_the_camera_distance_to_the_renderer(
    ppo_run: tuple[Any, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gym_graphreset.cli.policy as policy

    seen: list[tuple[list[int], float]] = []
    monkeypatch.setattr(policy, "_renderer", lambda env, worlds, distance: seen.append((worlds, distance)))
    _, folder = ppo_run
    argv = ["play", str(folder / "ckpt" / "model_3.pt"), "--steps", "2", "--device", "cpu"]
    assert main([*argv, "--worlds", "0,1", "--camera-distance", "3.5"]) == 0
    assert seen == [([0, 1], 3.5)]


@pytest.mark.parametrize("command", ["bench", "profile"])
def test_bench_and_profile_refuse_an_unknown_env_id(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--env-id", "nope/Nope-v0", "--num-envs", "2", "--device", "cpu"]) == 2
    assert "--env-id must be a registered env id (or module:id), got 'nope/Nope-v0'" in capsys.readouterr().err


def test_export_writes_and_checks_both_formats(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, folder = ppo_run
    assert (
        main(["export", str(folder / "ckpt" / "model_3.pt"), "--out", str(tmp_path), "--formats", "torchscript"]) == 0
    )
    assert f"wrote {tmp_path / 'policy.pt'} (checked with torch.jit" in capsys.readouterr().out
    assert main(["export", str(folder / "ckpt" / "model_3.pt"), "--formats", "tflite"]) == 2
    assert "--formats must be a comma-separated subset of onnx, torchscript, got 'tflite'" in capsys.readouterr().err


@pytest.mark.slow
def test_play_records_a_motion_clip_of_a_task_layer_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``play --motion`` writes world 0's first finished episode as a clip that loads for the G1; with no
    finished episode it says so and writes nothing."""
    from gym_graphreset.tasks.tracking.motion_clips import load_motion
    from tests.conftest import load_example

    ppo = load_example("ppo_continuous")
    argv = ["--env-id", "gym_graphreset/G1-Velocity-Flat-v0", "--num-envs", "2", "--num-steps", "4"]
    argv += ["--total-timesteps", "8", "--update-epochs", "1", "--num-minibatches", "2", "--hidden-dims", "8,8"]
    argv += ["--device", "cpu", "--out", str(tmp_path / "out")]
    ppo.train(ppo.parse_args([*argv, "--save-dir", str(tmp_path / "ckpt")]))
    ckpt = str(next((tmp_path / "ckpt").glob("*.pt")))
    clip = tmp_path / "clip.npz"
    assert (
        main(
            ["play", ckpt, "--num-envs", "2", "--steps", "100", "--no-video", "--device", "cpu", "--motion", str(clip)]
        )
        == 0
    )
    assert f"wrote {clip} (world 0's episode " in capsys.readouterr().out
    motion = load_motion(clip, num_joints=29, num_bodies=30, fps=50.0)
    assert 2 <= motion.num_frames <= 101  # an episode that ended by a fall (the policy is barely trained)
    none = tmp_path / "none.npz"
    assert main(["play", ckpt, "--steps", "1", "--no-video", "--device", "cpu", "--motion", str(none)]) == 0
    assert "no clip written: no episode of world 0 finished within --steps" in capsys.readouterr().out
    assert not none.exists()


def test_play_a_checkpoint_whose_model_file_is_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint trained on a model file that is not on this machine is refused, naming the file and
    ``--model-xml``; with ``--model-xml`` it plays on the file given."""
    import shutil

    from gym_graphreset.assets.robots.g1.model import G1_XML
    from tests.conftest import load_example

    elsewhere = tmp_path / "elsewhere" / "g1.xml"
    elsewhere.parent.mkdir()
    shutil.copytree(Path(G1_XML).parent, elsewhere.parent, dirs_exist_ok=True)  # the MJCF and its meshes
    ppo = load_example("ppo_continuous")
    argv = ["--env-id", "gym_graphreset/G1-Velocity-Flat-v0", "--num-envs", "2", "--num-steps", "2"]
    argv += ["--total-timesteps", "4", "--update-epochs", "1", "--num-minibatches", "1", "--hidden-dims", "8"]
    argv += ["--device", "cpu", "--out", str(tmp_path / "out"), "--model-xml", str(elsewhere)]
    ppo.train(ppo.parse_args([*argv, "--save-dir", str(tmp_path / "ckpt")]))
    ckpt = str(next((tmp_path / "ckpt").glob("*.pt")))
    shutil.rmtree(elsewhere.parent)
    play = ["play", ckpt, "--num-envs", "1", "--steps", "2", "--no-video", "--device", "cpu"]
    assert main(play) == 2
    assert f"was trained on the model file {str(elsewhere)!r}, which is not here: pass --model-xml" in (
        capsys.readouterr().err
    )
    assert main([*play, "--model-xml", str(tmp_path / "none.xml")]) == 2
    assert f"--model-xml {str(tmp_path / 'none.xml')!r} is not a file" in capsys.readouterr().err
    assert main([*play, "--model-xml", str(G1_XML)]) == 0
    assert "G1-Velocity-Flat-v0 x1, 2 steps of the deterministic policy" in capsys.readouterr().out


def test_play_a_checkpoint_whose_clip_is_elsewhere(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint of a tracking task trained on a clip that is not on this machine is refused before the env is
    built, naming the clip and ``--motion-file``; a ``--motion-file`` that is not a file, or one for a task that
    tracks no clip, is refused by name."""
    from gym_graphreset.assets.robots.g1.clip import G1_CLIP

    _, folder = ppo_run
    ckpt = torch.load(folder / "ckpt" / "model_3.pt", weights_only=False)
    clip = "/elsewhere/g1_sway.npz"
    ckpt |= {"env_id": "gym_graphreset/G1-Tracking-Flat-v0", "env_kwargs": {"motion_file": clip}}
    torch.save(ckpt, tmp_path / "tracking.pt")
    play = ["play", str(tmp_path / "tracking.pt"), "--steps", "1", "--no-video", "--device", "cpu"]
    assert main(play) == 2
    assert f"was trained on the clip {clip!r}, which is not here: pass --motion-file (that clip on this machine)" in (
        capsys.readouterr().err
    )
    assert main([*play, "--motion-file", str(tmp_path / "none.npz")]) == 2
    assert f"--motion-file {str(tmp_path / 'none.npz')!r} is not a file" in capsys.readouterr().err
    pendulum = ["play", str(folder / "ckpt" / "model_3.pt"), "--no-video", "--device", "cpu"]
    assert main([*pendulum, "--motion-file", str(G1_CLIP)]) == 2
    assert (
        "--motion-file is for a task that tracks a clip (a `motion_file` option); gym_graphreset/InvertedPendulum-v5 "
        "takes none" in capsys.readouterr().err
    )


def test_play_motion_refuses_an_env_off_the_task_layer(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, folder = ppo_run
    ckpt = str(folder / "ckpt" / "model_3.pt")
    assert main(["play", ckpt, "--no-video", "--device", "cpu", "--motion", str(tmp_path / "m.npz")]) == 2
    assert "--motion records task-layer envs (a ManagerBasedEnv); gym_graphreset/InvertedPendulum-v5 is a" in (
        capsys.readouterr().err
    )


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``gym-graphreset --version`` prints the program name and the package's version, and exits 0."""
    import gym_graphreset

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gym-graphreset {gym_graphreset.__version__}"


def test_a_source_tree_without_package_metadata_still_runs_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run from a tree with ``PYTHONPATH=.`` (no installed metadata), the parser still builds and ``--version``
    says where it runs from, rather than every command failing on the version lookup."""
    import importlib.metadata

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == "gym-graphreset (not installed: run from a source tree)"


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_results_go_under_runs_in_the_current_folder_by_default(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``--out`` the results go to ``runs/<command>/`` of the folder it runs from, not a
    ``benchmarks/results`` tree created wherever it is started."""
    monkeypatch.chdir(tmp_path)
    args = [command, "--device", "cpu", "--num-envs", "8", "--steps", "2", "--warmup", "1", "--modes", "masked"]
    assert main([*args, "--no-progress"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    assert (tmp_path / "runs" / command / f"{command}-CartPole-v1-cpu.json").is_file()


def test_play_refuses_a_video_it_could_not_write_before_the_rollout(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --video under a regular file (or a --motion there) is refused before any step, naming the file."""
    _, folder = ppo_run
    ckpt = str(folder / "ckpt" / "model_3.pt")
    (tmp_path / "notes.txt").write_text("")
    under_file = tmp_path / "notes.txt" / "play.gif"
    assert main(["play", ckpt, "--steps", "3", "--video", str(under_file), "--device", "cpu"]) == 2
    out, err = capsys.readouterr()
    assert "episodes ended" not in out and f"{str(tmp_path / 'notes.txt')!r} is a file" in err


def test_play_refuses_a_policy_of_another_action_width(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy whose action width is not the task's is refused with a message, not a traceback."""
    _, folder = ppo_run
    ckpt = torch.load(folder / "ckpt" / "model_3.pt", weights_only=False)
    agent, meta = ckpt["agent"], ckpt["policy"]
    last = max(int(k.split(".")[1]) for k in agent if k.startswith("actor.") and k.endswith(".weight"))
    for name in ("weight", "bias"):
        agent[f"actor.{last}.{name}"] = torch.cat([agent[f"actor.{last}.{name}"]] * 2)
    meta["action_low"], meta["action_high"] = [-1.0, -1.0], [1.0, 1.0]
    torch.save(ckpt, tmp_path / "wide.pt")
    assert main(["play", str(tmp_path / "wide.pt"), "--steps", "2", "--no-video", "--device", "cpu"]) == 2
    assert "the checkpoint's policy outputs 2 actions, " in capsys.readouterr().err


def test_export_does_not_overwrite_a_checkpoint_named_policy_pt(
    ppo_run: tuple[Any, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exporting into the folder of a checkpoint named policy.pt is refused; the checkpoint is unchanged."""
    _, folder = ppo_run
    ckpt = tmp_path / "policy.pt"
    ckpt.write_bytes((folder / "ckpt" / "model_3.pt").read_bytes())
    before = ckpt.read_bytes()
    assert main(["export", str(ckpt), "--out", str(tmp_path), "--formats", "torchscript"]) == 2
    assert "would overwrite the checkpoint" in capsys.readouterr().err and ckpt.read_bytes() == before
