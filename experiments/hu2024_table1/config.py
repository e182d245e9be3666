"""Table 1's settings: the symbolic table's columns and headers, and the settings at which the
DP-SGD-samp row is cross-checked against dp-accounting and realisable pairs.

Every profile uses the same (closed-form) settings.
"""

from __future__ import annotations

import math

COLUMNS = ("mechanism", "assumptions", "rdp", "srdp", "range", "note")
HEADERS = (
    "Mechanism",
    "Assumptions",
    "RDP ε(α)",
    "SRDP ε̃(α, τ)",
    "Valid orders",
    "Correction vs. printed",
)
TEX_HEADERS = (
    "Mechanism",
    "Assumptions",
    r"RDP $\varepsilon(\alpha)$",
    r"SRDP $\tilde\varepsilon(\alpha,\tau)$",
    "Orders",
    "Note",
)

# DP-SGD-samp cross-check settings (n, T, ε), z = sqrt(2T)/(εn) ≥ 1; the last is the worst case
# of our (n, z) sweep (n = 20, z = 1.2). Orders: the admissible range (from SGD_SAMP_MIN_ORDER)
# is checked in full; the raw formula below it is reported for information.
SGD_SAMP_SETTINGS = ((1000, 2_000_000, 1.0), (1000, 200_000, 0.3), (20, 100, math.sqrt(200) / 24))
SGD_SAMP_ORDERS = (3.25, 3.5, 4.0, 8.0, 16.0, 24.0)
SGD_SAMP_RAW_ORDERS = (1.25, 1.5, 2.0, 2.5, 3.0)
