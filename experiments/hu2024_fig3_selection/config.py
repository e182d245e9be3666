"""The configuration of Hu et al. (2024) Figure 3 (c) with the step size selected privately: Fig 3's
case, privacy levels, seeds and step sizes per profile, and the private selection's validation
split, score noise and mean number of candidates."""

from __future__ import annotations

import dataclasses

from experiments.hu2024_fig3.config import Fig3Config

DELTA = 1e-5
SEED = 20240303


@dataclasses.dataclass(frozen=True)
class SelectionConfig:
    fig3: Fig3Config
    validation_size: int
    score_noise: float
    mean_candidates: float


PROFILES = {
    "smoke": SelectionConfig(
        Fig3Config(
            cases=((300, 20),),
            epsilons=(8.0,),
            seeds=2,
            steps=20,
            learning_rates=(0.3, 1.0),
            optimum_steps=500,
        ),
        validation_size=60,
        score_noise=3.0,
        mean_candidates=2.0,
    ),
    "quick": SelectionConfig(
        Fig3Config(cases=((2000, 500), (2000, 2000)), epsilons=(1.0, 2.0, 4.0, 8.0), seeds=5),
        validation_size=400,
        score_noise=10.0,
        mean_candidates=4.0,
    ),
}
PROFILES["paper"] = PROFILES["quick"]
