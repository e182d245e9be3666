"""Sun, Suresh & Menon (2024) §4, E2 (check C10): per (n, μ, ε) cell, DPSGD, DPSGD-F
(Algorithm 2) and an Algorithm-3-like arm over their configuration grids in the exact
type-collapsed simulation, and each arm's best configuration (mean over seeds)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpprep.accounting import dp
from dpprep.dpsgdf import theory as th

from .config import DELTA, Cfg


def _dpsgd_arm(n, mu, eps, cfg, rng) -> list[dict]:
    xt, yt, shares = th.counterexample_types(mu)
    r_bound = math.sqrt(mu * mu + 1)
    rows = []
    for steps in cfg.e2_T:
        for q in cfg.e2_q:
            z = th.dpsgd_noise(eps, DELTA, q, steps)
            combos = [(c, lr) for c in (0.1, 1.0, 10.0, r_bound) for lr in cfg.e2_lr]
            s = cfg.e2_seeds
            clip = np.repeat([c for c, _ in combos], s)
            lr = np.repeat([eta for _, eta in combos], s)
            counts = th.poisson_counts(np.array([n // 2, n // 2]), q, len(clip), rng)
            out = th.simulate_types(
                xt,
                yt,
                counts,
                clip=clip,
                lr=lr,
                stddev=z * clip,
                normalize_by=q * n,
                steps=steps,
                rng=rng,
            )
            for which in ("average", "last"):
                w = out[which]
                loss, acc = th.hinge_loss(w, xt, yt, shares), th.accuracy(w, xt, yt, shares)
                for i, (c, eta) in enumerate(combos):
                    sl = slice(i * s, (i + 1) * s)
                    rows.append(
                        {
                            "arm": "DPSGD",
                            "iterate": which,
                            "T": steps,
                            "q": q,
                            "C": c,
                            "lr": eta,
                            "z": z,
                            "loss": float(loss[sl].mean()),
                            "accuracy": float(acc[sl].mean()),
                        }
                    )
    return rows


def _translated_arm(n, mu, eps, cfg, rng, arm: str) -> list[dict]:
    """DPSGD-F (Algorithm 2) or the Algorithm-3-like arm: per seed a private translation, then
    DP-SGD on the (still two-type) translated data in R^3."""
    x, y, shares = th.counterexample_types(mu)
    r_bound = math.sqrt(mu * mu + 1)
    s = cfg.e2_seeds
    data_x, _ = th.counterexample(n, mu)
    feats, params = [], []
    for _ in range(s):
        if arm == "DPSGD-F":
            pre = th.algorithm2_features(
                data_x[[0, -1]].repeat(n // 2, axis=0), eps, DELTA, r_bound, rng, cfg.grid_points
            )
            mu_hat, tau = pre["mu_hat"], pre["tau"]
            aug = np.concatenate([x - mu_hat, np.full((2, 1), tau)], axis=1)
            norms = np.linalg.norm(aug, axis=1)
            aug = aug * np.minimum(1.0, math.sqrt(2) * tau / norms)[:, None]
            feats.append(aug)
            params.append((mu_hat, tau))
        else:  # Algorithm-3-like: Gaussian mean, sensitivity R, eps_F = 0.1, delta/2
            sigma = dp.analytic_gaussian_sigma(0.1, DELTA / 2) * r_bound
            mu_hat = data_x.mean(0) + sigma * rng.standard_normal(2) / n
            feats.append(np.concatenate([x - mu_hat, np.ones((2, 1))], axis=1))
            params.append((mu_hat, 1.0))
    feats = np.stack(feats)  # (s, 2, 3)
    rows = []
    for steps in cfg.e2_T:
        for q in cfg.e2_q:
            if arm == "DPSGD-F":
                z = th.dpsgd_noise(eps / 3, DELTA / 3, q, steps)
                combos = [(None, lr) for lr in cfg.e2_lr]
            else:
                z = th.dpsgd_noise(eps - 0.1, DELTA / 2, q, steps)
                combos = [(c, lr) for c in (0.1, 1.0, 10.0, r_bound) for lr in cfg.e2_lr]
            taus = np.array([t for _, t in params])
            xs = np.tile(feats, (len(combos), 1, 1))
            if arm == "DPSGD-F":
                clip = np.tile(math.sqrt(2) * taus, len(combos))
                lr = np.repeat([eta for _, eta in combos], s) / np.tile(taus, len(combos)) ** 2
            else:
                clip = np.repeat([c for c, _ in combos], s)
                lr = np.repeat([eta for _, eta in combos], s)
            counts = th.poisson_counts(np.array([n // 2, n // 2]), q, len(clip), rng)
            out = th.simulate_types(
                xs,
                y,
                counts,
                clip=clip,
                lr=lr,
                stddev=z * clip,
                normalize_by=q * n,
                steps=steps,
                rng=rng,
            )
            for which in ("average", "last"):
                theta = out[which]
                mus = np.tile(np.stack([m for m, _ in params]), (len(combos), 1))
                tt = np.tile(taus, len(combos))
                w = theta[:, :2]
                # Lemma 5 / step 6 (tau = 1 for the Alg-3 arm)
                b = tt * theta[:, 2] - np.sum(w * mus, axis=1)
                margins = y[None, :] * (w @ x.T + b[:, None])
                loss = np.maximum(0, 1 - margins) @ shares
                acc = (margins > 0).astype(float) @ shares
                for i, (c, eta) in enumerate(combos):
                    sl = slice(i * s, (i + 1) * s)
                    rows.append(
                        {
                            "arm": arm,
                            "iterate": which,
                            "T": steps,
                            "q": q,
                            "C": c,
                            "lr": eta,
                            "z": z,
                            "loss": float(loss[sl].mean()),
                            "accuracy": float(acc[sl].mean()),
                        }
                    )
    return rows


def e2_cell(n: int, mu: float, eps: float, cfg: Cfg, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rows = (
        _dpsgd_arm(n, mu, eps, cfg, rng)
        + _translated_arm(n, mu, eps, cfg, rng, "DPSGD-F")
        + _translated_arm(n, mu, eps, cfg, rng, "Alg-3-like")
    )
    frame = pd.DataFrame(rows)
    best = []
    for arm, f in frame[frame.iterate == "average"].groupby("arm"):
        best.append(
            {
                "n": n,
                "mu": mu,
                "epsilon": eps,
                "nε/μ": n * eps / mu,
                "arm": arm,
                "best_accuracy": float(f.accuracy.max()),
                "best_loss": float(f.loss.min()),
                "config_best_accuracy": f.loc[f.accuracy.idxmax(), ["T", "q", "C", "lr"]].to_dict(),
            }
        )
    return {"best": best, "configs": len(frame)}
