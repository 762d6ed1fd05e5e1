"""The documentation site: it builds with no warnings and no unresolved reference, its API reference covers every
public name, the code on every page runs (Python blocks executed, ``>>>`` examples run as doctests), on the CPU,
and what users read speaks about the library, not about how it was made."""

from __future__ import annotations

import doctest
import importlib
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(page: Path, doctests: bool = False) -> list[str]:
    """The page's Python blocks: plain code, or (``doctests``) the ``>>>`` examples."""
    return [b for b in BLOCK.findall(page.read_text()) if b.lstrip().startswith(">>>") == doctests]


# sphinx-build with the optional extras' packages hidden, as on a machine with only the `docs` extra: an import
# of one of them outside autodoc's mocks fails as if it were not installed, and `importlib.util.find_spec` finds
# none of them (as for a package that is not installed: torch probes for onnx that way when it is imported).
DOCS_EXTRA_ONLY = """
import importlib.abc, importlib.util, sys
hidden = set(sys.argv[1].split(","))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
_find_spec = importlib.util.find_spec
def find_spec(name, package=None):
    return None if name.split(".")[0] in hidden else _find_spec(name, package)
importlib.util.find_spec = find_spec
from sphinx.cmd.build import main
sys.exit(main(sys.argv[2:]))
"""


def _optional_imports() -> set[str]:
    """Import names of the packages of every optional extra but `docs` and `dev`, from pyproject.toml."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dists = {
        re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for extra, requirements in extras.items()
        if extra not in {"docs", "dev"}
        for requirement in requirements
    }
    tops: dict[str, set[str]] = {}
    for top, owners in importlib.metadata.packages_distributions().items():
        for owner in owners:
            tops.setdefault(owner.lower().replace("_", "-"), set()).add(top)
    names = set()
    for dist in dists:
        # Its own package (`torchrl`, not the `benchmarks` folder its wheel also ships), else its only one (`warp`).
        own, installed = dist.replace("-", "_"), tops.get(dist, set())
        names.add(next(iter(installed)) if own not in installed and len(installed) == 1 else own)
    return names


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built as `make docs` does (-n -W), with only the `docs` extra's packages importable."""
    pytest.importorskip("sphinx", reason="the site needs the `docs` extra (sphinx, myst-parser, furo)")
    out = tmp_path_factory.mktemp("html")
    args = ["-n", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)]
    cmd = [sys.executable, "-c", DOCS_EXTRA_ONLY, ",".join(sorted(_optional_imports())), *args]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, f"sphinx-build -n -W (docs extra only) failed:\n{result.stderr[-4000:]}"
    return out


def test_site_builds_without_warnings(site: Path) -> None:
    """-W turns every warning (a broken internal link, a bad docstring, a page outside the toctree) into a failure;
    -n adds every cross-reference to a ``gym_graphreset`` name that does not resolve; the optional extras are
    hidden, so a module that needs one at import must be mocked in conf.py (``autodoc_mock_imports``)."""
    assert (site / "index.html").exists() and (site / "tutorial.html").exists()


def test_api_reference_covers_every_public_name(site: Path) -> None:
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    data = getattr(inventory, "data", inventory)  # a dict before Sphinx 9's Inventory object
    documented = {name for kind, entries in data.items() if kind.startswith("py:") for name in entries}
    pages = [p.stem for p in (DOCS / "api").glob("*.md") if p.stem != "index"]
    missing = []
    for page in pages:
        module = importlib.import_module(f"gym_graphreset.{page}")
        missing += [f"{module.__name__}.{n}" for n in module.__all__ if f"{module.__name__}.{n}" not in documented]
    assert not missing, f"public names missing from the API reference: {missing}"
    package_modules = {
        p.relative_to(ROOT / "gym_graphreset").with_suffix("").as_posix().replace("/", ".")
        for p in (ROOT / "gym_graphreset").rglob("*.py")
    }
    with_all = {
        m for m in package_modules if "__all__" in (ROOT / "gym_graphreset" / f"{m.replace('.', '/')}.py").read_text()
    }
    # a package's __init__ re-exports names documented where they are defined; private modules have no page
    defining = {m for m in with_all if not m.endswith("__init__") and not m.split(".")[-1].startswith("_")}
    assert defining <= set(pages), f"modules with __all__ and no API page: {sorted(defining - set(pages))}"


