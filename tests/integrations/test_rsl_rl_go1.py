"""rsl_rl on the Go1 task (``benchmarks/gpu/rsl_rl_go1.py``): mjlab's PPO config of each task reaches rsl_rl
unchanged, the per-term episode log (``RewardTermLog``) sums terms per finished episode, a row's mjlab fields come
from the iteration's log, and a CPU run of one iteration (flat, tracking, rough) writes training-curve rows that
:func:`~gym_graphreset.bench.plotting.load_training_curve` accepts, with the task's mjlab metrics."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch

pytest.importorskip("rsl_rl", reason="rsl-rl-lib is the optional `rsl_rl` extra")

from gym_graphreset.bench.plotting import load_training_curve
from gym_graphreset.integrations.common import RewardTermLog
from gym_graphreset.integrations.export import load_policy
from gym_graphreset.integrations.rsl_rl import episode_reward_extras
from gym_graphreset.tasks.tracking.motion_command import MotionCommand
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "benchmarks" / "results" / "h200-mjlab-train-Go1-4096.json"
CLIP = ROOT / "gym_graphreset" / "assets" / "robots" / "g1" / "motions" / "g1_sway.npz"
MJLAB_TRACKING_RL_CFG = {
    "seed": 42,
    "num_steps_per_env": 24,
    "max_iterations": 30_000,
    "save_interval": 500,
    "actor": {
        "hidden_dims": [512, 256, 128],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
    },
    "critic": {"hidden_dims": [512, 256, 128], "activation": "elu", "obs_normalization": True},
    "algorithm": {
        "class_name": "PPO",
        "value_loss_coef": 1.0,
        "use_clipped_value_loss": True,
        "clip_param": 0.2,
        "entropy_coef": 0.005,
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "learning_rate": 1.0e-3,
        "schedule": "adaptive",
        "gamma": 0.99,
        "lam": 0.95,
        "desired_kl": 0.01,
        "max_grad_norm": 1.0,
        "normalize_advantage_per_mini_batch": False,
        "optimizer": "adam",
    },
}
"""mjlab 1.6's ``tasks/tracking/config/g1/rl_cfg.py`` (with ``RslRlPpoAlgorithmCfg``'s and the runner config's
defaults for the fields it leaves out), as rsl_rl reads it."""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    """The benchmark script, imported from its path."""
    return load_script(ROOT / "benchmarks" / "gpu" / "rsl_rl_go1.py")


def test_cfg_matches_mjlabs_recorded_go1_config(script: ModuleType) -> None:
    """Every PPO, network and rollout setting equals the one mjlab's own Go1 run recorded."""
    mjlab = json.loads(REFERENCE.read_text())["rl_cfg"]
    ours = script.mjlab_go1_cfg()
    assert ours["num_steps_per_env"] == mjlab["num_steps_per_env"]
    for key in ("hidden_dims", "activation", "obs_normalization", "distribution_cfg"):
        assert ours["actor"][key] == mjlab["actor"][key], key
    for key in ("hidden_dims", "activation", "obs_normalization"):
        assert ours["critic"][key] == mjlab["critic"][key], key
    for key, value in mjlab["algorithm"].items():
        if key not in ("class_name", "share_cnn_encoders"):  # FinalObsPPO is PPO; no CNN here
            assert ours["algorithm"][key] == value, key
    assert ours["algorithm"]["class_name"] == mjlab["algorithm"]["class_name"] == "PPO"  # stock, as mjlab
    assert ours["check_for_nan"] is True  # the stock runner's per-step check, as mjlab
    finalobs = script.mjlab_go1_cfg("finalobs", check_for_nan=False)
    assert finalobs["algorithm"]["class_name"] == "gym_graphreset.integrations.rsl_rl:FinalObsPPO"
    assert finalobs["check_for_nan"] is False


def test_tracking_cfg_matches_mjlabs_tracking_config_field_by_field(script: ModuleType) -> None:
    """G1 tracking trains with mjlab's tracking PPO config: every learning field, the run length and the checkpoint
    interval (the script's budget replaces ``max_iterations``: compared through the package's config)."""
    from gym_graphreset.integrations.rsl_rl_cfg import mjlab_ppo_cfg

    ours = script.mjlab_go1_cfg(env_id=script.TRACKING_ENV_ID)
    full = mjlab_ppo_cfg(script.TRACKING_ENV_ID).to_dict()
    for key, value in MJLAB_TRACKING_RL_CFG.items():
        if isinstance(value, dict):
            for field, v in value.items():
                assert ours[key][field] == v, f"{key}.{field}"
        elif key == "max_iterations":
            assert full[key] == value and key not in ours
        else:
            assert ours[key] == value, key
    assert ours["obs_groups"] == {"actor": ["policy"], "critic": ["critic"]}  # mjlab's actor / critic groups
    g1 = mjlab_ppo_cfg("gym_graphreset/G1-Velocity-Rough-v0")
    assert (g1.max_iterations, g1.save_interval, g1.algorithm.entropy_coef) == (30_000, 50, 0.01)
    go1 = mjlab_ppo_cfg("gym_graphreset/Go1-Velocity-Rough-v0")
    assert (go1.max_iterations, go1.save_interval, go1.algorithm.entropy_coef) == (10_000, 50, 0.01)


