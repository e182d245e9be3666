"""The worked example's settings (Hu, Sanyal, Schölkopf 2024, on Adult): the pipeline's steps
(which column goes missing and how much, η of the quantization, k of PCA), the overall privacy
target, the mechanisms analysed after it, and the profiles."""

from __future__ import annotations

import dataclasses

from dpprep.preprocess.privacy.table1 import dp_gd, gaussian

EXPERIMENT = "hu2024_pipeline_demo"


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    n_rows: int | None  # None: all rows
    missing_column: str = "age"
    missing_rate: float = 0.01
    eta: float = 0.01
    pca_k: int = 1
    target_epsilon: float = 1.0
    delta: float = 1e-5
    smoothness: float = 1.25  # logistic loss, ||θ|| ≤ R = 1 (spec §1.5)
    steps: int = 100  # T, only to express DP-GD's ε as a noise std
    mechanisms: tuple[str, ...] = ("dp_gd", "gaussian")
    calibration_rtol: float = 1e-5
    seed: int = 0


PROFILES = {
    "smoke": DemoConfig(n_rows=2000, mechanisms=("dp_gd",), calibration_rtol=1e-2),
    "quick": DemoConfig(n_rows=None),
    "paper": DemoConfig(n_rows=None),
}

#: Mechanism name -> (title, config -> (mechanism ε -> the Table 1 mechanism)).
MECHANISMS = {
    "dp_gd": (
        "DP-GD (logistic, L=1, μ=1.25)",
        lambda cfg: lambda e: dp_gd(epsilon=e, lipschitz=1.0, smoothness=cfg.smoothness),
    ),
    "gaussian": (
        "Gaussian mechanism (L=Δ_f=1)",
        lambda cfg: lambda e: gaussian(epsilon=e, lipschitz=1.0, sensitivity=1.0),
    ),
}
