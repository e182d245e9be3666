"""The cost model of ``hu2024_fig3`` for ``run_all --plan`` and ``--validate``: a pure function of
the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations

from typing import Any


from experiments.planning.flops import Cost, glm_flops


# dpprep.preprocess.dp_pca's top-k solver: dense eigh up to its DENSE_MAX_D, Lanczos (eigsh) with
# this many basis vectors (at least) above.
FIG3_LANCZOS_VECTORS = 40


def release_flops(d: int, k: int) -> float:
    """A floor on one Analyze-Gauss DP-PCA release's top-k eigenvectors: for d up to dp_pca's
    dense threshold (200) the dense eigh's tridiagonal reduction (4/3·d³); above, eigsh's first
    Lanczos basis (ncv = max(2k + 1, 40) matrix-vector products of 2d² each), not its restarts. (A
    full 9d³ eigendecomposition is not a
    floor: at d = 8,000 it overstated the measured run.)"""
    from dpprep.preprocess.dp_pca import DENSE_MAX_D  # the solver's own threshold, not a copy

    if d <= DENSE_MAX_D:
        return 4.0 / 3.0 * d**3
    return min(d - 1, max(2 * k + 1, FIG3_LANCZOS_VECTORS)) * 2.0 * d * d


def fig3_flops(cfg: Any, n: int, d: int, k: int) -> float:
    """One (n, d, k) case of Hu et al.'s Figure 3: per trainer, the d-dim runs of none, pca-rank,
    dp_pca-rank and PTR and the k-dim runs of pca-dim and dp_pca-dim, each ε × seeds × step sizes,
    at 6d + 8 (6k + 8) FLOPs per example-step; plus θ* (optimum_steps full-batch steps), the
    covariance (2·n·d²) and, per (ε, seed), one DP-PCA release's top-k eigenvectors
    (:func:`release_flops`)."""
    runs = len(cfg.epsilons) * cfg.seeds * len(cfg.learning_rates)
    flops = 0.0
    for trainer in cfg.trainers:
        examples = cfg.steps * n if trainer == "dp_gd" else cfg.sgd_epochs * n
        flops += glm_flops(d, 1, 4 * runs * examples) + glm_flops(k, 1, 2 * runs * examples)
    eig = len(cfg.epsilons) * cfg.seeds * release_flops(d, k)
    return flops + glm_flops(d, 1, cfg.optimum_steps * n) + 2.0 * n * d * d + eig


def cost(profile: str) -> Cost:
    from experiments.hu2024_fig3 import DATASET_BYTES, PROFILES

    cfg = PROFILES[profile]
    cases = cfg.all_cases()
    flops = sum(fig3_flops(cfg, n, d, k) for n, d, k in cases)
    peak = max(DATASET_BYTES + 4 * (3 * n * d + 2 * d * d) for n, d, _ in cases)
    ranks = sorted({k for *_, k in cases})
    return Cost(
        len(cases),
        flops,
        peak,
        floor=True,
        basis=(
            f"analytic: {len(cases)} (n, d, k) cases (k ∈ {ranks}) × trainers {list(cfg.trainers)}"
            f" × {len(cfg.learning_rates)} step sizes: 6 runs/(ε, seed, η) × examples × (6d + 8)"
            " (k-dim runs 6k + 8), θ*, covariance 2nd², DP-PCA top-k per (ε, seed): 4/3·d³ dense"
            " (d ≤ 200), max(2k + 1, 40) Lanczos products of 2d² above; peak = DP-PCA dataset"
            " chunk + data + d×d (est.)"
        ),
    )