def test_row_fields_come_from_the_iterations_mjlab_log(script: ModuleType) -> None:
    """Each MJLAB_FIELDS field holds its tag's value (None where absent or NaN: nothing reset); Episode_Reward and
    Metrics / Curriculum entries are kept apart; the tags are mjlab_train.py's for the same fields."""
    log = {
        "Episode_Reward/motion_body_pos": 0.75,
        "Episode_Reward/self_collisions": float("nan"),
        "Metrics/motion/error_body_pos": 0.125,
        "Metrics/motion/error_joint_vel": 2.5,
        "Metrics/motion/sampling_entropy": 0.98,
        "Curriculum/terrain_levels/mean": float("nan"),
    }
    fields = script.mjlab_fields(log)
    assert fields == {
        "track_lin_vel": None,
        "track_ang_vel": None,
        "terrain_levels": None,
        "terrain_levels_max": None,
        "error_body_pos": 0.125,
        "error_body_rot": None,
        "error_anchor_pos": None,
        "error_anchor_rot": None,
        "error_joint_pos": None,
        "error_joint_vel": 2.5,
        "episode_reward": {"Episode_Reward/motion_body_pos": 0.75, "Episode_Reward/self_collisions": None},
        "metrics": {
            "Metrics/motion/error_body_pos": 0.125,
            "Metrics/motion/error_joint_vel": 2.5,
            "Metrics/motion/sampling_entropy": 0.98,
            "Curriculum/terrain_levels/mean": None,
        },
    }
    train = load_script(ROOT / "benchmarks" / "gpu" / "mjlab_train.py")
    assert {k: v for k, v in train.TAGS.items() if not v.startswith("Train/")} == script.MJLAB_FIELDS


def test_reward_term_log_sums_each_finished_episode() -> None:
    """Terms summed per row, moved to the totals when the row's episode ends, divided by the episode seconds."""
    log = RewardTermLog(("a", "b"), episode_seconds=2.0, num_envs=3, device=torch.device("cpu"))
    steps = [
        (torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.5, 0.5]]), torch.tensor([False, True, False])),
        (torch.tensor([[1.0, 2.0], [4.0, 0.0], [0.5, 0.5]]), torch.tensor([True, False, False])),
    ]
    for terms, done in steps:
        log.add({"reward_terms": terms}, done)
    # ended: row 1 after step 1 (2, 1), row 0 after step 2 (2, 2); row 2 still running
    assert log.summary() == {"a": pytest.approx((2 + 2) / 2 / 2.0), "b": pytest.approx((1 + 2) / 2 / 2.0)}
    assert log.summary() == {"a": None, "b": None}  # cleared, and no episode ended since
    log.add({"reward_terms": torch.ones(3, 2)}, torch.tensor([False, True, True]))
    # ended: row 1's second episode (4 + 1, 0 + 1), row 2's first (0.5 + 0.5 + 1, 0.5 + 0.5 + 1)
    assert log.summary() == {"a": pytest.approx((5 + 2) / 2 / 2.0), "b": pytest.approx((1 + 2) / 2 / 2.0)}


def test_mjlab_aggregation_is_the_mean_over_steps_with_resets() -> None:
    """mjlab logs each reset step's mean over its reset rows; rsl_rl averages those steps: not the pooled mean."""
    log = RewardTermLog(("a",), episode_seconds=2.0, num_envs=3, device=torch.device("cpu"))
    log.add({"reward_terms": torch.tensor([[2.0], [4.0], [6.0]])}, torch.tensor([True, True, False]))
    log.add({"reward_terms": torch.zeros(3, 1)}, torch.tensor([False, False, False]))  # no reset: not a sample
    log.add({"reward_terms": torch.tensor([[0.0], [0.0], [2.0]])}, torch.tensor([False, False, True]))
    # reset steps: 1 (rows 0, 1: sums 2, 4 -> mean 3) and 3 (row 2: sum 8); per second of the horizon
    steps = (3 / 2.0 + 8 / 2.0) / 2
    episodes = (2 + 4 + 8) / 3 / 2.0
    assert steps != pytest.approx(episodes)
    torch.testing.assert_close(log.mjlab_means(clear=False), torch.tensor([steps]))
    extras = episode_reward_extras(log)
    assert list(extras) == ["Episode_Reward/a"] and extras["Episode_Reward/a"].shape == ()
    assert float(extras["Episode_Reward/a"]) == pytest.approx(steps)
    assert torch.isnan(log.mjlab_means()).all()  # extras cleared the per-step sums; no reset since
    assert log.summary(over="episodes") == {"a": pytest.approx(episodes)}  # the pooled totals are kept


