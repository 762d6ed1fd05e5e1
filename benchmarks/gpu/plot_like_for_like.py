"""The like-for-like training figure and table (Go1 or G1) from ``benchmarks/gpu/go1_like_for_like.sh``'s JSONs.

    .venv/bin/python benchmarks/gpu/plot_like_for_like.py benchmarks/results/go1-like-for-like
    .venv/bin/python benchmarks/gpu/plot_like_for_like.py DIR --out fig.png    # DIR searched recursively
    .venv/bin/python benchmarks/gpu/plot_like_for_like.py DIR --robot g1       # the G1 runs (ROBOT=g1)

Finds every ``<robot>-l4l-<RUN>-s<SEED>.json`` under the folders given, groups them by run (the record's ``run``,
else the file name), draws :func:`gym_graphreset.bench.training_plots.plot_training_comparison` (mjlab's
``track_lin_vel`` against wall-clock and against env steps; seeds thin, their mean thick) and prints a Markdown
table (:func:`~gym_graphreset.bench.training_plots.summarize_training_comparison`), also written next to the PNG.
It warns where the runs are not like for like: other GPUs, rsl-rl-lib versions, budgets or env counts, or
one of this library's runs not on mjlab's model file of the robot.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench.training_plots import plot_training_comparison, summarize_training_comparison

PATTERN = re.compile(r"(?P<robot>go1|g1)-l4l-(?P<run>.+)-s(?P<seed>-?\d+)\.json")
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


ROBOTS = ("go1", "g1")
"""The robots the driver trains (its ``ROBOT``)."""


def find_runs(folders: Sequence[Path], robot: str = "go1") -> dict[str, list[Path]]:
    """Run name -> its JSON files (sorted), from ``<robot>-l4l-*.json`` anywhere under ``folders``."""
    runs: dict[str, list[Path]] = {}
    for folder in folders:
        for path in sorted(folder.rglob(f"{robot}-l4l-*.json")):
            match = PATTERN.fullmatch(path.name)
            if match is None or match["robot"] != robot:
                continue
            run = json.loads(path.read_text()).get("run") or match["run"]
            runs.setdefault(run, []).append(path)
    rank = {run: i for i, run in enumerate(ORDER)}
    return dict(sorted(runs.items(), key=lambda item: (rank.get(item[0], len(ORDER)), item[0])))


def like_for_like_warnings(runs: dict[str, list[Path]], robot: str = "go1") -> list[str]:
    """What differs between the runs that should not: GPU, rsl-rl-lib (rsl_rl runs), budget, envs, model."""
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
    for key, record in records.items():
        if key.split("/")[0] != "mjlab" and not str(record.get("model_xml") or "").endswith(f"{robot}.xml"):
            warnings.append(f"{key}: not on mjlab's {robot}.xml (model_xml={record.get('model_xml')})")
    return warnings


def table(summary: list[dict[str, Any]]) -> str:
    """The summary as Markdown: final level, wall-clock and env steps, when mjlab's final level was reached."""
    lines = [
        "| run | seeds | final track_lin_vel | wall-clock (s) | env steps | reached mjlab's final at (s) "
        "| of mjlab's time |",
        "|---|---|---|---|---|---|---|",
    ]

    def num(x: float | None, spec: str) -> str:
        return "—" if x is None else format(x, spec)

    for row in summary:
        reached = row["reached_s"]
        at = "—" if reached is None else ", ".join("not reached" if r is None else f"{r:.0f}" for r in reached)
        lines.append(
            f"| {row['label']} | {row['seeds']} | {num(row['final'], '.3f')} | {num(row['wall_s'], '.0f')} | "
            f"{num(row['env_steps'], ',.0f')} | {at} | {num(row['fraction'], '.2f')} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Find the JSONs, print the warnings and the table, write the table and the PNG; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="folders holding <robot>-l4l-<RUN>-s<SEED>.json")
    parser.add_argument("--robot", choices=ROBOTS, default="go1", help="whose runs (default: go1)")
    parser.add_argument(
        "--out", type=Path, default=None, help="the PNG (default: <first folder>/<robot>-like-for-like.png)"
    )
    args = parser.parse_args(argv)
    robot = args.robot
    found = find_runs(args.folders, robot)
    if not found:
        parser.error(f"no {robot}-l4l-<RUN>-s<SEED>.json under {[str(f) for f in args.folders]}")
    runs = {LABELS.get(run, run): paths for run, paths in found.items()}
    png = args.out or args.folders[0] / f"{robot}-like-for-like.png"
    for warning in like_for_like_warnings(found, robot):
        print(f"WARNING: {warning}")
    text = table(summarize_training_comparison(runs, reference="mjlab"))
    print(text)
    png.parent.mkdir(parents=True, exist_ok=True)
    png.with_suffix(".md").write_text(text + "\n")
    title = f"{'Go1' if robot == 'go1' else 'G1'} flat velocity tracking, like for like with mjlab"
    if plot_training_comparison(runs, png, title, reference="mjlab"):
        print(f"wrote {png} and {png.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
