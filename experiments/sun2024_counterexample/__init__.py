"""Sun, Suresh, Menon (2024) §4 / Appendix A: the counter-example (spec §3.5, E1 and E2).

Data D' = n/2 × ((μ, +1), +1) ∪ n/2 × ((μ, −1), −1), hinge loss, no bias, w_0 = 0 (with w_0 = 0
D'' is D's mirror image, so D' suffices). Both experiments run the exact type-collapsed simulation
(:func:`dpprep.dpsgdf.theory.simulate_types`: a batch is a count per type), whose agreement with
the per-example path given the same draws is a unit test; here it is also cross-checked in
distribution at small n (``crosscheck.csv``).

* **E1** (Algorithm 1 as printed, C9): n ∈ {10³, 10⁴}, ε ∈ {0.5, 1, 2}, δ = 1e-5,
  μ ∈ {10², …, 10⁵}, C ∈ {0.1, 1, 10, sqrt(μ²+1)}, η ∈ {0.01, 0.1, 1, 10}, T ∈ {10, 100, 1000},
  B = ⌈max{n·sqrt(ε/(4T)), 1}⌉ with replacement, average iterate. Check, in every cell, the
  empirical Pr(w̄_T(2) ≤ 0) ≥ Φ(−nε/(μ·sqrt(8 ln(1/δ)))) − 3·(MC s.e.), and mean excess loss ≥
  that probability (Lemma 2).
* **E2** (C10): DPSGD (Poisson, PLD or exact q = 1 calibration; C × η × T × q), DPSGD-F
  (Algorithm 2 with the surrogates, (ε/3, δ/3) per stage, clip √2τ, step η/τ²; η × T × q) and an
  Algorithm-3-like arm (Gaussian mean with sensitivity R at ε_F = 0.1 and δ/2, translation, a
  constant-1 feature, DP-SGD at (ε − 0.1, δ/2)); best configuration per arm (mean over seeds),
  excess loss and accuracy against nε/μ (``e2.png``). Acceptance: at n = 10⁴, ε = 1, μ ≥ 10⁴,
  DPSGD-F's best accuracy ≥ 0.95 and loss ≤ 0.1, DPSGD's best accuracy ≤ 0.6 and loss ≥ 0.9.

Profiles: smoke (one cell of each, few repetitions), quick (E1: the full grid of spec §3.5 with
2000 repetitions per cell; E2: ε = 1, n ∈ {10³, 10⁴}, μ ∈ {10, …, 10⁶}, 20 seeds, T ∈ {100, 1000},
q ∈ {0.1, 1}), paper (E2 also at ε ∈ {0.5, 2}, n = 10⁵ and T = 10⁴).
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pandas as pd
from scipy.stats import norm

from dpprep.dpsgdf import theory as th
from dpprep.accounting import dp
from experiments.results import Comparison, config_json, provenance_json, save_figure, write_csv
from experiments import RunContext

DELTA = 1e-5


@dataclasses.dataclass(frozen=True)
class Cfg:
    e1_n: tuple = (1000, 10000)
    e1_eps: tuple = (0.5, 1.0, 2.0)
    e1_mu: tuple = (1e2, 1e3, 1e4, 1e5)
    e1_lr: tuple = (0.01, 0.1, 1.0, 10.0)
    e1_T: tuple = (10, 100, 1000)
    e1_reps: int = 2000
    e2_n: tuple = (1000, 10000)
    e2_mu: tuple = (1e1, 1e2, 1e3, 1e4, 1e5, 1e6)
    e2_eps: tuple = (1.0,)
    e2_lr: tuple = (0.01, 0.1, 1.0, 10.0, 100.0)
    e2_T: tuple = (100, 1000)
    e2_q: tuple = (0.1, 1.0)
    e2_seeds: int = 20
    grid_points: int = th.GRID_POINTS


CFGS = {
    "smoke": Cfg(
        e1_n=(1000,),
        e1_eps=(1.0,),
        e1_mu=(1e3,),
        e1_lr=(0.1,),
        e1_T=(10,),
        e1_reps=200,
        e2_n=(10000,),
        e2_mu=(1e4,),
        e2_lr=(1.0,),
        e2_T=(100,),
        e2_q=(1.0,),
        e2_seeds=3,
        grid_points=2001,
    ),
    "quick": Cfg(),
    "paper": Cfg(e2_n=(1000, 10000, 100000), e2_eps=(0.5, 1.0, 2.0), e2_T=(100, 1000, 10000)),
}


# ---------------------------------------------------------------- E1


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
        noise_std_sum=sigma * b,
        normaliser=b,
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


# ---------------------------------------------------------------- E2


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
                noise_std_sum=z * clip,
                normaliser=q * n,
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
                noise_std_sum=z * clip,
                normaliser=q * n,
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
        noise_std_sum=sigma * b,
        normaliser=b,
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


def plot(best: pd.DataFrame, path, cfg: Cfg | None = None) -> None:
    """E2: each arm's best accuracy and best loss against nε/μ, one line per (arm, n), at one ε."""
    import matplotlib.pyplot as plt

    # the paper's ε = 1 (e2.csv has every ε)
    eps = min(best["epsilon"].unique(), key=lambda e: abs(e - 1.0))
    best = best[best["epsilon"] == eps]
    colours, markers = (
        {"DPSGD": "C3", "DPSGD-F": "C0", "Alg-3-like": "C2"},
        {
            "DPSGD": "o",
            "DPSGD-F": "s",
            "Alg-3-like": "^",
        },
    )
    names = {"DPSGD": "DPSGD", "DPSGD-F": "DPSGD-F (Alg. 2)", "Alg-3-like": "Alg.-3-like"}
    ns = sorted(best["n"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    # Every n its own line style (the largest solid with filled markers, the others dashed, dotted,
    # dash-dotted with open markers), the arm by colour and marker.
    line_styles = dict(zip(reversed(ns), ["-", "--", ":", "-."] * len(ns)))
    for (arm, n), f in best.groupby(["arm", "n"]):
        f = f.sort_values("nε/μ")
        style = dict(
            color=colours[arm],
            marker=markers[arm],
            ls=line_styles[n],
            ms=6,
            mfc=colours[arm] if n == ns[-1] else "white",
            label=f"{names[arm]}, n = {n:,}",
            clip_on=False,
        )
        axes[0].plot(f["nε/μ"], f.best_accuracy, **style)
        axes[1].plot(f["nε/μ"], f.best_loss, **style)
    axes[0].axhline(0.5, color="grey", lw=1, ls=":")
    axes[0].annotate(
        "chance",
        (best["nε/μ"].max(), 0.5),
        xytext=(0, 3),
        textcoords="offset points",
        ha="right",
        fontsize=8,
        color="grey",
    )
    axes[0].set_ylim(0.45, 1.02)
    axes[0].set_ylabel("best mean accuracy")
    # The hinge loss is ≥ 0 and exactly 0 where an arm separates the data: a log axis cannot show 0,
    # so the axis is linear from 0 to 0.1 and logarithmic above (no negative range).
    axes[1].set_yscale("symlog", linthresh=0.1, linscale=0.6)
    top = 1.5 * max(float(best["best_loss"].max()), 0.2)
    ticks = [0.0] + [10.0**k for k in range(-1, math.floor(math.log10(top)) + 1)]
    axes[1].set_yticks(ticks, ["0"] + [f"{v:g}" for v in ticks[1:]])
    axes[1].set_ylim(0, top)
    axes[1].set_ylabel("best mean hinge loss (optimum 0)\nlinear below 0.1, log above")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("nε/μ")
        ax.grid(alpha=0.3)
    # Below the panels: a legend inside would cover a curve (e.g. DPSGD's jump at n = 10⁴).
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.06),
        ncol=3,
        fontsize=9,
        frameon=False,
    )
    over = "its configurations"
    if cfg is not None:
        fmt = lambda values: "{" + ", ".join(f"{v:g}" for v in values) + "}"  # noqa: E731
        over = (
            f"T ∈ {fmt(cfg.e2_T)}, q ∈ {fmt(cfg.e2_q)}, η ∈ {fmt(cfg.e2_lr)} and, for DPSGD and"
            f" Alg.-3-like, C ∈ {{0.1, 1, 10, √(μ²+1)}}; mean over {cfg.e2_seeds} seeds"
        )
    fig.suptitle(
        f"Counter-example (Sun et al. 2024, §4), ε = {eps:g}: DPSGD vs DPSGD-F (Alg. 2) vs"
        " Alg.-3-like"
    )
    fig.text(
        0.5,
        0.01,
        "Each point: the arm's best configuration (for accuracy and for loss separately) over\n"
        f"{over}; average iterate.",
        ha="center",
        va="bottom",
        fontsize=8.5,
    )
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    save_figure(fig, path)
    plt.close(fig)


