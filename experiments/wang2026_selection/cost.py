"""The cost model of ``wang2026_selection`` for ``run_all --plan`` and ``--validate``: a pure
function of the profile that reads the experiment's own grid. It never feeds a unit (outside the
units' digest).
"""

from __future__ import annotations

import math


from experiments.planning.flops import Cost, corrdp_dims, corrdp_runs_flops


def cost(profile: str) -> Cost:
    """Per panel (Adult b, Credit d) one training-only unit (seeds × method × ε × C on all rows, +
    the non-private run) and one selection unit per seed: 2·|ε| selections of K candidates each (K
    random, truncated geometric: its mean), trained in vmapped chunks of CHUNK (the last padded) on
    the training part and scored on the validation part. Credit runs with per-example clipping."""
    from dpprep.corrdp.data import ONE_HOT_MINMAX
    from experiments import wang2026_fig1 as fig1
    from experiments.sun2024_table1 import example_step_flops
    from experiments.wang2026_selection import CHUNK, METHODS, PANEL_KEYS, PROFILES

    p = PROFILES[profile]
    units, flops = 0, 0.0
    for key in PANEL_KEYS:
        panel = fig1.PANELS[key]
        n, d = corrdp_dims(panel)
        steps = max(1, round(panel.steps * p.step_fraction))
        # make_setup clips where the encoding bounds no record
        clipped = panel.dataset not in ONE_HOT_MINMAX
        grid = len(set(p.c_values[key]))  # None (C_theory) counts as one more point
        selections = len(METHODS) * len(p.epsilons)
        candidates = CHUNK * math.ceil(selections * p.mean_candidates / CHUNK)
        validation = p.validation_size[key]
        units += 1 + p.seeds
        flops += (
            corrdp_runs_flops(panel, p.seeds * selections * grid, steps, clipped=clipped)
            + corrdp_runs_flops(panel, 1, steps)  # the non-private reference
            + p.seeds
            * (
                candidates
                * (
                    steps * (n - validation) * example_step_flops(d, 1, clipped=clipped)
                    + 2.0 * validation * d
                )
                + selections * 2.0 * n * d
            )
        )
    return Cost(
        units,
        flops,
        None,
        floor=True,
        basis=(
            "analytic: per panel seeds × 2 methods × ε × C runs × T × n × per example-step FLOPs"
            " (Adult 4d + 5; Credit clipped per example, 6d + 8) + per seed CHUNK·⌈2·|ε|·mean K /"
            f" CHUNK⌉ candidates (K random, truncated geometric: mean {p.mean_candidates:g}; the"
            " last chunk padded) × T × (n − V) rows + validation 2·V·d; C_theory counted as a"
            " distinct point; chunks of CHUNK candidates, one call each, run below the"
            " batched-sweep rate; RDP accounting not counted"
        ),
    )
