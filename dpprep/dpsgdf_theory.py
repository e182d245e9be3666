"""Moved to :mod:`dpprep.dpsgdf.theory` (Sun et al.'s package); this name stays an alias of that
module, so that
imports written before the move keep working. New code imports :mod:`dpprep.dpsgdf.theory`."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("dpprep.dpsgdf.theory")
