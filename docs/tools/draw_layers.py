"""Draw the package's layers and the imports between its folders (docs/img/layers.png, shown in docs/design.md).

    python docs/tools/draw_layers.py [--out docs/img/layers.png]

The layers are ``LAYERS`` of tests/test_layering.py, the test that holds every import to them: this script
loads that module by path and reads its layers and its import scan, so the picture and the rule cannot
disagree. One band per layer, bottom first; in each band one box per folder (a subpackage, ``core/``, or a
top-level module, ``wrappers.py``) with its number of modules (``.py`` files). Each arrow runs from a
folder down to a folder it imports, as wide as the import statements between them (imports under ``if
TYPE_CHECKING:`` are annotations and are not counted). An import that is not downward, which the test
refuses, would be drawn red and dashed. A folder of the package that no layer names is refused: it has no
place in the picture (nor in the test's rules).

Boxes are placed and arrows routed so that no arrow crosses a box: an arrow to the band just below is one
smooth step; one that passes bands bends into a free vertical lane beside the boxes it passes, runs down
it and bends out above its target, every bend in the strip between two bands. Every text is at least 10
points at 100 dpi: 14 px in the 800-px-wide PNG, 11 px or more in the page's 640-740-px column.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LAYERING = ROOT / "tests" / "test_layering.py"
OUT = ROOT / "docs" / "img" / "layers.png"

WIDTH = 8.0  # inches (800 px at DPI)
DPI = 100
BAND = 0.62  # band height, inches
BOX_W, BOX_H = 1.36, 0.44
LEFT = 0.95  # room for the band labels
TOP = 0.95  # room for the title and the legend
TEXT_PT = 10.0
LEGEND_COUNTS = (1, 5, 20)


@dataclass(frozen=True)
class Folder:
    """A folder of the package as the layering names it (``core``, ``wrappers``, ``__init__``).

    Attributes:
        name: Its name in ``LAYERS``.
        package: A subpackage (``core/``), not a top-level module (``wrappers.py``).
        modules: Its ``.py`` files.
    """

    name: str
    package: bool
    modules: int

    @property
    def label(self) -> str:
        """``core/`` or ``wrappers.py``."""
        return f"{self.name}/" if self.package else f"{self.name}.py"


@dataclass(frozen=True)
class Layering:
    """What the picture draws.

    Attributes:
        bands: The folders of each layer, bottom first (as ``LAYERS``), by name within a band (the picture
            orders a band's boxes to keep arrows short).
        imports: ``(importing folder, imported folder) -> import statements``, between different folders.
    """

    bands: list[list[Folder]]
    imports: dict[tuple[str, str], int]

    def layer(self) -> dict[str, int]:
        """Each folder's layer (0 at the bottom)."""
        return {f.name: i for i, band in enumerate(self.bands) for f in band}


def load_layering() -> ModuleType:
    """tests/test_layering.py, imported by path (the tests folder is not installed)."""
    spec = importlib.util.spec_from_file_location("test_layering", LAYERING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_layering(layering: Any = None) -> Layering:
    """The bands and the imports between folders, from the layering test's ``LAYERS`` and import scan.

    Args:
        layering: The loaded tests/test_layering.py (default: :func:`load_layering`), or anything with its
            ``PACKAGE``, ``LAYERS``, ``_module``, ``_folder`` and ``_import_statements``.

    Raises:
        ValueError: A folder of the package is in no layer, or a layer names a folder the package lacks.
    """
    layering = layering if layering is not None else load_layering()
    package: Path = layering.PACKAGE
    modules = {path: layering._module(path) for path in sorted(package.rglob("*.py"))}
    counts = Counter(layering._folder(m) for m in modules.values())
    placed = {name for layer in layering.LAYERS for name in layer}
    if unplaced := sorted(set(counts) - placed):
        raise ValueError(f"{unplaced} in no layer: add each to LAYERS in {LAYERING.relative_to(ROOT)}")
    if missing := sorted(placed - set(counts)):
        raise ValueError(f"LAYERS names {missing}, which {package.name}/ does not have")
    bands = [
        [Folder(name, (package / name).is_dir(), counts[name]) for name in sorted(layer)] for layer in layering.LAYERS
    ]
    imports: Counter[tuple[str, str]] = Counter()
    for path, module in modules.items():
        source = layering._folder(module)
        for imported in layering._import_statements(path):
            target = layering._folder(imported)
            if target != source:
                imports[source, target] += 1
    return Layering(bands, dict(imports))


def _width(count: int) -> float:
    """An arrow's line width (points) for ``count`` import statements."""
    return 0.7 + 0.8 * math.sqrt(count)


Box = tuple[float, float, float, float]  # left, bottom, right, top (inches)
Point = tuple[float, float]
Run = tuple[tuple[str, str], int]  # an arrow's first (0) or second (1) sideways run
# One colour per layer (its boxes' edges, the arrows it sends); no red: red marks an import that is not downward.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
           "#393b79", "#303030")  # fmt: skip
GAP = BAND - BOX_H  # the free strip between two bands' boxes, where arrows turn
LANE_STEP = 0.04  # inches between the candidate lanes of an arrow that passes bands
LANE_PAD = 0.07  # a lane keeps this far off the boxes it passes


def _centre_y(layer: int) -> float:
    """The height of the middle of band ``layer`` (inches from the bottom)."""
    return 0.05 + layer * BAND + BAND / 2


def _places(layering: Layering) -> dict[str, Box]:
    """Each folder's box: a band of one folder is centred; a band of several fills the width.

    The folders of a band of several are in the order (of every combination of the bands' orders) in which
    the arrows run the least sideways; the first such, in the bands' alphabetical orders, wins.
    """
    span = WIDTH - LEFT - 0.1
    centre = LEFT + span / 2
    fixed = {band[0].name: centre for band in layering.bands if len(band) == 1}
    multi = [[f.name for f in band] for band in layering.bands if len(band) > 1]

    def slots(order: tuple[str, ...]) -> dict[str, float]:
        return {name: LEFT + span * (k + 0.5) / len(order) for k, name in enumerate(order)}

    best: tuple[float, dict[str, float]] | None = None
    for orders in itertools.product(*(itertools.permutations(names) for names in multi)):
        x = {**fixed, **{name: v for order in orders for name, v in slots(order).items()}}
        sideways = sum(abs(x[s] - x[t]) * math.sqrt(n) for (s, t), n in layering.imports.items())
        if best is None or sideways < best[0] - 1e-9:
            best = (sideways, x)
    assert best is not None
    layer = layering.layer()
    ends = Counter(s for s, _ in layering.imports) + Counter(t for _, t in layering.imports)
    boxes: dict[str, Box] = {}
    for name, cx in best[1].items():
        # a band's only folder is widened to spread the arrows it sends or takes along its edges
        width = BOX_W if name not in fixed else max(BOX_W, min(2.6, 0.2 * ends[name]))
        cy = _centre_y(layer[name])
        boxes[name] = (cx - width / 2, cy - BOX_H / 2, cx + width / 2, cy + BOX_H / 2)
    return boxes


def _lanes(layering: Layering, boxes: dict[str, Box]) -> dict[tuple[str, str], float | None]:
    """The x of the vertical run of each arrow that passes bands (``None`` for one to the band just below).

    An arrow passing bands runs down a lane clear of every box of the bands it passes: the free lane with
    the least sideways travel from its source and to its target, kept off the lanes taken before it (the
    arrows spanning the most bands choose first).
    """
    layer = layering.layer()
    centre = {name: (b[0] + b[2]) / 2 for name, b in boxes.items()}
    taken: list[tuple[float, int, int]] = []  # (x, lowest layer passed, highest)
    lanes: dict[tuple[str, str], float | None] = {}
    candidates = [LEFT - 0.1 + LANE_STEP * k for k in range(int((WIDTH - LEFT) / LANE_STEP) + 1)]
    edges = sorted(layering.imports, key=lambda e: (layer[e[1]] - layer[e[0]], e))
    for source, target in edges:
        low, high = sorted((layer[source], layer[target]))
        if high - low <= 1:
            lanes[source, target] = None
            continue
        passed = [b for name, b in boxes.items() if low < layer[name] < high]
        free = [x for x in candidates if not any(b[0] - LANE_PAD < x < b[2] + LANE_PAD for b in passed)]
        crowd = {x: sum(abs(x - t) < 0.09 and lo < high and low < hi for t, lo, hi in taken) for x in free}
        x0, x1 = centre[source], centre[target]
        lane = min(free, key=lambda x: abs(x - x0) + abs(x - x1) + 1.5 * crowd[x])
        taken.append((lane, low, high))
        lanes[source, target] = lane
    return lanes


def _path(start: Point, end: Point, lane: float | None, levels: tuple[float, float]) -> Any:
    """The arrow's path: a smooth step down to the band below, or a bend into ``lane``, down it, and out.

    Every bend lies in the strip between two bands (no box there), its sideways run at the height ``levels``
    gives it there (the step's, then the bend out of the lane's), and the arrow leaves and arrives going
    straight down.
    """
    from matplotlib.path import Path as MplPath

    (x0, y0), (x1, y1) = start, end
    if lane is None:
        return MplPath([start, (x0, levels[0]), (x1, levels[0]), end], [MplPath.MOVETO, *[MplPath.CURVE4] * 3])
    vertices = [start, (x0, levels[0]), (lane, levels[0]), (lane, y0 - GAP), (lane, y1 + GAP)]
    vertices += [(lane, levels[1]), (x1, levels[1]), end]
    codes = [MplPath.MOVETO, *[MplPath.CURVE4] * 3, MplPath.LINETO, *[MplPath.CURVE4] * 3]
    return MplPath(vertices, codes)


def _levels(runs: dict[Run, tuple[int, float, float]]) -> dict[Run, float]:
    """The height of each sideways run in its strip: runs that overlap sideways in one strip get different ones.

    ``runs`` maps (arrow, 0 for its first run or 1 for its second) to (the band above the strip, from x,
    to x); the longest runs choose first, each the first of four heights (the middle ones first) that no
    run it overlaps took.
    """
    heights = [GAP * f for f in (0.62, 0.38, 0.8, 0.2)]  # below the band's bottom box edge
    chosen: dict[Run, float] = {}
    placed: list[tuple[int, float, float, int]] = []
    for key, (band, a, b) in sorted(runs.items(), key=lambda r: (-abs(r[1][2] - r[1][1]), r[0])):
        low, high = min(a, b) - 0.05, max(a, b) + 0.05
        used = {k for strip, lo, hi, k in placed if strip == band and lo < high and low < hi}
        k = next((k for k in range(len(heights)) if k not in used), 0)
        placed.append((band, low, high, k))
        chosen[key] = _centre_y(band) - BOX_H / 2 - heights[k]
    return chosen


def draw(layering: Layering, out: Path) -> None:
    """Draw ``layering`` into the PNG ``out``: bands bottom first, boxes, and an arrow per imported folder."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
    from PIL import Image

    n = len(layering.bands)
    height = n * BAND + TOP + 0.1
    fig = plt.figure(figsize=(WIDTH, height), dpi=DPI)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(0, height)  # one data unit is one inch either way
    ax.axis("off")
    layer = layering.layer()
    folders = {f.name: f for band in layering.bands for f in band}
    boxes = _places(layering)
    lanes = _lanes(layering, boxes)

    for i in range(n):
        y = _centre_y(i) - BAND / 2
        ax.add_patch(Rectangle((0, y), WIDTH, BAND, facecolor="#f3f3f3" if i % 2 == 0 else "white", zorder=0))
        ax.text(0.12, y + BAND / 2, f"layer {i}", va="center", fontsize=TEXT_PT, color="#444444")
    for name, (left, bottom, right, top) in boxes.items():
        folder, x, y = folders[name], (left + right) / 2, (bottom + top) / 2
        ax.add_patch(
            FancyBboxPatch(
                (left, bottom),
                right - left,
                top - bottom,
                boxstyle="round,pad=0,rounding_size=0.06",
                facecolor="white",
                edgecolor=PALETTE[layer[name] % len(PALETTE)],
                linewidth=1.6,
                zorder=3,
            )
        )
        noun = "module" if folder.modules == 1 else "modules"
        ax.text(x, y + 0.08, folder.label, ha="center", va="center", fontsize=TEXT_PT + 1, fontweight="bold",
                zorder=4)  # fmt: skip
        ax.text(x, y - 0.11, f"{folder.modules} {noun}", ha="center", va="center", fontsize=TEXT_PT,
                color="#333333", zorder=4)  # fmt: skip

    # An arrow leaves its box's bottom edge and reaches the imported box's top edge; the arrows of one edge
    # are spread along it in the order of where they go (their lane, or the other box), so they do not cross
    # there.
    centre = {name: (b[0] + b[2]) / 2 for name, b in boxes.items()}

    def heading(source: str, target: str, towards: str) -> float:
        lane = lanes[source, target]
        return lane if lane is not None else centre[towards]

    def spread(name: str, keys: list[tuple[float, tuple[str, str]]]) -> dict[tuple[str, str], float]:
        left, _, right, _ = boxes[name]
        return {edge: left + (right - left) * (k + 1) / (len(keys) + 1) for k, (_, edge) in enumerate(sorted(keys))}

    leaving: dict[tuple[str, str], float] = {}
    arriving: dict[tuple[str, str], float] = {}
    for name in boxes:
        out_keys = [(heading(s, t, t), (s, t)) for (s, t) in layering.imports if s == name]
        in_keys = [(heading(s, t, s), (s, t)) for (s, t) in layering.imports if t == name]
        leaving |= spread(name, out_keys)
        arriving |= spread(name, in_keys)
    runs: dict[Run, tuple[int, float, float]] = {}
    for source, target in layering.imports:
        x0, x1, lane = leaving[source, target], arriving[source, target], lanes[source, target]
        if lane is None:
            runs[(source, target), 0] = (layer[source], x0, x1)
        else:
            runs[(source, target), 0] = (layer[source], x0, lane)
            runs[(source, target), 1] = (layer[target] + 1, lane, x1)
    levels = _levels(runs)
    for (source, target), count in sorted(layering.imports.items(), key=lambda e: -e[1]):
        downward = layer[target] < layer[source]
        start, end = (leaving[source, target], boxes[source][1]), (arriving[source, target], boxes[target][3])
        heights = (levels[(source, target), 0], levels.get(((source, target), 1), 0.0))
        arrow = FancyArrowPatch(
            path=_path(start, end, lanes[source, target], heights),
            arrowstyle="-|>",
            mutation_scale=9 + 2 * math.sqrt(count),
            linewidth=_width(count),
            linestyle="-" if downward else "--",
            color=PALETTE[layer[source] % len(PALETTE)] if downward else "red",
            alpha=0.85,
            zorder=2,
        )
        ax.add_patch(arrow)

    top = _centre_y(n) - BAND / 2
    ax.text(0.12, top + TOP - 0.3, "gym_graphreset: its folders by layer, and the imports between them",
            fontsize=TEXT_PT + 3, fontweight="bold", va="center")  # fmt: skip
    handles = [Line2D([], [], color="#555555", linewidth=_width(c)) for c in LEGEND_COUNTS]
    labels = [f"{c} import statement{'s' if c > 1 else ''}" for c in LEGEND_COUNTS]
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.12 / WIDTH, (top + TOP - 0.5) / height),
              ncol=len(handles), frameon=False, fontsize=TEXT_PT, handlelength=2.2, borderaxespad=0,
              title="each arrow: from a folder down to one it imports, coloured by the importing layer",
              title_fontsize=TEXT_PT, alignment="left")  # fmt: skip
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=DPI, format="png")
    plt.close(fig)
    buffer.seek(0)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A palette of 96 colours keeps the edges of lines and letters smooth, at a quarter of the file's size.
    Image.open(buffer).convert("RGB").quantize(colors=96, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments, read the layering, draw it, print the bands."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG (default: {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    layering = read_layering()
    draw(layering, args.out)
    for i, band in reversed(list(enumerate(layering.bands))):
        print(f"layer {i:2d}: " + ", ".join(f"{f.label} ({f.modules})" for f in band))
    total = sum(layering.imports.values())
    print(f"wrote {args.out}: {len(layering.imports)} arrows, {total} import statements between folders")


if __name__ == "__main__":
    main()
