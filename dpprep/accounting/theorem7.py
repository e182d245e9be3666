"""Moved to :mod:`dpprep.preprocess.privacy.theorem7` (Hu et al.'s package); this name stays an
alias of that module, so that
imports written before the move keep working. New code imports
:mod:`dpprep.preprocess.privacy.theorem7`.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("dpprep.preprocess.privacy.theorem7")
