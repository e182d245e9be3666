"""The on-disk calibration cache, on request only (``DPPREP_CALIBRATION_CACHE=1``; the experiments'
runner turns it on): one JSON file per exact argument set of
:func:`dpprep.accounting.dp.calibrate_noise`, so that a grid of hundreds of calibrations is paid
once across processes. The accountant itself never touches the disk unless asked.

**It cannot lie.** An entry carries the sha256 of its key and value, and every hit is verified
with the accountant before it is used: ε of the cached multiplier must meet the target and ε a
hair below it must not (what :func:`~dpprep.accounting.dp.composed_calibrate` guarantees of the
value it returns). A tampered or corrupt entry costs time — it is named in a warning, recomputed
and rewritten — never privacy.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import logging
import math
import warnings
from collections.abc import Callable
from pathlib import Path

from dp_accounting import dp_event
from dp_accounting.privacy_accountant import UnsupportedEventError

from dpprep.accounting.dp import (
    CALIBRATION_TOL,
    MAX_CALIBRATION_PLD_POINTS,
    MAX_COARSE_DISCRETIZATION,
    MAX_COMPOSED_PLD_POINTS,
    AccountingOptions,
    DpSgdSchedule,
    _budgeted,
    _epsilon_of,
)
from dpprep.accounting import dp
from dpprep.files import atomic_write_text, tree_digest


def calibrate(
    make_event: Callable[[float], dp_event.DpEvent],
    target_epsilon: float,
    delta: float,
    schedule: DpSgdSchedule,
    fixed: tuple[dp_event.DpEvent, ...],
    options: AccountingOptions,
) -> float:
    """:func:`~dpprep.accounting.dp.composed_calibrate` of ``make_event``, answered from the disk
    when a verified entry is there, and written to it otherwise."""
    key = _calibration_key(target_epsilon, delta, schedule, fixed, options)
    path = _calibration_cache_dir() / f"{key['digest']}.json"
    cached = _read_calibration(path, key, options)
    if cached is not None and _verify_calibration(
        path, cached, make_event, target_epsilon, delta, options
    ):
        return cached.noise_multiplier
    accounted_with: list[AccountingOptions] = []
    z = dp.composed_calibrate(
        make_event, target_epsilon, delta, options=options, accounted_with=accounted_with
    )
    entry = None
    why: str | None = "the calibration did not say which accounting it searched on"
    if accounted_with:
        entry = _CalibrationEntry(
            z, _accounting_from_fields(_accounting_fields(accounted_with[-1]), options)
        )
        why = _uncacheable(entry, make_event, options)
    if entry is not None and why is None:
        _write_calibration(path, key, entry)
    else:  # not cached; an entry left in its place would only be rejected again
        _LOG.debug("calibration %r not cached on disk: %s", z, why)
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass
    return z


# On-disk calibration cache: one JSON file per exact argument set, so that a grid of hundreds of
# calibrations is paid once across processes. An entry is
# ``{"key": ..., "noise_multiplier": z, "accounted_with": ..., "checksum": ...}``: the arguments
# and what computed the value (:func:`_calibration_key`), the multiplier, the accounting the search
# evaluated ε with (``{"accountant": "rdp"}`` or ``{"accountant": "pld", "pld_discretization": d}``;
# the neighbouring relation is the requested one) and the sha256 of the canonical JSON of the rest.

#: Bump when calibration may return a different multiplier for the same arguments, or when the
#: entry format changes (2: entries carry a checksum and the accounting the search ran on). An
#: edit to the code is caught by :func:`calibration_code_digest` in the key anyway; this stays for
#: changes outside it, e.g. a different use of dp-accounting's options.
CALIBRATION_METHOD_VERSION = 2
#: The code that computes a calibrated multiplier, relative to the repository root: this package
#: (``dp.py`` runs the calibration; its siblings are hashed too, so that a helper moved between
#: them still counts) and the argument checks that normalise its inputs. ``dpprep/plan.py`` and
#: ``dpprep/sampling.py`` are left out on purpose: they only choose the arguments (the schedule,
#: δ net of the Poisson overflow slack), and those are in the key themselves.
CALIBRATION_SOURCES: tuple[str, ...] = ("dpprep/accounting", "dpprep/validation.py")

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _CalibrationEntry:
    """A cached multiplier and the options its calibration evaluated ε with."""

    noise_multiplier: float
    accounted_with: AccountingOptions


def _calibration_cache_dir() -> Path:
    """``<cache root>/calibrations`` (root as for downloads: ``$DPPREP_CACHE_DIR`` or
    ``~/.cache/dpprep``)."""
    from dpprep.data.download import cache_dir  # lazily: the data package is not needed otherwise

    return cache_dir() / "calibrations"


@functools.lru_cache(maxsize=None)
def calibration_code_digest() -> str:
    """Digest of the code that computes a calibration (:data:`CALIBRATION_SOURCES`), once per
    process. It keys the on-disk cache: after an edit to that code every calibration is computed
    afresh instead of reusing a multiplier the old code produced (a result would otherwise claim
    the new source digest with the old code's number)."""
    return tree_digest(Path(__file__).resolve().parents[2], CALIBRATION_SOURCES)


def _calibration_key(target_epsilon, delta, schedule, fixed, options) -> dict:
    # repr of floats round-trips exactly, so the key has no rounding (see calibrate_noise).
    fields = {
        "target_epsilon": repr(target_epsilon),
        "delta": repr(delta),
        "schedule": repr(schedule),
        "options": repr(options),
        "fixed_events": repr(fixed),
        "dp_accounting": importlib.metadata.version("dp-accounting"),
        "code": calibration_code_digest(),
        "method_version": CALIBRATION_METHOD_VERSION,
    }
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return {**fields, "digest": digest}


def _entry_checksum(entry: dict) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces, floats as their exact repr, no NaN)
    of every field of ``entry`` but ``checksum``: its key and its value."""
    body = {name: value for name, value in entry.items() if name != "checksum"}
    canonical = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _accounting_fields(search: AccountingOptions) -> dict:
    """The entry's record of the accounting a search ran on (RDP ignores the PLD grid)."""
    if search.accountant == "rdp":
        return {"accountant": "rdp"}
    return {"accountant": "pld", "pld_discretization": search.pld_discretization}