# Pages whose code builds and steps MuJoCo Warp envs or trains: `make test` runs them, the quick subset not.
SLOW_PAGES = {
    "own-robot.md",
    "quickstart.md",
    "rsl_rl.md",
    "sb3.md",
    "tasks.md",
    "terrain.md",
    "torchrl.md",
    "tutorial.md",
}


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW_PAGES else p for p in PAGES if _blocks(p)],
    ids=lambda p: p.name,
)
def test_python_blocks_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [*sys.path])
    namespace: dict = {"__name__": f"docs_{page.stem}"}  # one namespace per page, in order: a page builds up
    for i, block in enumerate(_blocks(page)):
        try:
            exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"{page.name}, Python block {i} failed: {err!r}") from err


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p, doctests=True)], ids=lambda p: p.name)
def test_doctest_examples_run(page: Path) -> None:
    # a reader runs a page in a fresh interpreter: no graphs compiled by earlier tests in this worker
    # (compile.md prints a compile report, whose recompiles would otherwise count theirs)
    torch._dynamo.reset()
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    globs: dict = {}
    for i, block in enumerate(_blocks(page, doctests=True)):  # one namespace per page, in order
        test = parser.get_doctest(block, globs, f"{page.name}[{i}]", str(page), 0)
        result = runner.run(test, clear_globs=False)
        globs = test.globs  # a DocTest copies its globals: carry them to the page's next block
        assert result.attempted > 0 and result.failed == 0, f"{page.name}: {result.failed} doctest example(s) failed"


# A code block shows this many columns in a 1,400-px browser window before it is cut off (scrolled sideways).
CODE_WIDTH = 88
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(\S*)(.*)$")
# MyST directives whose body is shown as code; any other `{directive}` fence (a note, a toctree) is not code.
CODE_DIRECTIVES = {"{code-block}", "{code}", "{sourcecode}", "{code-cell}", "{eval-rst}", "{doctest}"}


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block: ``` or ~~~, a language, a code directive."""
    lines, fence, is_code = [], "", False
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if not fence:
            if match:
                fence, info = match.group(1), match.group(2)
                is_code = not info.startswith("{") or info in CODE_DIRECTIVES
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not match.group(2):
            fence = ""  # a closing fence: the opening's character, at least as long, nothing after it
        elif is_code:
            lines.append((number, line))
    return lines


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_blocks_fit_the_page(page: Path) -> None:
    """No line of a page's code blocks is wider than CODE_WIDTH characters, so none is cut off on screen."""
    wide = [
        f"{page.relative_to(ROOT)}:{n}: {len(line)} > {CODE_WIDTH} characters: {line.strip()[:60]!r}"
        for n, line in _code_lines(page.read_text())
        if len(line) > CODE_WIDTH
    ]
    assert not wide, "code lines wider than the page:\n" + "\n".join(wide)


def test_code_line_scan_finds_each_kind_of_block() -> None:
    """The scan reads code fences of every kind (indented, ~~~, longer fences) and skips prose and non-code."""
    text = "\n".join(
        [
            "prose",  # 1
            "```python",
            "code",  # 3
            "```",
            "  ```{code-block} bash",
            "  indented",  # 6
            "  ```",
            "````text",
            "```",  # 9: a shorter fence inside a longer one is content
            "````",
            "~~~",
            "tilde",  # 12
            "~~~",
            "```{note}",
            "a note is prose",
            "```",
            "after",
        ]
    )
    assert [n for n, _ in _code_lines(text)] == [3, 6, 9, 12]


# Words about how the project was made rather than about the library (the pattern below lists them; the
# guard has to name what it refuses). Raw tool output (*.log, *.json under benchmarks/results/) is kept
# verbatim and not checked.
PROCESS_WORDS = re.compile(
    r"\bsessions?\b|\bdevice calls?\b|\bthe issue\b|\bissue's\b|\bissue notes?\b|nvidia-h200|\blent\b"
    r"|\bfiles per call\b|\bdid not come back\b"
    r"|\bprevious release\b|\bbefore the fix\b|\bcause is not known\b|\ban earlier version\b|\ba later release\b"
    r"|\bearlier releases'|\bbefore the update was\b|pip install '?gym_graphreset\[",
    re.IGNORECASE,
)
READER_FACING = sorted(
    {ROOT / "README.md"}
    | {p for p in DOCS.rglob("*") if p.suffix in {".md", ".py"} and "_build" not in p.parts}
    | {p for p in (ROOT / "benchmarks").rglob("*") if p.suffix in {".md", ".py", ".sh"}}
    | set((ROOT / "examples").rglob("*.py"))
)


