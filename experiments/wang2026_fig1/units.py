"""Figure 1's units of work through ``ctx.store``: one per (panel, C) under a profile, keyed on
the panel's protocol, and one per network panel and plain-SGD variant for the mechanism
measurement; also item 14 on its own for ``wang2026_checks``."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import pandas as pd

from dpprep.corrdp.data import CorrDPData
from experiments import RunContext
from experiments.results import Comparison, config_json, provenance_json

from .compute import insensitive_displacement, run_unit
from .config import MECHANISM_C, MECHANISM_EPSILON, PANELS, VARIANT_OF, VARIANTS, Panel, Profile
from .model import c_grid, panel_data
from .report import item14
from .tables import panel_frame, summarize


def unit_key(
    prefix: str, panel: Panel, c: float, seeds: int, epsilons: Sequence[float], steps: int
) -> str:
    spec = config_json(
        dataclasses.asdict(panel) | {"seeds": seeds, "eps": list(epsilons), "steps": steps}
    )
    return f"{prefix}/{panel.key}/{panel.dataset}/m_s={panel.m_s}/C={c:.6g}/{spec}"


def run_panels(
    ctx: RunContext,
    panels: Sequence[Panel],
    profile: Profile,
    prefix: str,
    population: set[str] = frozenset(),
) -> tuple[pd.DataFrame, list[dict]]:
    """Every (panel, C) unit through ``ctx.store.run_many``; returns the tidy frame and the
    records."""
    items, metas = panel_items(ctx, panels, profile, prefix, population)
    return assemble(ctx, metas, ctx.store.run_many(items))


def panel_items(
    ctx: RunContext,
    panels: Sequence[Panel],
    profile: Profile,
    prefix: str,
    population: set[str] = frozenset(),
) -> tuple[list, list]:
    """The ``(key, compute)`` units of every (panel, C) and their ``(key, panel)``, for one
    ``run_many`` (a sharded run must submit a grid in one call)."""
    datas: dict[tuple, CorrDPData] = {}
    items, metas = [], []
    for panel in panels:
        dkey = (panel.dataset, panel.m_s, panel.variant)
        if dkey not in datas:
            datas[dkey] = panel_data(panel, ctx.data_dir)
        data = datas[dkey]
        seeds = profile.seeds[panel.key]
        steps = max(1, round(panel.steps * profile.step_fraction))
        for c, c_mode in c_grid(panel, data, profile):
            key = unit_key(prefix, panel, c, seeds, profile.epsilons, steps)

            def compute(panel=panel, data=data, c=c, c_mode=c_mode, seeds=seeds, steps=steps):
                ctx.progress(
                    f"panel {panel.key} ({panel.dataset}, m_s={panel.m_s}) C={c:.3g}: "
                    f"{seeds} seeds x {len(profile.epsilons)} eps"
                )
                return run_unit(
                    panel,
                    data,
                    c,
                    c_mode,
                    seeds,
                    profile.epsilons,
                    steps,
                    extra_population=panel.key in population,
                )

            items.append((key, compute))
            metas.append((key, panel))
    return items, metas


def assemble(ctx: RunContext, metas: list, records: list[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """The tidy frame and the records (tagged with panel and key) of :func:`panel_items`' units."""
    frames = [
        panel_frame(rec, panel, provenance_json(ctx.store.provenance(key)))
        for (key, panel), rec in zip(metas, records)
    ]
    return pd.concat(frames, ignore_index=True), [
        dict(rec, panel=panel.key, key=key) for (key, panel), rec in zip(metas, records)
    ]


def mechanism_items(ctx: RunContext, profile: Profile) -> list:
    """One unit per network panel and its plain-SGD variant: :func:`insensitive_displacement` at
    ε = 1, C = :data:`MECHANISM_C` (the panel's seeds and step cut)."""
    items = []
    for variant, base in VARIANT_OF.items():
        for panel in (PANELS[base], VARIANTS[variant]):
            seeds = profile.seeds[panel.key]
            steps = max(1, round(panel.steps * profile.step_fraction))
            spec = config_json(
                dataclasses.asdict(panel)
                | {
                    "seeds": seeds,
                    "steps": steps,
                    "C": MECHANISM_C,
                    "eps": MECHANISM_EPSILON,
                }
            )

            def compute(panel=panel, seeds=seeds, steps=steps):
                ctx.progress(
                    f"mechanism: panel {panel.key} ({panel.optimizer}) U-row displacement, {seeds}"
                    " seeds"
                )
                return insensitive_displacement(
                    panel, panel_data(panel, ctx.data_dir), MECHANISM_C, seeds, steps
                )

            items.append((f"fig1-mechanism/{panel.key}/{spec}", compute))
    return items


def item14_check(
    data_dir=None, *, seeds: int = 10, epsilons: Sequence[float] = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
) -> Comparison:
    """Item 14 on its own (for ``wang2026_checks``): panel a at C = 1 through :func:`run_unit`."""
    panel = PANELS["a"]
    record = run_unit(
        panel, panel_data(panel, data_dir), 1.0, "paper", seeds, epsilons, panel.steps
    )
    return item14(summarize(panel_frame(record, panel, "")), epsilons)
