"""The figures read like a paper's: every series distinguishable, honest axes, legends that cover no
data and can be read, the paper's names. Each plot is drawn from the committed quick results' CSVs
(``results/``) and the drawn matplotlib figure is inspected."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from experiments import (
    audit,
    hu2024_fig2,
    hu2024_fig3,
    sun2024_counterexample,
    sun2024_table1,
)  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _csv(relative: str) -> pd.DataFrame:
    path = RESULTS / relative
    if not path.exists():
        pytest.skip(f"{relative} not in results/")
    return pd.read_csv(path)


def _drawn(monkeypatch, plot, frame, *args):
    """The figure ``plot(frame, path, *args)`` saves (saving itself is skipped): every figure
    saves through ``experiments.plotting.save``, whose ``save_figure`` is replaced."""
    from experiments import plotting

    figures = []
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path, **kwargs: figures.append(fig))
    plot(frame, "unused.png", *args)
    (fig,) = figures
    return fig


def _series(ax):
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def _legend_font_sizes(fig):
    legends = list(fig.legends) + [
        ax.get_legend() for ax in fig.axes if ax.get_legend() is not None
    ]
    return [text.get_fontsize() for legend in legends for text in legend.get_texts()]


def test_hu2024_fig3_every_series_has_its_own_colour_and_marker(monkeypatch):
    fig = _drawn(monkeypatch, hu2024_fig3.plot, _csv("hu2024_fig3/fig3_tuned.csv"))
    for ax in fig.axes:
        series = [container.lines[0] for container in ax.containers]  # each errorbar's data line
        assert len(series) >= 5
        assert len({line.get_color() for line in series}) == len(series), [
            c.get_label() for c in ax.containers
        ]
        assert len({line.get_marker() for line in series}) == len(series)
        assert ax.get_legend() is None  # the one legend is the figure's, below the panels
    assert fig.legends and min(_legend_font_sizes(fig)) >= 8


def test_sun2024_e2_loss_axis_has_no_negative_range_and_the_legend_covers_no_panel(monkeypatch):
    module = sun2024_counterexample
    fig = _drawn(
        monkeypatch,
        module.plot,
        _csv("sun2024_counterexample/e2.csv"),
        module.CFGS["quick"],
    )
    accuracy, loss = fig.axes
    assert loss.get_ylim()[0] == 0 and min(loss.get_yticks()) == 0  # a hinge loss is never negative
    assert all(
        tick.get_text() and not tick.get_text().startswith(("−", "-"))
        for tick in loss.get_yticklabels()
    )
    assert accuracy.get_legend() is None and loss.get_legend() is None and fig.legends
    caption = " ".join(text.get_text() for text in fig.texts)
    assert (
        "best configuration" in caption and "T ∈ {100, 1000}" in caption and "20 seeds" in caption
    )
    series = _series(accuracy)
    assert len(
        {(line.get_color(), line.get_linestyle(), line.get_markerfacecolor()) for line in series}
    ) == len(series)


def test_audit_legend_is_legible_and_threat_models_keep_their_colour(monkeypatch):
    fig = _drawn(monkeypatch, audit.plot, _csv("audit/audit.csv"))
    assert min(_legend_font_sizes(fig)) >= 9  # was 6 pt
    colours: dict[str, set] = {}
    for ax in fig.axes:
        for line in _series(ax):
            colours.setdefault(line.get_label().split(":")[0], set()).add(line.get_color())
    assert colours["white-box"] != colours["final model"]
    assert all(len(c) == 1 for c in colours.values()), colours


def test_hu2024_fig2_both_group_privacy_lines_are_visible_where_they_coincide(monkeypatch):
    fig = _drawn(monkeypatch, hu2024_fig2.plot, _csv("hu2024_fig2/fig2.csv"))
    pca = fig.axes[2]
    group = [line for line in pca.get_lines() if line.get_label().startswith("group privacy")]
    assert len(group) == 2
    paper, rigorous = group
    assert (paper.get_ydata() == rigorous.get_ydata()).all()  # the PCA panel: Δ∞ = n, one value
    # Coinciding, so they must differ in width and style: the wide pale band shows around the dashed
    # line.
    assert (
        paper.get_linewidth() >= 2 * rigorous.get_linewidth()
        and paper.get_linestyle() != rigorous.get_linestyle()
    )
    assert any("coincide" in text.get_text() for text in pca.texts)


def test_sun2024_accuracy_figure_uses_the_paper_names_and_points_not_truncated_bars():
    selection = _csv("sun2024_table1/selection.csv")
    fig = sun2024_table1.accuracy_figure(selection)
    (ax,) = fig.axes
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert any(label.startswith("DPSGD-F") for label in labels) and "dpsgd" not in " ".join(labels)
    # no bars: their length would need a 0 % baseline
    assert not [p for p in ax.patches if p.get_height() > 0]
    low = ax.get_ylim()[0]
    assert f"axis from {low:g} %" in ax.get_ylabel()  # a zoomed axis says where it starts
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0].startswith("MNIST") and not any("mnist" in t for t in ticks)
