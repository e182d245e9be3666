"""``sweep_points(..., devices=4)`` on 4 host CPU devices equals the one-device sweep.

XLA_FLAGS must be set before jax is imported, so the sweeps run in a subprocess started with
``--xla_force_host_platform_device_count=4`` (the pytest process keeps its one CPU device). The
child prints one JSON object; the tests below check parts of it.

The problem is small but exercises what sharding touches: 2 seeds x 6 points (learning rate,
clip norm and a per-point affine feature transform, so the GLM fast path's rank-1 corrections
run per point), Poisson sampling (the per-seed batch gather, replicated data), evaluation inside
the compiled call, and padding: 6 points on 4 devices is one chunk of 8 (2 padded points), and
``chunk_size=3`` is two chunks of 4 (the second with 2 padded points).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # starts child interpreters with four host devices

DEVICES = 4
# Largest allowed |sharded − one device| (parameters; test loss relative to max(1, |loss|)):
# float32 rounding of matrix products of different local shapes over 25 steps (6e-8 on the
# parameters, 1.2e-7 on a loss of ~1.1 measured on a 2-core CPU); a point trained with another
# point's hyperparameters or another seed's batches differs by ~1e-2 or more.
TOLERANCE = 1e-6

CHILD = textwrap.dedent("""
    import json

    import jax
    import numpy as np

    from dpprep import models, sweeps
    from dpprep.algorithms import Hyper, TrainConfig
    from dpprep.plan import DPPlan
    from dpprep.features import AffineFeatures

    N, D, K, P = 240, 6, 3, 6
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = rng.integers(0, K, size=N)
    x_test = rng.normal(size=(60, D)).astype(np.float32)
    y_test = rng.integers(0, K, size=60)
    model = models.softmax_regression(D, K)
    params0 = model.init(None)
    plan = DPPlan.create("poisson", N, batch_size=24, steps=25, l2_clip_norm=1.0,
                         noise_multiplier=1.0, delta=1e-5)
    config = TrainConfig(model, Hyper(0.5), plan, extensions=(AffineFeatures(),))
    points = {
        "learning_rate": np.linspace(0.1, 0.6, P),
        "l2_clip_norm": np.linspace(0.5, 2.0, P),
        "feature_scale": rng.uniform(0.5, 1.5, size=(P, D)),
        "feature_shift": 0.3 * rng.normal(size=(P, D)),
    }
    keys = jax.random.split(jax.random.key(0), 2)

    # Record how every compiled chunk's outputs are laid out over the devices.
    chunks = []
    compiled = sweeps._compiled

    def spy(*args, **kwargs):
        fn = compiled(*args, **kwargs)

        def run(*inputs):
            out = fn(*inputs)
            w = out[0]["w"]  # (seeds, chunk, d, K)
            chunks.append({
                "shape": list(w.shape),
                "devices": sorted(d.id for d in w.sharding.device_set),
                "shards": sorted([list(s.data.shape), s.device.id, s.index[1].start or 0]
                                 for s in w.addressable_shards),
            })
            return out

        return run

    sweeps._compiled = spy

    def run(**options):
        chunks.clear()
        result = sweeps.sweep_points(config, params0, (x, y), keys, points,
                                     eval_data=(x_test, y_test), **options)
        return result, list(chunks)

    def diff(a, b):
        return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v))))
                   for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))

    one, one_chunks = run()
    report = {"device_count": jax.device_count(), "one_device_chunks": one_chunks, "runs": {}}
    for name, options in {"default_chunk": {}, "chunk_size_3": {"chunk_size": 3}}.items():
        sharded, sharded_chunks = run(devices=%(devices)d, **options)
        report["runs"][name] = {
            "params_diff": diff(one.params, sharded.params),
            "loss_diff": diff(one.evaluation["loss"], sharded.evaluation["loss"])
                         / max(1.0, float(np.max(np.abs(one.evaluation["loss"])))),
            "accuracy_diff": diff(one.evaluation["accuracy"], sharded.evaluation["accuracy"]),
            "batch_sizes_equal": bool(
                np.array_equal(one.metrics["batch_size"], sharded.metrics["batch_size"])
            ),
            "epsilon_equal": bool(np.array_equal(one.epsilon, sharded.epsilon)),
            "shape": list(sharded.params["w"].shape),
            "chunks": sharded_chunks,
        }
    # Distinct points really differ (so agreement above is not trivial).
    report["spread"] = float(np.max(np.abs(one.params["w"][:, 0] - one.params["w"][:, -1])))
    try:
        sweeps.sweep_points(config, params0, (x, y), keys, points, devices=%(devices)d + 1)
        report["too_many_devices"] = None
    except ValueError as error:
        report["too_many_devices"] = str(error)
    print("REPORT " + json.dumps(report))
    """) % {"devices": DEVICES}


@pytest.fixture(scope="module")
def report() -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT ") :])


def test_child_sees_four_host_devices(report):
    assert report["device_count"] == DEVICES
    assert all(chunk["devices"] == [0] for chunk in report["one_device_chunks"])


@pytest.mark.parametrize("run", ["default_chunk", "chunk_size_3"])
def test_sharded_sweep_equals_one_device(report, run):
    result = report["runs"][run]
    assert result["shape"] == [2, 6, 6, 3]  # padded points dropped
    assert result["batch_sizes_equal"]  # the same Poisson batches per seed
    assert result["epsilon_equal"]  # each point charged the same ε
    assert result["params_diff"] < TOLERANCE, result
    assert result["loss_diff"] < TOLERANCE, result
    assert result["accuracy_diff"] == 0.0, result
    assert report["spread"] > 1e3 * TOLERANCE


@pytest.mark.parametrize("run, chunk", [("default_chunk", 8), ("chunk_size_3", 4)])
def test_chunk_outputs_are_sharded_over_the_points_axis(report, run, chunk):
    """Every compiled chunk's output lives on all 4 devices, each holding chunk/4 of its points."""
    chunks = report["runs"][run]["chunks"]
    assert len(chunks) == -(-6 // chunk)  # 6 points: one chunk of 8, or two of 4
    for info in chunks:
        assert info["shape"] == [2, chunk, 6, 3]
        assert info["devices"] == list(range(DEVICES))
        local = chunk // DEVICES
        shards = info["shards"]
        assert [s[0] for s in shards] == [[2, local, 6, 3]] * DEVICES
        assert sorted(s[2] for s in shards) == list(range(0, chunk, local))  # disjoint, covering
        assert sorted(s[1] for s in shards) == list(range(DEVICES))


def test_more_devices_than_available_raises(report):
    assert report["too_many_devices"] is not None
    assert "devices must be between 1 and 4" in report["too_many_devices"]
