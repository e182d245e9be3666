"""The cost model of ``sun2024_selection`` for ``run_all --plan`` and ``--validate``: a pure
function of the profile that reads the experiment's own grid. It never feeds a unit (outside the
units' digest).
"""

from __future__ import annotations


from experiments.planning.flops import DATA_SHAPES, Cost


def cost(profile: str) -> Cost:
    """Per (ε, method, draw) a private random search and one non-private reference. The number of
    candidates K is random (truncated geometric): its mean ``mean_candidates`` is used."""
    from dpprep import dpsgdf
    from experiments.sun2024_selection import DELTA, GRIDS
    from experiments.sun2024_table1 import example_step_flops

    g = GRIDS[profile]
    rows, d, k = DATA_SHAPES["mnist"]
    n_train = min(g.subset or rows, rows) - g.validation_size
    flops = 0.0
    for method in (
        "dpsgdf",
        "dpsgd",
    ):  # the plan every candidate runs on the training part (selection.plan)
        cfg = dpsgdf.DpsgdfConfig(
            method=method,
            epsilon=g.epsilons[0],
            delta=DELTA,
            eps_F=g.eps_fs[0] if method == "dpsgdf" else None,
            feature_norm=g.feature_norms[0],
            batch_size=g.batch_size,
            epochs=g.epochs,
            iterates="last",
        )
        plan = dpsgdf.layout(cfg, n_train)
        candidate = (
            plan.steps * plan.batch_size * example_step_flops(d, k)
            + 2.0 * g.validation_size * d * k
        )
        flops += len(g.epsilons) * g.draws * g.mean_candidates * candidate
    cfg = dpsgdf.DpsgdfConfig(
        method="nonprivate",
        epsilon=None,
        eps_F=None,
        feature_norm=g.np_feature_norm,
        batch_size=g.np_batch_size,
        epochs=g.np_epochs,
        iterates="last",
    )
    plan = dpsgdf.layout(cfg, n_train)
    flops += len(g.np_learning_rates) * (
        plan.steps * plan.batch_size * example_step_flops(d, k, clipped=False)
        + 2.0 * g.validation_size * d * k
    )
    return Cost(
        2 * len(g.epsilons) * g.draws + 1,
        flops,
        None,
        floor=True,
        basis=(
            f"analytic: {2 * len(g.epsilons) * g.draws} selections × mean K = {g.mean_candidates:g}"
            " candidates (K random, truncated geometric: its mean) × (steps·B × (4dk + 2d + 8k) +"
            f" validation 2·V·d·k) + non-private {len(g.np_learning_rates)} η × epochs·⌈n/B⌉·B ×"
            f" (4dk + 5k), MNIST n_train={n_train}, d={d}, k={k}; one candidate per compiled call"
            " (chunk_size=1) runs below the batched-sweep rate; RDP calibrations and test scoring"
            " not counted"
        ),
    )
