"""Sun, Suresh & Menon (2024), DPSGD-F accounting (spec §5.4, §8 C1–C4): the cases checked and
the smoke profile's subset of them (the paper's numbers are in ``targets.csv``)."""

from __future__ import annotations

DELTA = 1e-5
# C1: the private mean's ε_F
SIGMA_F_EPS_F = (0.02, 0.05, 0.1, 0.15, 0.2)
# C2 / C3: the rows (n, B, E, ε) of spec §5.4's table of noise multipliers, in its order
Z_CASES = (
    (60000, 256, 20, 1),
    (60000, 1024, 40, 1),
    (60000, 4096, 80, 1),
    (60000, 16384, 160, 1),
    (60000, 1024, 40, 2),
    (60000, 4096, 80, 2),
    (50000, 1024, 40, 1),
    (50000, 4096, 80, 1),
    (50000, 16384, 160, 1),
    (50000, 4096, 80, 2),
)
# smoke: one MNIST-sized row and one CIFAR-sized row
SMOKE_Z_CASES = Z_CASES[1:2] + Z_CASES[-1:]
# C4: the cost of the mean step at ε_F (None: no mean step) for one run (n, B, E) at ε
COST_CASE = (60000, 4096, 80)
COST_EPSILON = 1.0
COST_EPS_F = (None, 0.02, 0.05, 0.1, 0.15, 0.2)
SMOKE_COST_EPS_F = COST_EPS_F[:3]
