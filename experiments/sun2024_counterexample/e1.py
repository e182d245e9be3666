"""Sun, Suresh & Menon (2024) §4, E1 (check C9): Algorithm 1 as printed on the counter-example,
every (C, η) of one (n, ε, μ, T) cell at once in the exact type-collapsed simulation, against
Lemma 8's lower bound on Pr(w̄_T(2) ≤ 0) and Lemma 2; and the cross-check of that simulation
with the per-example path at small n."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from dpprep.dpsgdf import theory as th

from .config import DELTA, Cfg


def e1_cell(n: int, eps: float, mu: float, steps: int, cfg: Cfg, seed: int) -> list[dict]:
    """All (C, η) of one (n, ε, μ, T) at once: ``reps`` repetitions each, type-collapsed."""
    rng = np.random.default_rng(seed)
    xt, yt, shares = th.counterexample_types(mu)
    clips = (0.1, 1.0, 10.0, math.sqrt(mu * mu + 1))
    combos = [(c, lr) for c in clips for lr in cfg.e1_lr]
    reps = cfg.e1_reps
    b = th.alg1_batch_size(n, eps, steps)
    clip = np.repeat([c for c, _ in combos], reps)
    lr = np.repeat([eta for _, eta in combos], reps)
    sigma = np.array([th.alg1_sigma(n, eps, DELTA, c, steps) for c in clip])
    draws: dict[int, np.ndarray] = {}

    def k_plus(t):
        draws[t] = rng.binomial(b, 0.5, size=len(clip)).astype(float)
        return draws[t]

    out = th.simulate_counterexample(
        mu,
        k_plus,
        lambda t: b - draws.pop(t),
        clip=clip,
        lr=lr,
        stddev=sigma * b,
        normalize_by=b,
        steps=steps,
        rng=rng,
    )
    w = out["average"]
    bound = norm.cdf(-n * eps / (mu * math.sqrt(8 * math.log(1 / DELTA))))
    rows = []
    for i, (c, eta) in enumerate(combos):
        wi = w[i * reps : (i + 1) * reps]
        p = float(np.mean(wi[:, 1] <= 0))
        # MC standard error: the plug-in one, or the one under the null p = bound when larger (the
        # plug-in s.e. of p̂ = 0 is 0, which would make a bound of 1e-7 "fail" at any repetitions).
        se = math.sqrt(max(p * (1 - p), bound * (1 - bound)) / reps)
        loss = float(np.mean(th.hinge_loss(wi, xt, yt, shares)))
        rows.append(
            {
                "n": n,
                "epsilon": eps,
                "mu": mu,
                "T": steps,
                "B": b,
                "C": c,
                "lr": eta,
                "reps": reps,
                "p_w2_le_0": p,
                "se": se,
                "bound": bound,
                "mean_loss": loss,
                "holds": p >= bound - 3 * se,
                "loss_holds": loss >= p - 1e-12,
                "nε/μ": n * eps / mu,
            }
        )
    return rows


def crosscheck(seed: int = 0, reps: int = 400) -> dict:
    """Type-collapsed vs per-example (Algorithm 1, n = 100, μ = 10): the distribution of w̄(2)."""
    n, mu, eps, steps, clip, lr = 100, 10.0, 1.0, 20, 1.0, 1.0
    rng = np.random.default_rng(seed)
    x, y = th.counterexample(n, mu)
    per_example = np.array(
        [
            th.dpsgd_alg1(x, y, eps, DELTA, clip=clip, lr=lr, steps=steps, rng=rng)[1]
            for _ in range(reps)
        ]
    )
    xt, yt, shares = th.counterexample_types(mu)
    b = th.alg1_batch_size(n, eps, steps)
    sigma = th.alg1_sigma(n, eps, DELTA, clip, steps)
    collapsed = th.simulate_types(
        xt,
        yt,
        th.replacement_counts(shares, b, reps, rng),
        clip=clip,
        lr=lr,
        stddev=sigma * b,
        normalize_by=b,
        steps=steps,
        rng=rng,
    )["average"][:, 1]
    se = math.sqrt(np.var(per_example) / reps + np.var(collapsed) / reps)
    return {
        "mean_per_example": float(per_example.mean()),
        "mean_collapsed": float(collapsed.mean()),
        "std_per_example": float(per_example.std()),
        "std_collapsed": float(collapsed.std()),
        "se_diff": se,
        "p_le0_per_example": float(np.mean(per_example <= 0)),
        "p_le0_collapsed": float(np.mean(collapsed <= 0)),
    }
