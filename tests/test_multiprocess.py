"""``sweep_points(..., devices=2)`` across 2 JAX processes equals the one-process sweep.

Two subprocesses (``JAX_PLATFORMS=cpu``, one host CPU device each) join one JAX job through
``jax.distributed.initialize`` with a coordinator on localhost; the CPU backend's cross-process
collectives are gloo (jax 0.10's default for ``jax_cpu_collectives_implementation``, set
explicitly here so the test says what it relies on). Each process then sees 2 global devices,
1 of them its own, and ``sweep_points`` shards every chunk's points over both and gathers the
results to every process (``multihost_utils.process_allgather``). A third subprocess runs the
same sweep alone on one device. Every process prints one JSON line; the tests check them.

The sweep is small but touches what the processes share: 2 seeds x 5 points (learning rate and
clip norm), Poisson sampling (each seed's batch gather, replicated data and keys), evaluation
inside the compiled call, and padding and several chunks: ``chunk_size=3`` on 2 devices is
chunks of 4, so two chunks, the second with 3 padded points.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # starts a two-process jax job

# Largest allowed |two processes − one process| on the parameters and the test loss: float32
# rounding of products with a different local point count (the single-device sharding test
# measured 6e-8); a point trained with another point's hyperparameters or another seed's
# batches differs by ~1e-2 or more (``spread`` below).
TOLERANCE = 1e-6
TIMEOUT = 120  # seconds per subprocess; the whole test takes ~10 s on a 2-core CPU

CHILD = textwrap.dedent("""
    import json, sys

    import jax

    process_id, processes, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=processes,
                                   process_id=process_id, initialization_timeout=60)

    import numpy as np

    from dpprep import models, sweeps
    from dpprep.algorithms import Hyper, TrainConfig
    from dpprep.plan import DPPlan

    N, D, K, P = 240, 6, 3, 5
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = rng.integers(0, K, size=N)
    x_test = rng.normal(size=(60, D)).astype(np.float32)
    y_test = rng.integers(0, K, size=60)
    model = models.softmax_regression(D, K)
    plan = DPPlan.create("poisson", N, batch_size=24, steps=25, l2_clip_norm=1.0,
                         noise_multiplier=1.0, delta=1e-5)
    config = TrainConfig(model, Hyper(0.5), plan)
    points = {"learning_rate": np.linspace(0.1, 0.6, P), "l2_clip_norm": np.linspace(0.5, 2.0, P)}
    keys = jax.random.split(jax.random.key(0), 2)

    # Record how every compiled chunk's outputs are laid out (before the gather).
    chunks = []
    compiled = sweeps._compiled

    def spy(*args, **kwargs):
        fn = compiled(*args, **kwargs)

        def run(*inputs):
            out = fn(*inputs)
            w = out[0]["w"]  # (seeds, chunk, d, K)
            chunks.append({"shape": list(w.shape), "devices": len(w.sharding.device_set),
                           "local_points": [s.data.shape[1] for s in w.addressable_shards]})
            return out

        return run

    sweeps._compiled = spy
    result = sweeps.sweep_points(config, model.init(None), (x, y), keys, points,
                                 eval_data=(x_test, y_test), devices=len(jax.devices()),
                                 chunk_size=3)
    print("REPORT " + json.dumps({
        "process_index": jax.process_index(), "process_count": jax.process_count(),
        "global_devices": len(jax.devices()), "local_devices": len(jax.local_devices()),
        "w": np.asarray(result.params["w"]).tolist(), "b": np.asarray(result.params["b"]).tolist(),
        "loss": np.asarray(result.evaluation["loss"]).tolist(),
        "batch_size": np.asarray(result.metrics["batch_size"]).tolist(), "chunks": chunks,
    }), flush=True)
    if processes > 1:
        jax.distributed.shutdown()
    """)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    # One CPU device per process (a pytest run may have set more for itself).
    flags = [
        f
        for f in env.get("XLA_FLAGS", "").split()
        if not f.startswith("--xla_force_host_platform_device_count")
    ]
    env["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=1"])
    return env


def _parse(stdout: str) -> dict:
    line = next(line for line in stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT ") :])


@pytest.fixture(scope="module")
def reports() -> tuple[list[dict], dict]:
    port, env = _free_port(), _env()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(i), "2", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, stderr[-4000:]
            outs.append(_parse(stdout))
    finally:
        # a hung peer (e.g. waiting on the coordinator) must not outlive the test
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    single = subprocess.run(
        [sys.executable, "-c", CHILD, "0", "1", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert single.returncode == 0, single.stderr[-4000:]
    return outs, _parse(single.stdout)


def _diff(a, b) -> float:
    import numpy as np

    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def test_two_processes_form_one_job(reports):
    multi, single = reports
    assert sorted(r["process_index"] for r in multi) == [0, 1]
    for r in multi:
        assert (r["process_count"], r["global_devices"], r["local_devices"]) == (2, 2, 1)
    assert (single["process_count"], single["global_devices"]) == (1, 1)


def test_each_process_computes_half_of_every_chunk(reports):
    """Two chunks of 4 points (5 points, chunk_size 3 rounded up to a multiple of 2 devices), each
    laid out over both processes' devices with 2 points on this process's one device."""
    multi, _ = reports
    for r in multi:
        assert r["chunks"] == [{"shape": [2, 4, 6, 3], "devices": 2, "local_points": [2]}] * 2


def test_every_process_gets_the_one_process_result(reports):
    multi, single = reports
    import numpy as np

    assert np.shape(single["w"]) == (2, 5, 6, 3)  # seeds x points (padding dropped) x w
    spread = _diff(np.asarray(single["w"])[:, 0], np.asarray(single["w"])[:, -1])
    assert spread > 1e3 * TOLERANCE  # distinct points differ, so agreement is not trivial
    for r in multi:
        assert np.shape(r["w"]) == np.shape(single["w"])
        assert r["batch_size"] == single["batch_size"]  # the same Poisson batches per seed
        assert _diff(r["w"], single["w"]) < TOLERANCE
        assert _diff(r["b"], single["b"]) < TOLERANCE
        assert _diff(r["loss"], single["loss"]) < TOLERANCE * max(
            1.0, float(np.max(np.abs(single["loss"])))
        )
