"""Full-page screenshots of the built site in headless Chromium, to check it as a visitor sees it.

    make docs && python docs/tools/screenshots.py [--site docs/_build/html] [--out docs/_build/shots] [PAGE ...]

Each page is rendered in a 1,400-px-wide window (Debian's ``chromium``; ``apt-get install chromium``) and
saved as a PNG cut to the page's length. Look for code or tables cut off at the right and for figures whose
text is too small to read. Not run in CI: it needs a browser.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["index", "install", "quickstart", "tutorial", "benchmarks", "benchmarks-tables", "compile", "config",
         "ppo", "reliability", "api/wrapper"]  # fmt: skip
WIDTH = 1400
MAX_HEIGHT = 30000  # the window height; a longer page is cut there (and says so)


def shoot(browser: str, html: Path, png: Path) -> str:
    """Render ``html`` into ``png``, cut below the last non-background row; a one-line summary."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={WIDTH},{MAX_HEIGHT}", f"--screenshot={png}",
               html.as_uri()]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    image = Image.open(png).convert("RGB")
    # The page's footer sits at the window's bottom, after a blank band when the page is shorter than the
    # window: cut at the start of that band (rows equal to the last row, sidebars included, are blank).
    pixels = np.asarray(image)
    busy = np.flatnonzero((pixels != pixels[-1]).any(axis=(1, 2)))
    gaps = np.diff(busy)
    height = image.height
    if len(gaps) and gaps.max() > 400:
        height = int(busy[gaps.argmax()]) + 40
    image.crop((0, 0, WIDTH, height)).save(png)
    cut = " (cut: the page is longer)" if height >= image.height else ""
    return f"{png} {WIDTH}x{height}{cut}"


def main() -> None:
    """Screenshot the named pages (default: the main ones) of a built site."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", default=PAGES, help="page names, as in the site (api/wrapper)")
    parser.add_argument("--site", type=Path, default=ROOT / "docs" / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_build" / "shots")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        raise SystemExit("no Chromium found: apt-get install chromium (or put google-chrome on PATH)")
    args.out.mkdir(parents=True, exist_ok=True)
    for page in args.pages:
        html = args.site / f"{page}.html"
        if not html.exists():
            raise SystemExit(f"{html} does not exist: build the site first (make docs)")
        print(shoot(browser, html, args.out / f"{page.replace('/', '.')}.png"))


if __name__ == "__main__":
    main()
