"""Wang, Zhang & Cummings (2026) Table 2 / App. E: what the TV estimators run on — δ of the
synthetic factors, the synthetic m_s, the Medical variable splits, and per profile the Adult rows,
the histograms' bin counts and the synthetic data seeds."""

from __future__ import annotations

DELTA = 1e-4
M_S = (5, 10, 20, 50, 80)

GRIDS = {
    "smoke": {
        "adult_rows": 5000,
        "adult_bins": (10,),
        "credit_bins": (20,),
        "sepsis_bins": (None, 20),
        "data_seeds": (0,),
    },
    "quick": {
        "adult_rows": None,
        "adult_bins": (5, 10, 20),
        "credit_bins": (10, 20, 30),
        "sepsis_bins": (None, 5, 10, 20, 50),
        "data_seeds": (0, 1, 2, 3, 4),
    },
}
GRIDS["paper"] = GRIDS["quick"]

MEDICAL_PROCEDURE = {  # variant -> (continuous S, discrete S, continuous U)
    "default": (("bmi", "children"), ("smoker",), {"age": "continuous"}),
    "section5": (("age", "bmi", "children"), (), {}),
}
