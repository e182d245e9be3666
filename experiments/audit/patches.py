"""The code changes of the bug catalogue (:mod:`experiments.audit.bugs`): each function wraps one
dpprep library function into its broken version.

A wrapper takes the original (the privatizer's noise, the clip factors, the Poisson sampler, the
engine's step, DPSGD-F's private mean, CorrDP's noise factors, the plan's calibration and account)
and returns a drop-in replacement with the same signature that misbehaves in one documented way;
:func:`experiments.audit.inject.inject` rebinds the library attribute to it for a ``with`` block.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax


def scaled_noise(factor: float) -> Callable[[Callable], Callable]:
    def wrap(add_noise):
        def broken(key, grad_sum, noise_multiplier, l2_clip_norm, scales=None, stddev=0.0):
            return add_noise(
                key, grad_sum, noise_multiplier * factor, l2_clip_norm, scales, stddev * factor
            )

        return broken

    return wrap


def clip_to(multiple: float) -> Callable[[Callable], Callable]:
    def wrap(clip_factors):
        return lambda norms, l2_clip_norm, mask: clip_factors(norms, l2_clip_norm * multiple, mask)

    return wrap


def last_row_unclipped(clip_factors: Callable) -> Callable:
    # An off-by-one in a clipping loop over the batch's *real* rows (``for i in range(size - 1)``):
    # the last row the mask keeps retains its full gradient. Padding slots (mask 0) are skipped,
    # as a loop over the realised batch would: Poisson batches are padded at the end, so the
    # last slot is padding, not the canary. The audits append the canary as the last record, and
    # the Poisson sampler lists selected indices in order, so whenever the canary is sampled it is
    # this row (full batch: always; shuffled: only when shuffled last, 1 in B per epoch — the bug's
    # real reach there).
    def broken(norms, l2_clip_norm, mask):
        scale = clip_factors(norms, l2_clip_norm, mask)
        if mask is None:
            return scale.at[-1].set(1.0)
        kept = mask > 0
        # last real row (0 if none: mask 0 keeps it out)
        last = kept.shape[-1] - 1 - jnp.argmax(kept[::-1])
        return scale.at[last].set(mask[last])

    return broken


def doubled_batch_rate(poisson_batch: Callable) -> Callable:
    return lambda key, n, q, pad: poisson_batch(key, n, min(1.0, 2.0 * q), pad)


def doubled_pad_rate(poisson_pad_size: Callable) -> Callable:
    # The pad grows with the rate, so the larger batches are not truncated (which would drop the
    # canary, the last record, and hide the bug behind an unrelated one).
    return lambda n, q, steps=1, **kwargs: poisson_pad_size(n, min(1.0, 2.0 * q), steps, **kwargs)


def twice(apply_step: Callable) -> Callable:
    # Each accounted step runs the private update twice (a retried step, fresh noise each time).
    def broken(params, opt_state, batch, *, grad_fn, tx, mask=None):
        params, opt_state, _ = apply_step(
            params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask
        )
        return apply_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask)

    return broken


def noiseless_mean(mean_from_parts: Callable) -> Callable:
    return lambda unit_mean, n, feature_norm, noise_std_unit, xi: mean_from_parts(
        unit_mean, n, feature_norm, 0.0, xi
    )


def calibrated_low(calibrate: Callable) -> Callable:
    # The plan's calibration returns 0.7x the multiplier its own accountant needs (a wrong bracket,
    # a units slip): the plan then runs, and reports the ε of, that noise.
    return lambda spec, target: 0.7 * calibrate(spec, target)


def half_steps_charged(dpsgd_event: Callable) -> Callable:
    # The accountant's event composes half the steps the run takes (an off-by-epochs slip): the
    # plan calibrates to, and reports, the ε of half its run — consistently, so the plan agrees
    # with itself.
    def broken(noise_multiplier, schedule):
        return dpsgd_event(
            noise_multiplier, dataclasses.replace(schedule, steps=max(1, schedule.steps // 2))
        )

    return broken


def frozen_noise_key(privatizer: Callable) -> Callable:
    # The privatizer's step counter is not advanced into the key: every step of a run adds the
    # same noise draw (fresh per run), which cancels in the difference of two updates.
    def broken(*args, **kwargs):
        tx = privatizer(*args, **kwargs)

        def update(updates, state, params=None):
            out, new_state = tx.update(
                updates, state._replace(count=jnp.zeros_like(state.count)), params
            )
            return out, new_state._replace(count=state.count + 1)

        return optax.GradientTransformation(tx.init, update)

    return broken


def batch_max_scaling(clip_factors: Callable) -> Callable:
    # "Clipping" that scales the whole batch by C over its largest norm: a lone gradient of norm
    # 4C becomes C exactly as per-example clipping makes it, but every other record of that batch
    # shrinks too, so the canary's presence moves the other records' contributions.
    def broken(norms, l2_clip_norm, mask):
        real = jnp.ones_like(norms) if mask is None else mask
        worst = jnp.max(jnp.where(real > 0, norms, 0.0))
        return jnp.minimum(1.0, l2_clip_norm / jnp.maximum(worst, 1e-30)) * real

    return broken


def padding_slots_real(poisson_batch: Callable) -> Callable:
    # The padded slots (index 0) are kept with weight 1 instead of 0: record 0 enters every
    # Poisson batch once per unused slot.
    def broken(key, n, q, pad):
        indices, mask, size, overflow = poisson_batch(key, n, q, pad)
        return indices, jnp.ones_like(mask), size, overflow

    return broken


def first_record_always(poisson_batch: Callable) -> Callable:
    # Record 0 is put in every batch that misses it (a seed slot that is never re-drawn).
    def broken(key, n, q, pad):
        indices, mask, size, overflow = poisson_batch(key, n, q, pad)
        present = jnp.any((indices == 0) & (mask > 0))
        slot = jnp.minimum(size, pad - 1)
        add = ~present & (size < pad)
        indices = jnp.where(add, indices.at[slot].set(0), indices)
        mask = jnp.where(add, mask.at[slot].set(1.0), mask)
        return indices, mask, size + add.astype(size.dtype), overflow

    return broken


def per_leaf_norms(global_norms: Callable) -> Callable:
    # The clipping norm of a multi-leaf gradient is its largest leaf's norm, not the norm over all
    # leaves: each leaf is held to C on its own, the whole gradient to C·sqrt(leaves).
    def broken(tree):
        leaves = [g.reshape(g.shape[0], -1) for g in jax.tree_util.tree_leaves(tree)]
        return jnp.max(
            jnp.stack([jnp.sqrt(jnp.sum(jnp.square(g), axis=1)) for g in leaves]), axis=0
        )

    return broken


def halved_sensitive(corrdp_factors: Callable) -> Callable:
    def broken(m, sensitive, tv, **kwargs):
        factors = np.array(corrdp_factors(m, sensitive, tv, **kwargs), np.float64)
        factors[np.asarray(list(sensitive), int)] *= 0.5
        return factors

    return broken


def mean_of_sum(mean_from_parts: Callable) -> Callable:
    # The rows' sum handed over where their mean belongs (np.sum for np.mean): the released μ̂
    # carries each record at weight C_F, n times what its noise (scaled for a mean) covers.
    def broken(unit_mean, n, feature_norm, noise_std_unit, xi):
        return mean_from_parts(unit_mean * n, n, feature_norm, noise_std_unit, xi)

    return broken


def mean_sigma_halved(mean_sigma: Callable) -> Callable:
    # A factor-two slip in σ_F (e.g. a replace-one sensitivity divided out twice): the mean is
    # released with half its noise, and the run's multiplier is calibrated around that noise, so
    # the plan agrees with itself.
    return lambda eps_f, delta: 0.5 * mean_sigma(eps_f, delta)


def halved_factors(corrdp_factors: Callable) -> Callable:
    def broken(m, sensitive, tv, **kwargs):
        factors = np.array(corrdp_factors(m, sensitive, tv, **kwargs), np.float64)
        insensitive = np.setdiff1d(np.arange(m), np.asarray(list(sensitive), int))
        factors[insensitive] *= 0.5
        return factors

    return broken
