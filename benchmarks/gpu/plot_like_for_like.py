"""The like-for-like training figure and table of one task from ``benchmarks/gpu/like_for_like.sh``'s JSONs.

    .venv/bin/python benchmarks/gpu/plot_like_for_like.py benchmarks/results/go1-like-for-like
    .venv/bin/python benchmarks/gpu/plot_like_for_like.py DIR --out fig.png        # DIR searched recursively
    .venv/bin/python benchmarks/gpu/plot_like_for_like.py DIR --task g1-tracking   # the TASK=g1-tracking runs

Finds every ``<task>-l4l-<RUN>-s<SEED>.json`` under the folders given, groups them by run (the record's ``run``,
else the file name), draws :func:`gym_graphreset.bench.training_plots.plot_training_comparison` (the task's
headline metric, :data:`TASKS`, against wall-clock and against env steps; seeds thin, their mean thick) and
prints a Markdown table (:func:`~gym_graphreset.bench.training_plots.summarize_training_comparison`, with the
final values of the task's other metrics), also written next to the PNG. It warns where the runs are not like
for like: other GPUs, rsl-rl-lib versions, budgets or env counts, one of this library's runs not on mjlab's
model file of the robot, (tracking) runs on different clips, or a run cut short before its budget
(:func:`cut_short`; mjlab's cut run makes every "of mjlab's time" a fraction of a cut curve).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gym_graphreset.bench.plotting import final_level, load_training_curve
from gym_graphreset.bench.training_plots import plot_training_comparison, summarize_training_comparison


class Task(NamedTuple):
    """What the figure of one ``TASK`` of the driver draws.

    Attributes:
        robot: Whose mjlab model file the runs must be on (``go1`` / ``g1``).
        key: The headline row field (mjlab's metric) drawn and timed.
        ylabel: Its axis label.
        higher_is_better: ``False`` for an error: "reached mjlab's final level" means at most it.
        title: The figure's title.
        also: Other row fields whose final values the table shows.
    """

    robot: str
    key: str
    ylabel: str
    higher_is_better: bool
    title: str
    also: tuple[str, ...] = ()


TASKS = {
    "go1": Task(
        "go1",
        "track_lin_vel",
        "linear-velocity tracking reward\n(mjlab's Episode_Reward/track_linear_velocity, per s)",
        True,
        "Go1 flat velocity tracking, like for like with mjlab",
    ),
    "g1": Task(
        "g1",
        "track_lin_vel",
        "linear-velocity tracking reward\n(mjlab's Episode_Reward/track_linear_velocity, per s)",
        True,
        "G1 flat velocity tracking, like for like with mjlab",
    ),
    "g1-tracking": Task(
        "g1",
        "error_body_pos",
        "tracked bodies' position error, m\n(mjlab's Metrics/motion/error_body_pos; lower is better)",
        False,
        "G1 motion tracking, like for like with mjlab",
        # no episode_length: mjlab's is rsl_rl's mean over the last 100 episodes, ours the iteration's finished
        # episodes', and ours end at the clip's end where mjlab resamples mid-episode: not comparable
        ("error_anchor_pos", "error_body_rot", "error_joint_pos"),
    ),
    "go1-rough": Task(
        "go1",
        "terrain_levels",
        "mean terrain level\n(mjlab's Curriculum/terrain_levels/mean)",
        True,
        "Go1 rough terrain: the curriculum's level, like for like with mjlab",
        ("terrain_levels_max", "track_lin_vel"),
    ),
}
"""The driver's ``TASK`` -> what its figure draws."""
PATTERN = re.compile(r"(?P<task>go1|g1|g1-tracking|go1-rough)-l4l-(?P<run>.+)-s(?P<seed>-?\d+)\.json")
"""The file names the driver writes."""
ORDER = ("mjlab", "stock", "finalobs", "syncfree", "fast", "ppo-example")
"""Runs in the legend's and table's order (others after them, by name)."""
LABELS = {
    "mjlab": "mjlab",
    "stock": "ours: rsl_rl PPO + OnPolicyRunner",
    "finalobs": "ours: FinalObsPPO + OnPolicyRunner",
    "syncfree": "ours: PPO + SyncFreeOnPolicyRunner",
    "fast": "ours: FastPPO + SyncFreeOnPolicyRunner",
    "ppo-example": "ours: PPO example (captured update)",
}
"""Run -> legend label; ``"mjlab"`` is the reference."""


EXIT_STATUS = {
    124: "timed out: the driver's timeout stopped it",
    137: "killed: still running 10 s after the timeout, or out of memory",
}
"""The training exit statuses the driver explains (any other is a failure)."""


def cut_short(record: dict[str, Any]) -> str | None:
    """Why a run's curve ends before its wall-clock budget was spent, or ``None`` for a run that spent it.

    A run is cut short when the driver recorded a training exit status other than 0 (``exit_status``; 124: timed
    out, 137: killed), when its JSON has no ``stopped`` (the trainers write it, with ``train_s``, after their
    training loop; a run stopped earlier leaves the rows of the iterations done without it), or when its last
    row comes before its ``budget_s``. That last check reads rows logged every iteration (those with an
    ``iteration``: the rsl_rl script's and mjlab's); the PPO example logs every few iterations, so its last row
    may come a few iterations before its budget, and the driver gives it ``stopped`` when it exits with 0.
    """
    status = record.get("exit_status")
    if status not in (None, 0):
        return f"its training exited with status {status} ({EXIT_STATUS.get(status, 'failed')})"
    if "stopped" not in record:
        return "its JSON has no `stopped`: the trainer was stopped before its training loop ended"
    rows = record.get("rows") or []
    budget = record.get("budget_s")
    if rows and "iteration" in rows[-1] and budget is not None and rows[-1]["wall_s"] < budget:
        return (
            f"its last row is at {rows[-1]['wall_s']:.0f} s, before its budget of {budget:.0f} s "
            f"(stopped: {record['stopped']})"
        )
    return None


def find_runs(folders: Sequence[Path], task: str = "go1") -> dict[str, list[Path]]:
    """Run name -> its JSON files (sorted), from ``<task>-l4l-*.json`` anywhere under ``folders``."""
    runs: dict[str, list[Path]] = {}
    for folder in folders:
        for path in sorted(folder.rglob(f"{task}-l4l-*.json")):
            match = PATTERN.fullmatch(path.name)
            if match is None or match["task"] != task:
                continue
            run = json.loads(path.read_text()).get("run") or match["run"]
            runs.setdefault(run, []).append(path)
    rank = {run: i for i, run in enumerate(ORDER)}
    return dict(sorted(runs.items(), key=lambda item: (rank.get(item[0], len(ORDER)), item[0])))


def like_for_like_warnings(runs: dict[str, list[Path]], task: str = "go1") -> list[str]:
    """What differs between the runs that should not (GPU, rsl-rl-lib of rsl_rl runs, budget, envs, model, clip),
    and each run cut short before its budget (:func:`cut_short`)."""
    robot = TASKS[task].robot
    records: dict[str, dict[str, Any]] = {
        f"{run}/{path.name}": json.loads(path.read_text()) for run, paths in runs.items() for path in paths
    }
    warnings = []

    def differs(what: str, values: dict[str, Any]) -> None:
        if len(set(map(str, values.values()))) > 1:
            warnings.append(f"{what} differ: " + ", ".join(f"{k}={v}" for k, v in values.items()))

    differs("GPUs", {k: r.get("versions", {}).get("gpu") for k, r in records.items()})
    differs(
        "rsl-rl-lib versions",
        {k: r.get("rsl_rl_lib") for k, r in records.items() if k.split("/")[0] != "ppo-example"},
    )
    differs("budgets (s)", {k: r.get("budget_s") for k, r in records.items()})
    differs("env counts", {k: r.get("num_envs") for k, r in records.items()})
    if task == "g1-tracking":
        differs("clips (motion_sha256)", {k: r.get("motion_sha256") for k, r in records.items()})
    for key, record in records.items():
        if key.split("/")[0] != "mjlab" and not str(record.get("model_xml") or "").endswith(f"{robot}.xml"):
            warnings.append(f"{key}: not on mjlab's {robot}.xml (model_xml={record.get('model_xml')})")
    for key, record in records.items():
        if (why := cut_short(record)) is not None:
            reference = "; it is mjlab's run: every \"of mjlab's time\" is measured against this cut curve"
            warnings.append(f"{key}: cut short before its budget, {why}{reference if key.startswith('mjlab/') else ''}")
    return warnings


def final_values(runs: dict[str, list[Path]], keys: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Run -> each of ``keys``' final level (:func:`~gym_graphreset.bench.plotting.final_level`), mean over seeds."""
    out: dict[str, dict[str, float | None]] = {}
    for run, paths in runs.items():
        curves = [load_training_curve(p) for p in paths]
        out[run] = {}
        for key in keys:
            finals = [f for rows in curves if (f := final_level(rows, key)) is not None]
            out[run][key] = sum(finals) / len(finals) if finals else None
    return out


def table(
    summary: list[dict[str, Any]], key: str = "track_lin_vel", also: dict[str, dict[str, Any]] | None = None
) -> str:
    """The summary as Markdown: final level of ``key``, wall-clock, env steps, when mjlab's final was reached.

    ``also``: label -> other metrics' final values, one column each (in the order of the first label's).
    """
    extra = list(next(iter(also.values()))) if also else []
    lines = [
        f"| run | seeds | final {key} | wall-clock (s) | env steps | reached mjlab's final at (s) | of mjlab's time |"
        + "".join(f" final {k} |" for k in extra),
        "|---|---|---|---|---|---|---|" + "---|" * len(extra),
    ]

    def num(x: float | None, spec: str) -> str:
        return "—" if x is None else format(x, spec)

    for row in summary:
        reached = row["reached_s"]
        at = "—" if reached is None else ", ".join("not reached" if r is None else f"{r:.0f}" for r in reached)
        others = (also or {}).get(row["label"], {})
        lines.append(
            f"| {row['label']} | {row['seeds']} | {num(row['final'], '.3f')} | {num(row['wall_s'], '.0f')} | "
            f"{num(row['env_steps'], ',.0f')} | {at} | {num(row['fraction'], '.2f')} |"
            + "".join(f" {num(others.get(k), '.3f')} |" for k in extra)
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Find the JSONs, print the warnings and the table, write the table and the PNG; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="folders holding <task>-l4l-<RUN>-s<SEED>.json")
    parser.add_argument(
        "--task", "--robot", dest="task", choices=sorted(TASKS), default="go1", help="whose runs (default: go1)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the PNG (default: <first folder>/<task>-like-for-like.png)"
    )
    args = parser.parse_args(argv)
    task = TASKS[args.task]
    found = find_runs(args.folders, args.task)
    if not found:
        parser.error(f"no {args.task}-l4l-<RUN>-s<SEED>.json under {[str(f) for f in args.folders]}")
    runs = {LABELS.get(run, run): paths for run, paths in found.items()}
    png = args.out or args.folders[0] / f"{args.task}-like-for-like.png"
    for warning in like_for_like_warnings(found, args.task):
        print(f"WARNING: {warning}")
    summary = summarize_training_comparison(runs, "mjlab", task.key, task.higher_is_better)
    text = table(summary, task.key, final_values(runs, task.also) if task.also else None)
    print(text)
    png.parent.mkdir(parents=True, exist_ok=True)
    png.with_suffix(".md").write_text(text + "\n")
    if plot_training_comparison(runs, png, task.title, "mjlab", task.key, task.higher_is_better, task.ylabel):
        print(f"wrote {png} and {png.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