@pytest.mark.parametrize("path", READER_FACING, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_development_process_words(path: Path) -> None:
    """Docs, README, benchmarks and examples say what was measured, on what hardware, with which command."""
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for m in PROCESS_WORDS.finditer(line)
    ]
    assert not hits, "development-process words in reader-facing text:\n" + "\n".join(hits)


def test_process_word_check_catches_each_word() -> None:
    """The pattern above matches every listed word, and not words that merely contain one (silent, issues)."""
    caught = ["one session's runs", "in one device call", "the issue's targets", "nvidia-h200-x2 was lent"]
    caught += ["the previous release: 33", "before the fix: 49", "the cause is not known"]
    caught += ["An earlier version of the library", "A later release cut", "earlier releases' keywords"]
    caught += ["before the update was captured", "pip install 'gym_graphreset[export]'"]
    for text in caught:
        assert PROCESS_WORDS.search(text), text
    for text in ["a silent poll", "excellent", "known issues in Gymnasium", "possession"]:
        assert not PROCESS_WORDS.search(text), text


def test_every_page_is_reachable_and_the_readme_links_the_site() -> None:
    index = (DOCS / "index.md").read_text()
    for page in PAGES:
        if page.stem != "index":
            assert re.search(rf"^{page.stem}$", index, re.M), f"{page.name} is not in the toctree"
    assert "docs/index.md" in (ROOT / "README.md").read_text()


def test_config_page_lists_every_field() -> None:
    from gym_graphreset.core.config import StepConfig

    text = (DOCS / "config.md").read_text()
    assert all(f"`{field}`" in text for field in StepConfig.fields())


HEADLINE = json.loads((DOCS / "headline.json").read_text())


def test_headline_numbers_are_those_of_its_results_file() -> None:
    """docs/headline.json is computed from one results file: its numbers are that file's, rounded."""
    results = json.loads((ROOT / HEADLINE["source"]).read_text())
    rows = {r["mode"]: r for r in results["results"] if r["num_envs"] == HEADLINE["num_envs"]}
    assert results["versions"]["gpu"] == HEADLINE["gpu"] and rows["step graph"]["env_id"] == HEADLINE["env_id"]
    ms = {mode: rows[mode]["ms_per_step"] for mode in ("step graph", "bare physics", "selected")}
    assert HEADLINE["step_graph_ms"] == f"{ms['step graph']:.2f}"
    assert HEADLINE["bare_physics_ms"] == f"{ms['bare physics']:.2f}"
    assert HEADLINE["selected_ms"] == f"{ms['selected']:.2f}"
    assert HEADLINE["step_graph_vs_bare_physics"] == f"{ms['step graph'] / ms['bare physics']:.3f}x"
    assert HEADLINE["step_graph_host_syncs"] == f"{rows['step graph']['host_syncs_per_step']:.0f}"
    assert HEADLINE["selected_host_syncs"] == f"{rows['selected']['host_syncs_per_step']:.0f}"
    for key in ("step_graph_ms", "bare_physics_ms", "selected_ms", "step_graph_vs_bare_physics"):
        assert HEADLINE[key] in HEADLINE["sentence"], key
    assert (DOCS / HEADLINE["figure"]).is_file()


@pytest.mark.parametrize("page", [ROOT / "README.md", DOCS / "index.md"], ids=lambda p: p.name)
def test_landing_pages_open_with_the_figure_and_the_headline(page: Path) -> None:
    text = page.read_text()
    figure = HEADLINE["figure"] if page.parent == DOCS else f"docs/{HEADLINE['figure']}"
    assert HEADLINE["sentence"] in text and figure in text
    # first after the title (and, in the README, its two commands): before any section or toctree
    first_section = min(i for i in (text.find("\n## "), text.find("```{toctree}")) if i >= 0)
    assert text.index(figure) < first_section and text.index(HEADLINE["sentence"]) < first_section


LEGGED = json.loads((DOCS / "legged.json").read_text())


