"""The datasets experiment's one setting: the CorrDP synthetic data set it generates (Wang, Zhang &
Cummings 2026, §5.2: n = 2000 rows, m = 100 features of which m_s = 10 sensitive)."""

from __future__ import annotations

SYNTHETIC_CONFIG = {"n": 2000, "m": 100, "m_s": 10, "noise_std": 5.0, "seed": 0}