def run(ctx: RunContext) -> list[Comparison]:
    cfg = CFGS[ctx.profile]
    comps: list[Comparison] = []
    # E1
    rows = []
    cells = [
        (n, e, m, t) for n in cfg.e1_n for e in cfg.e1_eps for m in cfg.e1_mu for t in cfg.e1_T
    ]
    start = time.perf_counter()
    for i, (n, e, m, t) in enumerate(cells):
        rows += ctx.store.run(
            f"e1/{n}/{e}/{m}/{t}/{cfg.e1_reps}/{cfg.e1_lr}",
            lambda n=n, e=e, m=m, t=t, i=i: {"rows": e1_cell(n, e, m, t, cfg, 1000 + i)},
        )["rows"]
    e1 = pd.DataFrame(rows)
    # Over ~1,100 cells, a few where the bound is tight (nε/μ ≈ 0: p ≈ bound ≈ ½) fall below
    # bound − 3 s.e. by chance (each with probability ~0.1 %). Every such cell is re-run once with
    # 10× the repetitions and a fresh seed, and judged on that run; both stages are recorded.
    e1["first_stage_holds"] = e1["holds"]
    for idx in e1.index[~e1["holds"].astype(bool)]:
        r = e1.loc[idx]
        big = dataclasses.replace(cfg, e1_lr=(float(r["lr"]),), e1_reps=10 * cfg.e1_reps)
        rec = ctx.store.run(
            f"e1-confirm/{r.n}/{r.epsilon}/{r.mu}/{r['T']}/{r.lr}/{big.e1_reps}",
            lambda r=r, big=big: {
                "rows": e1_cell(
                    int(r.n), float(r.epsilon), float(r.mu), int(r["T"]), big, 99_000 + int(idx)
                )
            },
        )["rows"]
        again = next(x for x in rec if math.isclose(x["C"], r.C))
        e1.loc[idx, ["confirm_p", "confirm_se", "confirm_reps"]] = (
            again["p_w2_le_0"],
            again["se"],
            again["reps"],
        )
        e1.loc[idx, "holds"] = again["holds"]
    e1["config"] = config_json(dataclasses.asdict(cfg))
    e1["versions"] = provenance_json()
    write_csv(e1, ctx.out_dir / "e1.csv")
    ctx.progress(f"E1: {len(e1)} cells in {time.perf_counter() - start:.1f}s")
    first = int((~e1["first_stage_holds"].astype(bool)).sum())
    comps.append(
        Comparison.claim(
            "C9 (E1) Lemma 8 bound Pr(w2 <= 0) >= Phi(-n eps/(mu sqrt(8 ln 1/delta))) - 3 s.e.",
            "holds in every cell",
            f"{int(e1.holds.astype(bool).sum())}/{len(e1)} cells",
            bool(e1.holds.astype(bool).all()),
            note=(
                f"{cfg.e1_reps} repetitions per cell; Algorithm 1 as printed; {first} cell(s) below"
                f" bound - 3 s.e. at first, each re-run once with {10 * cfg.e1_reps} repetitions"
                " (e1.csv: first_stage_holds, confirm_p)"
            ),
        )
    )
    comps.append(
        Comparison.claim(
            "C9 (E1) Lemma 2: mean excess loss >= Pr(w2 <= 0)",
            "every cell",
            f"{int(e1.loss_holds.sum())}/{len(e1)}",
            bool(e1.loss_holds.all()),
        )
    )
    worst = e1.loc[(e1.p_w2_le_0 - e1.bound).idxmin()]
    comps.append(
        Comparison.info(
            "E1 tightest cell",
            f"p={worst.p_w2_le_0:.3f} vs bound {worst.bound:.3f}",
            note=(
                f"n={worst.n} eps={worst.epsilon} mu={worst.mu:g} T={worst['T']} C={worst.C:g}"
                f" lr={worst.lr:g}"
            ),
        )
    )
    cc = ctx.store.run("crosscheck", crosscheck)
    agree = abs(cc["mean_per_example"] - cc["mean_collapsed"]) <= 4 * cc["se_diff"]
    comps.append(
        Comparison.claim(
            "E1 type-collapsed vs per-example (n=100): mean of w2",
            "agree (4 s.e.)",
            f"{cc['mean_collapsed']:.4f} vs {cc['mean_per_example']:.4f} (s.e."
            f" {cc['se_diff']:.4f})",
            agree,
        )
    )
    write_csv(pd.DataFrame([cc]), ctx.out_dir / "crosscheck.csv")
    # E2
    best = []
    cells = [(n, m, e) for n in cfg.e2_n for m in cfg.e2_mu for e in cfg.e2_eps]
    for i, (n, m, e) in enumerate(ctx.progress.track(cells, "E2 cell")):
        rec = ctx.store.run(
            f"e2/{n}/{m}/{e}/{cfg.e2_seeds}/{cfg.e2_T}/{cfg.e2_q}/{cfg.e2_lr}/{cfg.grid_points}",
            lambda n=n, m=m, e=e, i=i: e2_cell(n, m, e, cfg, 5000 + i),
        )
        best += rec["best"]
    e2 = pd.DataFrame(best)
    write_csv(e2, ctx.out_dir / "e2.csv")
    plot(e2, ctx.out_dir / "e2.png", cfg)
    accept = e2[(e2.n == 10000) & (e2.epsilon == 1.0) & (e2.mu >= 1e4)]
    if not accept.empty:
        f = accept[accept.arm == "DPSGD-F"]
        d = accept[accept.arm == "DPSGD"]
        ok = bool(
            (f.best_accuracy >= 0.95).all()
            and (f.best_loss <= 0.1).all()
            and (d.best_accuracy <= 0.6).all()
            and (d.best_loss >= 0.9).all()
        )
        comps.append(
            Comparison.claim(
                "C10 (E2) n=1e4, eps=1, mu>=1e4: DPSGD-F acc>=0.95 & loss<=0.1; DPSGD acc<=0.6 &"
                " loss>=0.9",
                "holds",
                "DPSGD-F acc "
                + "/".join(f"{v:.3f}" for v in f.best_accuracy)
                + " loss "
                + "/".join(f"{v:.3f}" for v in f.best_loss)
                + "; DPSGD acc "
                + "/".join(f"{v:.3f}" for v in d.best_accuracy)
                + " loss "
                + "/".join(f"{v:.3f}" for v in d.best_loss),
                ok,
                note=(
                    f"mu = {', '.join(f'{m:g}' for m in sorted(f.mu))}; best configuration per arm,"
                    f" {cfg.e2_seeds} seeds; T in {cfg.e2_T}, q in {cfg.e2_q}"
                ),
            )
        )
    for _, r in e2.iterrows():
        comps.append(
            Comparison.info(
                f"E2 n={r.n} mu={r.mu:g} eps={r.epsilon:g} {r.arm}",
                f"acc {r.best_accuracy:.3f} / loss {r.best_loss:.3f}",
                note=f"nε/μ = {r['nε/μ']:g}",
            )
        )
    return comps
