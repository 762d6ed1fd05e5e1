"""Sphinx configuration: MyST Markdown pages, furo, API reference from Google docstrings (autodoc + napoleon)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gym_graphreset  # noqa: E402

project = "gym_graphreset"
author = "the gym_graphreset developers"
copyright = "2026, the gym_graphreset developers"
release = gym_graphreset.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "h200-cuda-tests.log", "img/*.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = "gym_graphreset"

autodoc_default_options = {"members": True, "show-inheritance": True, "member-order": "bysource"}
autodoc_typehints = "description"
autodoc_class_signature = "separated"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Names re-exported by the package are documented once, in the module that defines them.
autodoc_inherit_docstrings = True
nitpicky = False