def test_summary_aggregations_and_bad_over() -> None:
    log = RewardTermLog(("a",), episode_seconds=1.0, num_envs=2, device=torch.device("cpu"))
    log.add({"reward_terms": torch.tensor([[1.0], [3.0]])}, torch.tensor([True, True]))
    log.add({"reward_terms": torch.tensor([[5.0], [0.0]])}, torch.tensor([True, False]))
    assert log.summary(clear=False) == {"a": pytest.approx((2 + 5) / 2)}
    assert log.summary(over="episodes") == {"a": pytest.approx((1 + 3 + 5) / 3)}
    with pytest.raises(ValueError, match=re.escape("`over` must be 'steps' or 'episodes', got 'rows'")):
        log.summary(over="rows")  # type: ignore[arg-type]


def test_reward_term_log_refuses_a_non_positive_horizon() -> None:
    """A zero episode length is refused by name."""
    with pytest.raises(ValueError, match="episode_seconds"):
        RewardTermLog(("a",), episode_seconds=0.0, num_envs=1, device=torch.device("cpu"))


@pytest.mark.slow
def test_cpu_run_writes_training_curve_rows(script: ModuleType, tmp_path: Path) -> None:
    """One CPU iteration with short episodes: a row with every field, tracking rewards within their bounds."""
    num_envs, horizon = 8, 10
    argv = ["--device", "cpu", "--num-envs", str(num_envs), "--budget-s", "1", "--max-iterations", "1"]
    argv += ["--max-episode-steps", str(horizon), "--out", str(tmp_path), "--reference", str(REFERENCE)]
    argv += ["--save-dir", str(tmp_path / "ckpt"), "--log-dir", str(tmp_path / "tb")]
    assert script.main(argv) == 0
    path = tmp_path / "rsl_rl_go1.json"
    rows = load_training_curve(path)
    assert len(rows) == 1
    (row,) = rows
    assert row["iteration"] == 0 and row["env_steps"] == 24 * num_envs and row["wall_s"] > 0
    assert row["episodes"] >= num_envs  # 24 steps over a 10-step horizon: every row ended at least once
    assert 1 <= row["episode_length"] <= horizon
    assert row["terrain_level"] is None and row["terrain_levels"] is None  # a flat task has no terrain
    assert row["error_body_pos"] is None and row["metrics"] == {}  # nor motion metrics
    for key in ("track_lin_vel", "track_ang_vel"):  # weight 2 x exp(...) <= 2 per second of the horizon
        assert 0 < row[key] <= 2.0, key
        assert 0 < row[f"{key}_episodes"] <= 2.0, key
    record = json.loads(path.read_text())
    assert record["stopped"] in ("budget", "max_iterations") and record["preset"] == "masked_persistent"
    assert (record["algorithm"], record["runner"], record["model_xml"]) == ("ppo", "stock", None)
    assert (record["forward_before_obs"], record["keep_sensors"]) == ("off", False)  # the task's own settings
    assert record["rsl_rl_lib"] == record["versions"]["rsl-rl-lib"]
    if importlib.util.find_spec("tensorboard") is not None:  # rsl_rl's own logger, with mjlab's tags
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(tmp_path / "tb"))
        events.Reload()
        (logged,) = events.Scalars("Episode_Reward/track_linear_velocity")
        assert logged.value == pytest.approx(row["track_lin_vel"], rel=1e-5)
    # rsl_rl's checkpoint: play/export rebuild its actor from infos; the runner resumes from it
    ckpt = tmp_path / "ckpt" / "model_0.pt"
    saved = torch.load(ckpt, weights_only=False)
    assert saved["infos"]["env_id"] == "gym_graphreset/Go1-Velocity-Flat-v0" and saved["iter"] == 0
    policy = load_policy(ckpt)
    assert (policy.obs_dim, policy.act_dim, policy.source.obs_groups) == (48, 12, ("policy",))
    resumed = ["--resume", str(ckpt), "--name", "resumed.json", "--save-dir", str(tmp_path / "ckpt2")]
    assert script.main([*argv[:-4], *resumed]) == 0
    record = json.loads((tmp_path / "resumed.json").read_text())
    assert record["resumed_from"] == str(ckpt) and record["rows"][0]["iteration"] == 0  # rsl_rl resumes at `iter`
    if importlib.util.find_spec("matplotlib") is not None:
        assert path.with_suffix(".png").is_file()


