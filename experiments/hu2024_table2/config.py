"""Table 2's settings: the point Table 2 is evaluated at and the δ of the rigorous DP-SGD-samp
pipeline's (ε, δ) column. Every profile uses the same (closed-form) settings."""

from __future__ import annotations

from dpprep.preprocess.privacy.table2 import Table2Point

# Spec §11.2's point: α = 11, ε = 1, p = 10, η = 0.1, n = 1000, δ_min^k = 1 (DP-SGD-samp's
# T = Table2Point.sgd_samp_steps).
POINT = Table2Point()
SGD_SAMP_DELTA = 1e-5  # for the (ε, δ) column only; Table 2 itself is RDP
