"""Named PRNG streams: one key per purpose, derived from a run's key by name.

``stream(key, "batch")`` and ``stream(key, "noise")`` are independent, and a stream does not
depend on which other streams a learner uses. So two learners given the same key draw the same
batches whenever they sample the same way (e.g. DPSGD and DPSGD-F with the same seed share their
Poisson batches), and a pre-processing stage (e.g. a private mean) can take its own stream
without shifting the learner's draws.
"""

from __future__ import annotations

import zlib

import jax

#: The streams the engine uses; any other name is allowed (e.g. "private_mean"). ``MODEL`` keys a
#: stochastic model's layers (e.g. dropout), split per step and per example.
BATCH, NOISE, STOP, MODEL = "batch", "noise", "stop", "model"


def stream(key: jax.Array, name: str) -> jax.Array:
    """The key of stream ``name`` under ``key`` (``fold_in`` of a stable 31-bit digest of the
    name, so it is the same in every process and JAX version)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"stream name must be a non-empty string, got {name!r}")
    return jax.random.fold_in(key, zlib.crc32(name.encode()) & 0x7FFFFFFF)