def _figures_tool() -> Any:
    spec = importlib.util.spec_from_file_location("figures", DOCS / "tools" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_legged_table_is_computed_from_its_rounds_files() -> None:
    """docs/legged.json (the landing pages' comparison with mjlab) is what its alternated-rounds files give, every
    task with at least three rounds (one pair of runs is not a ratio)."""
    figures = _figures_tool()
    heads = figures.legged_headlines()
    assert LEGGED["table"] == figures.legged_table(heads, LEGGED["gpu"])
    assert LEGGED["ratios"] == {task: [round(v, 2) for v in h.ratio] for task, h in heads.items()}
    assert all(h.rounds >= 3 for h in heads.values())
    assert (DOCS / LEGGED["figure"]).is_file()


@pytest.mark.parametrize("page", [ROOT / "README.md", DOCS / "index.md"], ids=lambda p: p.name)
def test_landing_pages_open_with_the_comparison_with_mjlab(page: Path) -> None:
    """The first screen shows the legged tasks against mjlab: the figure and the table, before any section."""
    text = page.read_text()
    figure = LEGGED["figure"] if page.parent == DOCS else f"docs/{LEGGED['figure']}"
    first_section = min(i for i in (text.find("\n## "), text.find("```{toctree}")) if i >= 0)
    assert text.index(figure) < first_section and text.index(LEGGED["table"]) < first_section


# A comparison with mjlab is quoted only as a ratio of alternated rounds (each side run three times or more, in
# turn, in one run): mjlab's own figure moves 20-40 % between runs on the same card, so one run of each side is
# not a ratio. On a line that names mjlab (link targets aside), every "N.NNx" and every "mjlab's NNk", and on a
# table row of mjlab's every figure written with thousands separators ("98,607"; batch sizes aside), must be a
# median or range end of the rounds files behind docs/legged.json. A ratio that says what it is of within one
# side ("3.70x its own physics", "2.80x the selected path") is not a comparison; nor is a training run's
# wall-clock or throughput (a different measurement, one seed per side, on lines about training).
RATIO = re.compile(r"(?<![\w.])(\d+\.\d+)[x\u00d7](?!\w)")  # x or the multiplication sign
WITHIN_ONE_SIDE = re.compile(
    r"\**\s*(?:faster than\s+)?(?:(?:its|their|the|the library's)\s+)?(?:own\s+|bare\s+|captured\s+)*"
    r"(?:physics|selected)"
)
PEER_FIGURE = re.compile(r"\bmjlab(?:'s)?\s+(?:ran\s+|made\s+)?(\d+(?:\.\d+)?k)\b")
TRAINING_LINE = re.compile(r"wall-clock|of training|\btrain(?:ed|ing) at\b")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
ROUNDS_RATIO = re.compile(r"(\d+\.\d+) \((\d+\.\d+)-(\d+\.\d+)\) same model")
ROUNDS_PEER = re.compile(r"^\| mjlab \|.*?\| ([\d,]+) \(([\d,]+)-([\d,]+)\) \|", re.M)
PEER_ROW = re.compile(r"^\s*\|\s*mjlab\b(?!')")  # mjlab's row, not a row of ours "on mjlab's `go1.xml`"
THOUSANDS = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d,])")
BATCH_SIZES = {"16,384", "32,768", "65,536", "131,072"}


def _rounds_figures() -> tuple[set[str], set[str]]:
    """The ratios (median and range ends, "3.05") and mjlab's env-steps/s ("112k", "111.5k", "111,521") the
    rounds give, with the batch sizes a table row of mjlab's may name."""
    ratios = {f"{v:.2f}" for values in LEGGED["ratios"].values() for v in values}
    peer = set(BATCH_SIZES)
    for source in LEGGED["sources"].values():
        table = (ROOT / source).with_suffix(".md").read_text()
        found = [m.groups() for m in ROUNDS_RATIO.finditer(table)]
        assert found, f"no ours / mjlab column in {source}'s table"
        ratios |= {value for triple in found for value in triple}
        for triple in ROUNDS_PEER.findall(table):
            peer |= set(triple)
            for value in (int(v.replace(",", "")) / 1e3 for v in triple):
                peer |= {f"{value:.0f}k", f"{value:.1f}k"}
    return ratios, peer


def _quoted_against_mjlab(text: str) -> list[tuple[int, str]]:
    """(line number, figure) of each ratio ("3.05x") and mjlab figure ("112k") quoted on a line naming mjlab, and
    of each figure with thousands separators ("98,607") on a table row of mjlab's."""
    lines = [LINK_TARGET.sub("]", line) for line in text.splitlines()]
    quoted = []
    for n, line in enumerate(lines, 1):
        if "mjlab" not in line.lower() or TRAINING_LINE.search(line):
            continue
        wrapped = line + " " + (lines[n] if n < len(lines) else "")  # "4.26x its" / "own physics" across a wrap
        quoted += [(n, m.group(1) + "x") for m in RATIO.finditer(line) if not WITHIN_ONE_SIDE.match(wrapped, m.end())]
        quoted += [(n, m.group(1)) for m in PEER_FIGURE.finditer(line)]
        if PEER_ROW.match(line):
            quoted += [(n, m.group(0)) for m in THOUSANDS.finditer(line)]
    return quoted


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_comparisons_with_mjlab_are_those_of_alternated_rounds(page: Path) -> None:
    """Every ratio against mjlab, and every mjlab env-steps/s figure, quoted on a page is a median or range end of
    the alternated rounds (docs/legged.json's sources, both Go1 variants included)."""
    ratios, peer = _rounds_figures()
    wrong = [
        f"{page.name}:{n}: {figure}"
        for n, figure in _quoted_against_mjlab(page.read_text())
        if figure.removesuffix("x") not in (ratios if figure.endswith("x") else peer)
    ]
    assert not wrong, "figures against mjlab that no alternated rounds gave:\n" + "\n".join(wrong)