@pytest.mark.slow
def test_cpu_run_on_motion_tracking_logs_every_term(script: ModuleType, tmp_path: Path) -> None:
    """G1 motion tracking trains through the same script with mjlab's tracking entropy (0.005); its rows hold
    every ``Episode_Reward/<term>`` (no ``track_*`` term there) and a checkpoint that plays."""
    argv = ["--env-id", "gym_graphreset/G1-Tracking-Flat-v0", "--device", "cpu", "--num-envs", "4"]
    argv += ["--budget-s", "1", "--max-iterations", "1", "--max-episode-steps", "10", "--out", str(tmp_path)]
    argv += ["--motion-file", str(CLIP), "--forward-before-obs", "full", "--keep-sensors"]  # as like_for_like.sh
    assert script.main([*argv, "--name", "tracking.json", "--save-dir", str(tmp_path / "ckpt")]) == 0
    record = json.loads((tmp_path / "tracking.json").read_text())
    assert (record["forward_before_obs"], record["keep_sensors"]) == ("full", True)
    kwargs = torch.load(tmp_path / "ckpt" / "model_0.pt", weights_only=False)["infos"]["env_kwargs"]
    assert kwargs["forward_before_obs"] is True and kwargs["forward_passes"] == "full" and kwargs["keep_sensors"]
    assert record["rl_cfg"]["algorithm"]["entropy_coef"] == 0.005 and record["rl_cfg"]["save_interval"] == 50
    assert record["motion_file"] == str(CLIP)
    assert record["motion_sha256"] == hashlib.sha256(CLIP.read_bytes()).hexdigest()
    (row,) = record["rows"]
    assert row["track_lin_vel"] is None and row["track_lin_vel_episodes"] is None
    rewards = row["episode_reward"]
    assert {"Episode_Reward/motion_body_pos", "Episode_Reward/self_collisions"} <= set(rewards)
    assert 0 < rewards["Episode_Reward/motion_body_pos"] <= 1.0  # weight 1 x exp(...) <= 1 per second
    # mjlab's Metrics/motion/<key>: every key, 24 steps over a 10-step horizon reset every row
    assert set(row["metrics"]) == {f"Metrics/motion/{k}" for k in MotionCommand.mjlab_metrics}
    assert all(v is not None and v >= 0 for v in row["metrics"].values())
    assert 0 < row["error_body_pos"] < 1.0 and row["error_body_pos"] == row["metrics"]["Metrics/motion/error_body_pos"]
    assert 0 < row["metrics"]["Metrics/motion/sampling_entropy"] <= 1.0
    policy = load_policy(tmp_path / "ckpt" / "model_0.pt")
    assert policy.source.env_id == "gym_graphreset/G1-Tracking-Flat-v0"


@pytest.mark.slow
def test_cpu_run_on_rough_terrain_records_terrain_levels(script: ModuleType, tmp_path: Path) -> None:
    """Go1 rough trains through the same script; each row holds the terrain level (mean and highest over the
    envs, within the generator's rows), which the flat task's rows leave empty."""
    argv = ["--env-id", "gym_graphreset/Go1-Velocity-Rough-v0", "--device", "cpu", "--num-envs", "4"]
    argv += ["--budget-s", "1", "--max-iterations", "1", "--max-episode-steps", "10", "--out", str(tmp_path)]
    assert script.main([*argv, "--name", "rough.json"]) == 0
    (row,) = json.loads((tmp_path / "rough.json").read_text())["rows"]
    level = row["terrain_level"]
    assert 0 <= level["mean"] <= level["max"] <= 9  # mjlab's rough terrain: 10 rows
    assert level["max"] == int(level["max"])
    # mjlab's Curriculum/terrain_levels/mean and /max over the iteration's steps with resets
    assert row["metrics"] == {
        "Curriculum/terrain_levels/mean": row["terrain_levels"],
        "Curriculum/terrain_levels/max": row["terrain_levels_max"],
    }
    assert 0 <= row["terrain_levels"] <= row["terrain_levels_max"] <= 9
    assert row["track_lin_vel"] is not None