def _accounting_from_fields(fields: object, options: AccountingOptions) -> AccountingOptions:
    """Inverse of :func:`_accounting_fields` for a calibration asked for ``options``: the
    neighbouring relation is always the requested one. ValueError for anything else."""
    if isinstance(fields, dict) and fields == {"accountant": "rdp"}:
        return dataclasses.replace(options, accountant="rdp")
    if (
        isinstance(fields, dict)
        and set(fields) == {"accountant", "pld_discretization"}
        and fields["accountant"] == "pld"
        and isinstance(fields["pld_discretization"], float)
    ):
        return dataclasses.replace(
            options, accountant="pld", pld_discretization=fields["pld_discretization"]
        )
    raise ValueError(f"accounted_with={fields!r} is not an accounting a calibration records")


def _read_calibration(
    path: Path, key: dict, options: AccountingOptions
) -> _CalibrationEntry | None:
    """The entry at ``path`` if it is well-formed, for ``key`` and its checksum matches (not yet
    verified: see :func:`_verify_calibration`); None (with a warning, but silently for a missing
    file or the older format without a checksum) otherwise."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        warnings.warn(
            f"cannot read calibration cache entry {path}: {err}; recomputing", stacklevel=4
        )
        return None
    try:
        entry = json.loads(text)
        if not isinstance(entry, dict):
            raise ValueError("not a JSON object")
        if "checksum" not in entry:
            _LOG.debug(
                "calibration cache entry %s has no checksum (an older format); recomputing", path
            )
            return None
        if entry["checksum"] != _entry_checksum(entry):
            raise ValueError("checksum mismatch: the entry was edited or damaged")
        if entry["key"] != key:
            raise ValueError("key does not match")
        z = entry["noise_multiplier"]
        if not isinstance(z, float) or not (math.isfinite(z) and z > 0):
            raise ValueError(f"noise_multiplier={z!r} is not a positive float")
        accounted_with = _accounting_from_fields(entry["accounted_with"], options)
    except (ValueError, KeyError, TypeError) as err:
        warnings.warn(
            f"ignoring corrupt calibration cache entry {path} ({err}); recomputing", stacklevel=4
        )
        return None
    return _CalibrationEntry(z, accounted_with)


def _lower_check_point(z: float) -> float | None:
    """Where a calibrated ``z`` must miss the target: ``z - 2 * CALIBRATION_TOL`` (None if <= 0)."""
    low = z - 2.0 * CALIBRATION_TOL
    return low if low > 0 else None


def _unaccepted_accounting(search: AccountingOptions, options: AccountingOptions) -> str | None:
    """Why a calibration asked for ``options`` never searches on ``search``; None if it may:
    ``options`` themselves, and for a PLD request the fallbacks of :func:`composed_calibrate`
    (RDP, or a PLD grid coarser than asked up to :data:`MAX_COARSE_DISCRETIZATION`). Each is an
    upper bound on ε under the requested neighbouring relation, so a multiplier meeting the target
    on it is private whichever an entry names."""
    if search == options:
        return None
    if options.accountant != "pld":
        return f"a calibration with {options} never falls back to {search}"
    if search.accountant == "pld" and not (
        options.pld_discretization < search.pld_discretization <= MAX_COARSE_DISCRETIZATION
    ):
        return (
            f"pld_discretization={search.pld_discretization!r} is not a grid the work budget may"
            " choose"
        )
    return None


def _unneeded_fallback(
    entry: _CalibrationEntry,
    make_event: Callable[[float], dp_event.DpEvent],
    options: AccountingOptions,
) -> str | None:
    """Why ``entry``'s fallback accounting is not needed at its multiplier (so that an entry
    cannot swap the requested accounting for a looser one where the search would not): a
    calibration falls back only where ``options`` are over its work budget. None if the entry is
    on ``options``, or they are over that budget at the lower check point. Cheap (no PLD of the run
    is built)."""
    search, z = entry.accounted_with, entry.noise_multiplier
    if search == options:
        return None
    point = _lower_check_point(z) or z
    try:
        if _budgeted(make_event(point), options, MAX_CALIBRATION_PLD_POINTS)[0] != options:
            return None
    except (ValueError, UnsupportedEventError):  # options cannot account it there at all
        return None
    return (
        f"a calibration falls back to {search} only where {options} are over its work budget, and"
        f" at z={point!r} they are not"
    )


def _over_budget(
    entry: _CalibrationEntry, make_event: Callable[[float], dp_event.DpEvent]
) -> str | None:
    """Why evaluating ε on ``entry``'s accounting at its check points would exceed the budget of
    an ε evaluation (:data:`MAX_COMPOSED_PLD_POINTS`); None if it would not. Cheap."""
    search, z = entry.accounted_with, entry.noise_multiplier
    low = _lower_check_point(z)
    try:
        for point in (z,) if low is None else (z, low):
            if _budgeted(make_event(point), search, MAX_COMPOSED_PLD_POINTS)[0] != search:
                return f"evaluating epsilon on {search} at z={point!r} is over the work budget"
    except (ValueError, UnsupportedEventError) as err:
        return str(err)
    return None


def _uncacheable(
    entry: _CalibrationEntry,
    make_event: Callable[[float], dp_event.DpEvent],
    options: AccountingOptions,
) -> str | None:
    """Why an honestly computed ``entry`` is not written to disk (None: it is). Its accounting
    must pass the checks :func:`_verify_calibration` applies to it when reading it back, so that
    every entry written passes them; a fallback chosen further below the answer than the lower
    check point (rare) is recomputed in each process rather than cached."""
    return (
        _unaccepted_accounting(entry.accounted_with, options)
        or _over_budget(entry, make_event)
        or _unneeded_fallback(entry, make_event, options)
    )


def _verify_calibration(
    path: Path,
    entry: _CalibrationEntry,
    make_event: Callable[[float], dp_event.DpEvent],
    target_epsilon: float,
    delta: float,
    options: AccountingOptions,
) -> bool:
    """Whether ``entry`` (read from ``path``) holds what calibrating ``make_event`` to
    ``(target_epsilon, delta)`` under ``options`` returns. On the entry's accounting (one a
    calibration may search on, :func:`_unaccepted_accounting`, and within an ε evaluation's work
    budget at the check points), evaluated exactly as the search evaluates it:

    * ε(z) <= ``target_epsilon``: never too little noise;
    * ε(z - 2·:data:`CALIBRATION_TOL`) > ``target_epsilon``: not wastefully much, which
      :func:`composed_calibrate` guarantees (skipped if that point is <= 0);
    * a fallback accounting only where the search would fall back (:func:`_unneeded_fallback`).

    Else a warning naming the file and both ε values, and False."""
    search, z = entry.accounted_with, entry.noise_multiplier
    why = _unaccepted_accounting(search, options)
    if why is not None:
        warnings.warn(
            f"ignoring calibration cache entry {path} (noise_multiplier={z!r}): {why}; recomputing",
            stacklevel=4,
        )
        return False
    low = _lower_check_point(z)
    try:
        # Within budget this is exactly the search's evaluation (same accountant, event, float);
        # over it, the
        # budget's looser accounting, which only serves the warning (the entry is rejected).
        eps, over = _epsilon_of(make_event(z), delta, search, MAX_COMPOSED_PLD_POINTS)
        eps_low, over_low = (
            (math.inf, None)
            if low is None
            else _epsilon_of(make_event(low), delta, search, MAX_COMPOSED_PLD_POINTS)
        )
    except (ValueError, UnsupportedEventError) as err:
        warnings.warn(
            f"ignoring calibration cache entry {path} (noise_multiplier={z!r}): cannot account it"
            f" on {search} ({err}); recomputing",
            stacklevel=4,
        )
        return False
    problem: str | None
    note = (
        f" (epsilons on the work budget's looser accounting: {over or over_low})"
        if over or over_low
        else ""
    )
    if eps > target_epsilon:
        problem = (
            "not shown to meet the target" if note else "too little noise for the target"
        ) + note
    elif eps_low <= target_epsilon:
        problem = "more noise than the target needs" + note
    elif note:
        problem = "its accounting is over the work budget at its multiplier" + note
    else:
        problem = _unneeded_fallback(entry, make_event, options)
    if problem is None:
        return True
    warnings.warn(
        f"ignoring calibration cache entry {path}: {problem}: epsilon={eps!r} at"
        f" noise_multiplier={z!r} and epsilon={eps_low!r} at z - 2*CALIBRATION_TOL={low!r}, on"
        f" {search}, where a calibration to target_epsilon={target_epsilon!r} meets the target at z"
        " and misses it at z - 2*CALIBRATION_TOL; recomputing",
        stacklevel=4,
    )
    return False


def _write_calibration(path: Path, key: dict, entry: _CalibrationEntry) -> None:
    """Atomic write with the permissions the umask gives a new file."""
    body = {
        "key": key,
        "noise_multiplier": entry.noise_multiplier,
        "accounted_with": _accounting_fields(entry.accounted_with),
    }
    try:
        atomic_write_text(
            path, json.dumps({**body, "checksum": _entry_checksum(body)}, sort_keys=True)
        )
    except OSError as err:  # a cache that cannot be written only costs time
        warnings.warn(f"cannot write calibration cache in {path.parent}: {err}", stacklevel=4)