def test_mjlab_comparison_check_catches_each_form() -> None:
    """The check above flags one-run comparisons in the forms pages use, and leaves one side's own ratios alone."""
    ratios, peer = _rounds_figures()
    assert {"3.05", "2.62", "4.15", "3.06", "2.63", "4.16", "3.41", "3.09", "3.81"} <= ratios
    assert {"112k", "82k", "130k", "107k", "96k", "119k"} <= peer
    caught = {
        "the compiled step made 3.96x mjlab's env-steps/s": ["3.96x"],
        "G1 against mjlab, 4.6x and 2.72x at 16,384": ["4.6x", "2.72x"],
        "on mjlab's model: 3.5x (one run of each side), mjlab's: 4.26x.": ["3.5x", "4.26x"],
        "449.6k env-steps/s in this run and mjlab 98.6k": ["98.6k"],
        "ran 327k env-steps/s where mjlab ran 91k, 378k (mjlab 95k)": ["91k", "95k"],
        "377k against mjlab's 126k env-steps/s at 4096 envs": ["126k"],
        "| mjlab | 16,384 | 264,138 | 62.03 | 32.85 | 1.89 | 68.1 |": ["16,384", "264,138"],
    }
    for text, figures in caught.items():
        assert [f for _, f in _quoted_against_mjlab(text)] == figures, text
    not_caught = [
        "mjlab's step in the same run: 3.53x its own physics, 66 syncs",
        "mjlab's step is 4.26x its\nown physics",
        "the step costs **1.11x** its own physics (mjlab's model), **2.80x** the selected path",
        "<= 1.5x the library's selected path; mjlab's task",
        "reached mjlab's final reward in 120 s, 0.50 of mjlab's wall-clock",
        "it trained at 197k env-steps/s against mjlab's 103k, half of mjlab's wall-clock",
        "action scale 0.25 x effort / kp, as mjlab",
        "1.07x to 1.18x ([below](#go1-beside-mjlab))",
        "mjlab 1.6 against ours: 340k against mjlab's 112k, 3.05x",
        "| mjlab 1.6 | its task | 111,521 (82,015-129,610) | 36.73 (31.60-49.94) | 9.91 (9.90-9.93) | — |",
        "| mjlab 1.6 (its env, its train loop) | 24.7M | 103k | 1.150 | 207 s |",
        "| mjlab's `go1.xml` | 4096 | 398,024 | 10.29 | 7.39 | 1.39 | 0.12 |",
    ]
    for text in not_caught:
        assert all(f.removesuffix("x") in ratios | peer for _, f in _quoted_against_mjlab(text)), text


ANT_RATIO = re.compile(r"(\d\.\d{3})x (?:the )?bare (?:captured )?physics")


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_page_quotes_the_headline_ant_ratio(page: Path) -> None:
    """An Ant-v5 x4096 step-graph-to-physics ratio quoted in prose is the headline's (docs/headline.json)."""
    quoted = [
        m.group(1) + "x"
        for line in page.read_text().splitlines()
        if "Ant" in line and "4096" in line
        for m in ANT_RATIO.finditer(line)
    ]
    assert all(q == HEADLINE["step_graph_vs_bare_physics"] for q in quoted), quoted


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_no_undefined_shell_variables(page: Path) -> None:
    """A command a reader copies names its output folder; ``$OUT`` is defined only inside the benchmark scripts."""
    assert "$OUT" not in page.read_text()


def test_compile_is_spelled_as_the_config_page_does() -> None:
    """`compile=` (StepConfig's field), not the retired `compile_step` keyword, outside the config page."""
    hits = [p.name for p in [ROOT / "README.md", *PAGES] if p.name != "config.md" and "compile_step" in p.read_text()]
    assert not hits, hits


def test_slow_pages_are_pages_with_code() -> None:
    """Each page named slow exists and has code to run (a renamed page would otherwise run in the quick subset)."""
    assert {p.name for p in PAGES if _blocks(p)} >= SLOW_PAGES
