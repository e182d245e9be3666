"""The settings of Wang, Zhang & Cummings (2026)'s checks (spec §6): per profile how many random TV
vectors test the inequality chain (item 24) and how many draws test the Laplace tail bound (item
25), the Laplace check's setting, and the seeds of the non-private training checks."""

from __future__ import annotations

GRIDS = {
    "smoke": {"chain_vectors": 2_000, "laplace_draws": 10_000},
    "quick": {"chain_vectors": 20_000, "laplace_draws": 10_000},
    "paper": {"chain_vectors": 100_000, "laplace_draws": 100_000},
}

#: Item 25: K = m = 100 coordinates of sensitivity 1, m_s = 10 sensitive, every insensitive one
#: with the synthetic population TV at m_s = 10 (0.364, item 13).
LAPLACE_SETUP = {
    "m": 100,
    "m_s": 10,
    "tv": 0.364,
    "coord_sens": 1.0,
    "epsilon": 1.0,
    "beta": 0.1,
    "seed": 0,
}

#: Seeds of the training checks in every profile (spec §5.1: seeds 0..9). Item 7 is full-batch GD
#: (deterministic: one run); the Sepsis seeds differ a lot (2 of seeds 0..9 stall near 58 %), so a
#: mean over fewer seeds would be biased.
TRAINING_SEEDS = 10