@pytest.mark.slow
def test_training_starts_on_the_levels_of_the_envs_first_reset(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Go1 rough: the warm-up's steps count for no curriculum, so the training's first reset (RslRlVecEnv's)
    comes at the task's step 0, as mjlab's, and the runner starts on the levels of the env's first reset (a
    reset after the warm-up's 8 steps would judge every row's few-step episode and lower nearly every level)."""
    from gym_graphreset.mdp.terrain_levels import terrain_state

    env_id = "gym_graphreset/Go1-Velocity-Rough-v0"
    first: dict[str, torch.Tensor] = {}
    warm_up = script.warm_up

    def after_first_reset(env: object, seed: int, steps: int = 8) -> None:
        first["levels"] = terrain_state(env.unwrapped).levels.clone()  # type: ignore[attr-defined]
        warm_up(env, seed, steps)

    monkeypatch.setattr(script, "warm_up", after_first_reset)
    torch.manual_seed(42)
    wrapped, env = script.training_env(env_id, 32, "cpu", "masked_persistent", 42, {}, 24)
    runner = script.RUNNERS["stock"](env, script.mjlab_go1_cfg(env_id=env_id), log_dir=None, device="cpu")
    task = wrapped.unwrapped
    assert first["levels"].float().mean() > 1  # rows above level 0: a drop would show
    assert terrain_state(task).levels.tolist() == first["levels"].tolist()
    assert int(task.common_step) == 0  # the training counts its steps from 0, as mjlab's
    assert runner.env is env
    env.close()


def test_forward_before_obs_and_kept_sensors_reach_the_env(script: ModuleType) -> None:
    """``--forward-before-obs`` gives the task mjlab's forward before the observations (``full``: the whole forward,
    ``declared``: the passes read), ``--keep-sensors`` the model file's sensors; by default neither (the task's)."""
    tracking = ["--env-id", script.TRACKING_ENV_ID]
    assert script.env_kwargs(script._parser().parse_args(tracking)) == {}
    full = script._parser().parse_args([*tracking, "--forward-before-obs", "full", "--keep-sensors"])
    assert script.env_kwargs(full) == {"keep_sensors": True, "forward_before_obs": True, "forward_passes": "full"}
    declared = script._parser().parse_args(["--forward-before-obs", "declared", "--max-episode-steps", "9"])
    assert script.env_kwargs(declared) == {
        "max_episode_steps": 9,
        "forward_before_obs": True,
        "forward_passes": "declared",
    }
    assert script.env_kwargs(script._parser().parse_args(["--forward-before-obs", "off"])) == {}
    from gym_graphreset.registration import TASK_LAYER

    for env_id in script.ENV_IDS:  # every task takes them as make_vec options
        assert {"keep_sensors", "forward_before_obs", "forward_passes"} <= set(TASK_LAYER[env_id].options), env_id


def test_cli_refuses_bad_arguments(script: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad sizes and a missing reference are refused by flag name before anything is built."""
    for argv, flag in (
        (["--num-envs", "0"], "--num-envs"),
        (["--budget-s", "0"], "--budget-s"),
        (["--max-episode-steps", "0"], "--max-episode-steps"),
        (["--reference", "/nonexistent.json"], "--reference"),
        (["--motion-file", str(CLIP)], "--motion-file is for gym_graphreset/G1-Tracking-Flat-v0"),
        (["--forward-before-obs", "on"], "argument --forward-before-obs: invalid choice: 'on' (choose from"),
        (
            ["--env-id", "gym_graphreset/G1-Tracking-Flat-v0", "--motion-file", "/nonexistent.npz"],
            "--motion-file must be a clip (mjlab's npz), got /nonexistent.npz",
        ),
    ):
        with pytest.raises(SystemExit):
            script.main(argv)
        assert flag in capsys.readouterr().err


def test_the_packages_clip_is_recorded_as_the_tasks_default(script: ModuleType, tmp_path: Path) -> None:
    """The checkpoints' env keywords leave out the package's own clip (``like_for_like.sh`` passes its resolved
    path), so a checkpoint plays on a machine where that absolute path is not; another clip is recorded by path."""
    tracking = ["--env-id", script.TRACKING_ENV_ID, "--motion-file"]
    link = tmp_path / "link.npz"
    link.symlink_to(CLIP)
    for same in (CLIP, link):
        assert "motion_file" not in script.env_kwargs(script._parser().parse_args([*tracking, str(same)]))
    other = tmp_path / "other.npz"
    other.write_bytes(CLIP.read_bytes())
    assert script.env_kwargs(script._parser().parse_args([*tracking, str(other)])) == {"motion_file": str(other)}
