"""The CleanRL recipe on CleanRL's real script: docs/cleanrl.md's diff, applied as written to a pinned commit of
``cleanrl/ppo_continuous_action.py``, runs a few hundred steps on the CPU and logs raw episode returns.

The script (MIT, CleanRL developers) is vendored byte for byte in ``tests/integrations/data/cleanrl/`` (with its
licence); ``GYM_GRAPHRESET_CLEANRL_SCRIPT`` points the test at another copy. Either way its sha256 must be the
pinned commit's. The recipe's parser and applier are tested on their own, always.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import runpy
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "cleanrl.md"
COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
SHA256 = "326dd8678bf9cc51abec833eb551ef2409a3804d604b689e1f0a084eca41f655"
VENDORED = Path(__file__).with_name("data") / "cleanrl" / "ppo_continuous_action.py"
SEPARATOR = "..."
ENV_VAR = "GYM_GRAPHRESET_CLEANRL_SCRIPT"

Hunk = list[tuple[str, str]]  # (op, text) with op in " -+"


def recipe_hunks(doc: str) -> list[Hunk]:
    """The first ```diff block of ``doc`` as hunks, split at the lines that are ``...`` alone."""
    block = re.search(r"^```diff\n(.*?)^```", doc, re.S | re.M)
    assert block, "docs/cleanrl.md has no ```diff block"
    hunks: list[Hunk] = [[]]
    for line in block.group(1).splitlines():
        op, text = (line[0], line[1:]) if line else (" ", "")
        assert op in " -+", f"not a diff line: {line!r}"
        if op == " " and text.strip() == SEPARATOR:
            hunks.append([])
        else:
            hunks[-1].append((op, text))
    return [h for h in hunks if h]


def _matches(pattern: str, line: str) -> bool:
    pattern, line = pattern.strip(), line.strip()
    if pattern.endswith(SEPARATOR):  # a removed line shown up to where it is unambiguous
        return line.startswith(pattern[: -len(SEPARATOR)].rstrip())
    return pattern == line


def apply_recipe(script: str, hunks: list[Hunk]) -> str:
    """``script`` with each hunk applied in order; each must match below the previous one."""
    lines, start = script.splitlines(), 0
    for n, hunk in enumerate(hunks):
        old = [text for op, text in hunk if op != "+"]
        at = next(
            (i for i in range(start, len(lines) - len(old) + 1) if all(map(_matches, old, lines[i : i + len(old)]))),
            None,
        )
        if at is None:
            raise ValueError(f"hunk {n} of the recipe does not match the script below line {start}: {old}")
        new, i = [], at
        for op, text in hunk:
            if op == "+":
                new.append(text)
            else:
                if op == " ":
                    new.append(lines[i])
                i += 1
        lines[at:i] = new
        start = at + len(new)
    return "\n".join(lines) + "\n"


def test_apply_recipe_replaces_in_order_and_refuses_a_missing_hunk() -> None:
    script = "a\nb = f(1, 2, 3)\nc\nb = f(4)\n"
    hunks = [[(" ", "a"), ("-", "b = f(1, ..."), ("+", "b = g()")], [("-", "b = f(4)"), ("+", "d")]]
    assert apply_recipe(script, hunks) == "a\nb = g()\nc\nd\n"
    with pytest.raises(ValueError, match=re.escape("hunk 1 of the recipe does not match the script below line 2")):
        apply_recipe(script, [hunks[0], [("-", "b = f(1, ..."), ("+", "e")]])  # hunks apply top to bottom


def test_recipe_parses() -> None:
    hunks = recipe_hunks(DOC.read_text())
    assert len(hunks) == 4
    assert ("+", "from gym_graphreset.integrations.cleanrl import make_envs") in hunks[0]


def _script() -> str:
    """The pinned script: from GYM_GRAPHRESET_CLEANRL_SCRIPT, else the vendored copy."""
    given = os.environ.get(ENV_VAR)
    data = Path(given).read_bytes() if given else VENDORED.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == SHA256, f"not CleanRL's ppo_continuous_action.py at {COMMIT} (sha256 {digest})"
    return data.decode()


@pytest.mark.slow
def test_documented_recipe_runs_cleanrls_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mujoco_warp", reason="the `mjwarp` extra runs gym_graphreset/InvertedPendulum-v5")
    pytest.importorskip("torch.utils.tensorboard", reason="CleanRL's script logs with tensorboard")
    patched = tmp_path / "ppo_continuous_action.py"
    patched.write_text(apply_recipe(_script(), recipe_hunks(DOC.read_text())))

    def cli(args_type: type) -> object:  # tyro.cli: the script's arguments, tiny and on the CPU
        settings = {"env_id": "gym_graphreset/InvertedPendulum-v5", "num_envs": 8, "num_steps": 32}
        settings |= {"total_timesteps": 512, "num_minibatches": 2, "update_epochs": 1, "cuda": False}
        return args_type(**settings)

    monkeypatch.setitem(sys.modules, "tyro", types.SimpleNamespace(cli=cli))
    monkeypatch.chdir(tmp_path)  # the script's SummaryWriter writes runs/ here
    namespace = runpy.run_path(str(patched), run_name="__main__")
    out = capsys.readouterr().out

    assert dataclasses.is_dataclass(namespace["args"]) and namespace["global_step"] == 512
    assert out.count("SPS:") == 2  # both iterations ran to the end
    returns = [float(r) for r in re.findall(r"episodic_return=(\S+)", out)]
    assert len(returns) >= 5, out[-2000:]
    # InvertedPendulum pays 1 per healthy step: raw returns are whole numbers (normalised ones would not be)
    assert all(r == int(r) and r >= 0 for r in returns), returns[:10]
