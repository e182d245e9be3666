"""Sphinx configuration of dpprep's documentation (``make docs``; warnings are
errors)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "dpprep"
author = "dpprep developers"
copyright = "2026, dpprep developers"  # noqa: A001 - Sphinx's own name for it

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings: list[str] = []  # warnings are errors (-W): none is silenced
html_theme = "furo"
html_title = "dpprep"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# The notebooks are rendered as stored (without outputs); the test suite executes each
# of them.
nb_execution_mode = "off"
# No dollar math: formulas are written in Unicode, and MathJax would be fetched from a
# CDN that an offline reader (and the browser test) cannot reach.
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
# "Attributes:" as field lists: a NamedTuple's fields are documented once
napoleon_use_ivar = True
html_static_path = ["_static"]
# What an example prints (```output blocks) is set apart from its code.
html_css_files = ["output.css"]
# without one the browser asks for /favicon.ico and logs a 404
html_favicon = "_static/favicon.svg"


def _no_protocol_signature(app, what, name, obj, options, signature, return_annotation):
    """A ``typing.Protocol`` (``Sampler``, ``PlanAccountant``, ``CalibrationStore``) is
    implemented, not called: its placeholder ``__init__`` would show as
    ``(*args, **kwargs)``, which is no signature. It is shown without one; its methods
    show theirs."""
    if what == "class" and getattr(obj, "_is_protocol", False):
        return "", return_annotation
    return None


def setup(app):
    app.connect("autodoc-process-signature", _no_protocol_signature)
