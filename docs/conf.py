"""Sphinx configuration: MyST Markdown pages, furo, API reference from Google docstrings (autodoc + napoleon).

The site builds from the ``docs`` extra alone: the optional engines and trainers are mocked for autodoc, and
``make docs`` builds with ``-n -W`` (every cross-reference to a ``gym_graphreset`` name must resolve).
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.ext.napoleon.docstring import GoogleDocstring

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
exclude_patterns = ["_build", "tools", "img/*.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = "gym_graphreset"
html_static_path = ["_static"]
html_css_files = ["custom.css"]

autodoc_default_options = {"members": True, "show-inheritance": True, "member-order": "bysource"}
autodoc_typehints = "description"
autodoc_class_signature = "separated"
# Optional extras, mocked so that the `docs` extra alone documents every module (their pages still list
# every public name; base classes from a mocked package are shown by name).
autodoc_mock_imports = [
    "stable_baselines3",
    "torchrl",
    "tensordict",
    "envpool",
    "rsl_rl",
    "skrl",
    "warp",
    "mujoco",
    "mujoco_warp",
    "matplotlib",
]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Names re-exported by the package are documented once, in the module that defines them.
autodoc_inherit_docstrings = True

# Every reference to this package's names must resolve (`-n -W`); other packages' types (no intersphinx:
# the build works offline), private names and type variables are left as plain text.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|numpy|gymnasium|collections|contextlib|pathlib|typing|tqdm|types)\..*"),
    (r"py:.*", r"(stable_baselines3|torchrl|tensordict|envpool|rsl_rl|skrl|warp|mujoco|mujoco_warp)(\..*)?"),
    (r"py:.*", r"(.*\.)?_\w+"),  # private helpers and base classes
    (r"py:.*", r"(.*\.)?[A-Z]"),  # type variables (T, F)
]


def _inline_attribute_without_type(self: GoogleDocstring) -> tuple[str, list[str]]:
    """An attribute's or property's first line is prose, never ``type: description``.

    Napoleon reads ``"What runs a step: ..."`` as a type named "What runs a step"; the types come from the
    annotations (``autodoc_typehints``), so the whole docstring is the description.
    """
    lines = self._dedent(self._consume_to_end())
    return "", self.__class__(lines, self._config).lines()


def _resolve_reexport(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.reference | None:
    """Link a name as users write it to where it is documented.

    ``gym_graphreset.ResetSelection`` (a re-export) and a bare ``ResetSelection`` in a module that imports it
    both resolve to ``gym_graphreset.core.selection.ResetSelection``, the one place autodoc documents it.
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    head, _, rest = target.removeprefix("gym_graphreset.").partition(".")
    scopes = [sys.modules.get(node.get("py:module") or ""), gym_graphreset]
    for scope in (s for s in scopes if s is not None):
        defining = getattr(getattr(scope, head, None), "__module__", None) or ""
        if not defining.startswith("gym_graphreset."):
            continue
        resolved = f"{defining}.{head}" + (f".{rest}" if rest else "")
        if resolved != target:
            return env.get_domain("py").resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], resolved, node, contnode
            )
    return None


def _figures_link_to_full_size(app: Sphinx, doctree: nodes.document) -> None:
    """Every figure fills the content column and links to its full-size image.

    Sphinx links an image to its file only when it is scaled (``html_scaled_image_link``), so a plain
    Markdown ``![alt](img/x.png)`` is given the column's width.
    """
    for image in doctree.findall(nodes.image):
        if not any(key in image for key in ("scale", "width", "height")):
            image["width"] = "100%"


def setup(app: Sphinx) -> None:
    """Register the attribute-docstring rule, the re-export resolver and the figure links above."""
    GoogleDocstring._consume_inline_attribute = _inline_attribute_without_type  # type: ignore[method-assign]
    app.connect("missing-reference", _resolve_reexport)
    app.connect("doctree-read", _figures_link_to_full_size)
