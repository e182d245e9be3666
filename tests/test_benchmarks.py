"""The benchmarks' networks run end to end at small size: the tanh CNN and ResNet-18 (CIFAR-10
shapes) through private training with Poisson sampling and microbatches, and the benchmark's
tables at its smoke sizes (what a GPU machine re-runs at full size)."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from dpprep import frameworks
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.plan import DPPlan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import machine  # noqa: E402
import nets  # noqa: E402
import real_models  # noqa: E402


def test_every_benchmark_states_its_machine_and_pairs_its_ratios():
    """Each benchmark prints the machine (CPU model, cores, backend) and the load at its start
    and end; a ratio is the median of per-round ratios of two timings taken alternately."""
    line = machine.start_line()
    assert f"{__import__('os').cpu_count()} cores" in line and "load average at start" in line
    assert machine.end_line().startswith("load average at end")
    scripts = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))
    for script in scripts:
        text = script.read_text()
        if script.name in ("machine.py", "nets.py"):
            continue
        assert "machine.start_line()" in text and "machine.end_line()" in text, script.name
    # Paired rounds: the reference slows down with the timed side (a load that comes and goes),
    # the per-round ratio stays 2 where a ratio of separate medians would not.
    timed = iter([2.0, 20.0, 2.0, 20.0, 2.0])
    reference = iter([1.0, 10.0, 1.0, 10.0, 10.0])
    a, b, ratio = machine.paired_median(lambda: next(timed), lambda: next(reference), 5)
    assert (a, b) == (2.0, 10.0) and a / b == 0.2  # separate medians: off by 10x
    assert ratio == 2.0


def test_resnet18_is_resnet18_at_width_64():
    """11,173,962 parameters and 0.556 GMAC per 32×32 example: ResNet-18 for CIFAR-10 (He et al.;
    group norms carry the parameters batch norms would)."""
    params = nnx.state(nets.ResNet18(nnx.Rngs(0)), nnx.Param)
    assert sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params)) == 11_173_962
    assert nets.resnet18_flops_per_example() / 2 == 555_422_720


@pytest.mark.slow  # a ResNet-18 trained privately
def test_resnet18_at_small_size_trains_privately_with_poisson_and_microbatches():
    """ResNet-18 (width 4) on CIFAR-10-shaped random data: a Poisson run in microbatches of 8
    trains (finite, moved parameters, the plan's ε), and the microbatched clipped sum needs less
    memory than the whole padded batch at once."""
    model = frameworks.from_flax_nnx(
        nets.ResNet18(nnx.Rngs(0), width=4), loss="softmax_cross_entropy"
    )
    params0 = model.init(None)
    rng = np.random.default_rng(0)
    n = 128
    x = rng.random((n, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, n)
    plan = DPPlan.create(
        "poisson", n, batch_size=32, steps=2, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(0.1), plan, microbatch_size=8)
    params, metrics = train(config, params0, (x, y), jax.random.key(0))
    leaves = jax.tree_util.tree_leaves(params)
    assert all(np.all(np.isfinite(np.asarray(leaf))) for leaf in leaves)
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(leaves, jax.tree_util.tree_leaves(params0), strict=True)
    )
    assert metrics["epsilon"] == plan.epsilon and np.all(np.asarray(metrics["batch_size"]) > 0)
    xs = jax.ShapeDtypeStruct((plan.pad, 32, 32, 3), jnp.float32)
    ys = jax.ShapeDtypeStruct((plan.pad,), jnp.int32)
    assert (
        real_models._temp_mib(model, params0, xs, ys, 8)
        < real_models._temp_mib(model, params0, xs, ys, None) / 2
    )


@pytest.mark.slow  # every benchmark table, end to end
def test_the_benchmark_tables_run_at_smoke_size(capsys):
    sizes = real_models.SMOKE
    real_models.cnn_table(sizes, np.random.default_rng(0))
    real_models.padded_work(sizes)
    real_models.clip_pad_table()
    out = capsys.readouterr().out
    for row in (
        "JAX non-private step",
        "dpprep step API",
        "dpprep train (host calls, now)",
        "dpprep train (one scan, before)",
        "jax_privacy 2.0, best microbatch",
        "Opacus ghost clipping",
    ):
        assert row in out
    pads = [line for line in out.splitlines() if line.startswith("| 11,173,962")]
    assert len(pads) == 1 and float(pads[0].split("|")[3]) <= 1 + 1e-5 < float(
        pads[0].split("|")[2]
    )


def test_the_guard_benchmark_compares_against_a_run_without_the_guard():
    """guard_cost.py's unguarded form really is the code without the guard and the zeroed padding
    (a NaN record makes its release NaN; the library's release stays finite), and leaving it
    restores the library's pieces."""
    import guard_cost

    from dpprep import clipping, models, sampling
    from dpprep.algorithms import make_train_fn

    n, d = 64, 5
    rng = np.random.default_rng(0)
    x = rng.random((n, d)).astype(np.float32)
    x[::8, 0] = np.nan  # 8 records: some are in every run's batches
    y = rng.integers(0, 2, n).astype(np.int32)
    model = models.softmax_regression(d, 2)
    params0 = model.init(None)
    plan = DPPlan.create(
        "poisson", n, batch_size=32, steps=4, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(0.1), plan, clip_method="vmap")
    pieces = clipping.nan_safe, sampling.gather

    def released(fn):
        params, _ = jax.jit(fn)(params0, jnp.asarray(x), jnp.asarray(y), jax.random.key(0))
        return np.asarray(params["w"])

    with guard_cost.unguarded():
        assert not np.all(np.isfinite(released(make_train_fn(config, params0))))
    assert (clipping.nan_safe, sampling.gather) == pieces
    assert np.all(np.isfinite(released(make_train_fn(config, params0))))


def test_the_per_layer_benchmark_checks_that_its_paths_agree(capsys):
    """per_example_norms.py times the library's vmap and taps paths (and a ghost-norm reference)
    on every layer only after checking that their clipped sums agree."""
    import per_example_norms

    per_example_norms.main(["--smoke"])
    out = capsys.readouterr().out
    for layer in per_example_norms.LAYERS:
        assert layer.name in out
    assert "taps" in out and "vmap" in out
