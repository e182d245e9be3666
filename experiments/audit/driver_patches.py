"""The code changes of the catalogue's bugs on the paths a user's own options take
(microbatches, calls of several steps, models of several leaves or with dropout, the learning rate,
the optimizer loop, sweeps, ``fit``, the neighbouring relation), audited through the public drivers
(:data:`dpprep.auditing.DRIVERS`). Each function wraps one dpprep library function into its broken
version, as :mod:`experiments.audit.patches` does for the core pieces.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


def first_microbatch_twice(microbatched: Callable) -> Callable:
    # The microbatch scan adds its first microbatch's clipped sum once more (an off-by-one in the
    # scan's start): every record of the first m slots counts twice, a sensitivity of 2C there.
    def broken(clipped, m, size, batch, weights, args, axes):
        total, norms, aux = microbatched(clipped, m, size, batch, weights, args, axes)
        first = jax.tree_util.tree_map(lambda a: jnp.asarray(a)[:m], batch)
        first_args = [a[:m] if axis == 0 else a for a, axis in zip(args, axes)]
        again, _, _ = clipped(first, None if weights is None else weights[:m], *first_args)
        return jax.tree_util.tree_map(jnp.add, total, again), norms, aux

    return broken


def calls_restart_at_zero(run_in_calls: Callable) -> Callable:
    # The host loop over compiled calls passes every call the first step's index: each call
    # redraws step 0's batches and noise (keyed by the step index) instead of its own.
    def broken(begin, advance, end, steps, per_call):
        return run_in_calls(
            begin, lambda state, t0, count: advance(state, np.int32(0), count), end, steps, per_call
        )

    return broken


def leaves_after_two_unnormed(global_norms: Callable) -> Callable:
    # The per-example norm sums the squares of the first two leaves only (a loop written for a
    # weight and a bias): a third leaf's gradient is scaled by a factor it did not enter.
    return lambda tree: global_norms(jax.tree_util.tree_leaves(tree)[:2])


def noise_after_learning_rate(update_transform: Callable) -> Callable:
    # The privatizer runs after the learning rate (links in the wrong order): noise of std z·C is
    # added to the scaled update, i.e. z/η relative to the gradient: invisible at η = 1.
    def broken(config, plan, values, noise_key):
        scaled = dataclasses.replace(
            values, noise_multiplier=values.noise_multiplier / values.learning_rate
        )
        return update_transform(config, plan, scaled, noise_key)

    return broken


def step_counter_stuck(privatizer_state: Callable) -> Callable:
    # dp_step reads a stale copy of the privatizer's counter (always 0): every step draws step 0's
    # batch (the noise, counted by the privatizer itself, stays fresh).
    def broken(opt_state):
        state = privatizer_state(opt_state)
        return state._replace(count=jnp.zeros_like(state.count))

    return broken


def seeds_share_first_key(sweep_points: Callable) -> Callable:
    # The sweep broadcasts the first seed's key to every seed (a shape fix gone wrong): its seeds
    # are copies of one run, noise included.
    def broken(config, params0, data, keys, points, **kwargs):
        return sweep_points(
            config, params0, data, jnp.broadcast_to(keys[:1], keys.shape), points, **kwargs
        )

    return broken


def fit_delta_tenfold(fit: Callable) -> Callable:
    # fit hands its plan ten times the δ it was asked for (a units slip): less noise than (ε, δ)
    # needs, and a plan that reports the looser guarantee as the one asked for.
    def broken(*args, delta, **kwargs):
        return fit(*args, delta=10 * delta, **kwargs)

    return broken


def relation_dropped(options_of: Callable) -> Callable:
    # The plan's accounting options lose the neighbouring relation (add/remove, the default): a
    # replace-one plan, whose sensitivity is 2C, is calibrated and accounted for C.
    from dpprep.accounting import dp

    def broken(self, options):
        if options is None:
            return dp.AccountingOptions()
        return dataclasses.replace(options, neighboring_relation="add_remove")

    return broken


def keyed_loss_unclipped(clipped_grad: Callable) -> Callable:
    # A loss that takes a PRNG key (dropout: prng_argnum, or a stochastic Model's keyed path) is
    # summed without clipping (a branch for keyed losses that forgot the bound): every
    # stochastic model trains unclipped, whatever the plan's C.
    def broken(loss_fn, *, l2_clip_norm, prng_argnum=None, **kwargs):
        if prng_argnum is not None:
            l2_clip_norm = np.inf
        return clipped_grad(loss_fn, l2_clip_norm=l2_clip_norm, prng_argnum=prng_argnum, **kwargs)

    return broken


def selection_unrepeated(selected: Callable) -> Callable:
    # The selection's accountant charges the best of K candidates as one candidate (the
    # repetition's RDP left out): its training noise is calibrated as if K were 1.
    def broken(self, curve):
        return curve

    return broken


def score_noise_per_accuracy(run_searches: Callable) -> Callable:
    # The score noise is scaled for the accuracy, not for the count: its std relative to the count
    # is σ/v (v the validation rows) where σ is stated.
    def broken(config, params0, train, validation, searches, selection, chunk):
        v = int(np.shape(validation[1])[0])
        scaled = dataclasses.replace(selection, score_noise=selection.score_noise / v)
        return run_searches(config, params0, train, validation, searches, scaled, chunk)

    return broken
