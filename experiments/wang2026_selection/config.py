"""The experiment's configuration: its seeds, methods and panels, the profiles (nominal ε, the C
grid per panel, the private selection's size) and the candidates per compiled call.

Figure 1 of Wang, Zhang & Cummings (2026) sets the panels, their data and the paper's ε list
(:mod:`experiments.wang2026_fig1`); the selection's pieces follow Liu & Talwar (STOC 2019) and
Papernot & Steinke (ICLR 2022), as :mod:`dpprep.selection` implements them.
"""

from __future__ import annotations

import dataclasses

from dpprep.corrdp import noise
from experiments.wang2026_fig1 import EPSILONS

EXPERIMENT = "wang2026_selection"
SEED = 20260503
METHODS = ("standard", "corrdp")
PANEL_KEYS = ("b", "d")
PREPROCESSING_NOTE = (
    "not charged: the encoding (MinMax / one-hot, StandardScaler) is fitted on the data; as in the "
    "paper, the encoded rows are taken as the private data set"
)


@dataclasses.dataclass(frozen=True)
class Profile:
    """Seeds, nominal ε, the C grid per panel (None = C_theory = L²T/n²), the selection's size
    (K's mean, validation rows, score noise per panel) and the step cut."""

    seeds: int
    epsilons: tuple[float, ...]
    c_values: dict[str, tuple[float | None, ...]]
    validation_size: dict[str, int]
    score_noise: dict[str, float]
    mean_candidates: float
    step_fraction: float = 1.0


_VALIDATION = {"b": 5000, "d": 3000}
_SCORE_NOISE = {"b": 40.0, "d": 24.0}  # 0.8 pp of validation accuracy on either
PROFILES = {
    "smoke": Profile(
        2,
        (0.5, 2.0),
        {"b": (1e-3, 3e-3), "d": (1e-3, 1e-2)},
        {"b": 2000, "d": 1000},
        {"b": 8.0, "d": 4.0},
        2.0,
        step_fraction=0.02,
    ),
    "quick": Profile(
        5,
        (0.2, 0.5, 1.0),
        {"b": (1e-3, 3e-3, 1e-2), "d": (1e-3, 1e-2, 1e-1)},
        _VALIDATION,
        _SCORE_NOISE,
        4.0,
    ),
    "paper": Profile(
        10,
        EPSILONS,
        {"b": (None, 1e-3, 3e-3, 1e-2, 1e-1, 1.0), "d": (None, *noise.PAPER_C_SWEEP)},
        _VALIDATION,
        _SCORE_NOISE,
        4.0,
    ),
}


#: Candidates per compiled call: every call has this shape (the last padded with copies), so a run
#: compiles once per panel however many candidates the draws give.
CHUNK = 8
