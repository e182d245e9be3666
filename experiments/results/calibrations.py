"""The experiments' on-disk calibration cache: one JSON file per exact argument set of
:func:`dpprep.accounting.dp.calibrate_noise`, so that a grid of hundreds of calibrations is paid
once across processes. The runner installs it (:class:`DiskCalibrations`, through
:func:`dpprep.accounting.dp.calibration_store`) around each experiment; the library itself never
touches the disk.

**It cannot lie.** An entry carries the sha256 of its key and value, and every hit is verified
with the accountant before it is used (:func:`dpprep.accounting.dp.check_calibration`): ε of the
cached multiplier must meet the target and ε a hair below it must not, which is what
:func:`~dpprep.accounting.dp.composed_calibrate` guarantees of the value it returns. A tampered
or corrupt entry costs time — it is named in a warning, recomputed and rewritten — never privacy.
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

from dpprep.accounting import dp
from dpprep.accounting.dp import AccountingOptions, DpSgdSchedule
from dpprep.files import atomic_write_text, tree_digest

# An entry is ``{"key": ..., "noise_multiplier": z, "accounted_with": ..., "checksum": ...}``: the
# arguments and what computed the value (:func:`_calibration_key`), the multiplier, the accounting
# the search evaluated ε with (``{"accountant": "rdp"}`` or ``{"accountant": "pld",
# "pld_discretization": d}``; the neighbouring relation is the requested one) and the sha256 of the
# canonical JSON of the rest.

#: Bump when calibration may return a different multiplier for the same arguments, or when the
#: entry format changes (2: entries carry a checksum and the accounting the search ran on). An
#: edit to the code is caught by :func:`calibration_code_digest` in the key anyway; this stays for
#: changes outside it, e.g. a different use of dp-accounting's options.
CALIBRATION_METHOD_VERSION = 2
#: The code that computes a calibrated multiplier or decides which one is served, relative to the
#: repository root: the accounting package (``dp.py`` runs and checks the calibration; its siblings
#: are hashed too, so that a helper moved between them still counts), the argument checks that
#: normalise its inputs and this cache. ``dpprep/plan.py`` and ``dpprep/sampling.py`` are left out
#: on purpose: they only choose the arguments (the schedule, δ net of the Poisson overflow slack),
#: and those are in the key themselves.
CALIBRATION_SOURCES: tuple[str, ...] = (
    "dpprep/accounting",
    "dpprep/validation.py",
    "experiments/results/calibrations.py",
)

_LOG = logging.getLogger(__name__)


class DiskCalibrations:
    """A :class:`~dpprep.accounting.dp.CalibrationStore` on disk, one JSON file per argument set
    in ``directory`` (default ``<cache root>/calibrations``, the root as for downloads:
    ``$DPPREP_CACHE_DIR`` or ``~/.cache/dpprep``, read at each calibration). Install it with
    ``with dp.calibration_store(DiskCalibrations()): ...``."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self._directory = None if directory is None else Path(directory)

    def __repr__(self) -> str:
        return f"DiskCalibrations({self._directory!r})"

    @property
    def directory(self) -> Path:
        if self._directory is not None:
            return self._directory
        from dpprep.data.download import cache_dir  # lazily: the data package is not needed else

        return cache_dir() / "calibrations"

    def calibrate(
        self,
        make_event: Callable[[float], dp_event.DpEvent],
        target_epsilon: float,
        delta: float,
        schedule: DpSgdSchedule,
        fixed: tuple[dp_event.DpEvent, ...],
        options: AccountingOptions,
    ) -> float:
        """:func:`~dpprep.accounting.dp.composed_calibrate` of ``make_event``, answered from the
        disk when a verified entry is there, and written to it otherwise."""
        key = _calibration_key(target_epsilon, delta, schedule, fixed, options)
        path = self.directory / f"{key['digest']}.json"
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
            # Only what the check on reading it back accepts is kept, so that every entry written
            # passes it; a fallback chosen further below the answer than the lower check point
            # (rare) is recomputed in each process rather than cached.
            why = dp.check_calibration_accounting(make_event, z, entry.accounted_with, options)
        if entry is not None and why is None:
            _write_calibration(path, key, entry)
        else:  # not cached; an entry left in its place would only be rejected again
            _LOG.debug("calibration %r not cached on disk: %s", z, why)
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
        return z


@dataclasses.dataclass(frozen=True)
class _CalibrationEntry:
    """A cached multiplier and the options its calibration evaluated ε with."""

    noise_multiplier: float
    accounted_with: AccountingOptions


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
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        warnings.warn(
            f"cannot read calibration cache entry {path}: {err}; recomputing", stacklevel=4
        )
        return None
    try:
        # Bytes that are not UTF-8 (a damaged file) are a corrupt entry like any other.
        entry = json.loads(raw.decode("utf-8"))
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
    except (ValueError, KeyError, TypeError, RecursionError) as err:  # RecursionError: deep JSON
        warnings.warn(
            f"ignoring corrupt calibration cache entry {path} ({err}); recomputing", stacklevel=4
        )
        return None
    return _CalibrationEntry(z, accounted_with)


def _verify_calibration(
    path: Path,
    entry: _CalibrationEntry,
    make_event: Callable[[float], dp_event.DpEvent],
    target_epsilon: float,
    delta: float,
    options: AccountingOptions,
) -> bool:
    """Whether ``entry`` (read from ``path``) holds what calibrating ``make_event`` to
    ``(target_epsilon, delta)`` under ``options`` returns, on the accounting it names
    (:func:`dpprep.accounting.dp.check_calibration`: ε at the multiplier meets the target, ε at
    the multiplier less ``2 * CALIBRATION_TOL`` does not, and a fallback accounting only where
    the search would fall back). Else a warning naming the file and why (both ε values where the
    check got that far), and False."""
    z = entry.noise_multiplier
    why = dp.check_calibration(make_event, z, target_epsilon, delta, entry.accounted_with, options)
    if why is None:
        return True
    warnings.warn(
        f"ignoring calibration cache entry {path} (noise_multiplier={z!r}): {why}; recomputing",
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
    except (OSError, ValueError) as err:  # a cache that cannot be written only costs time
        warnings.warn(f"cannot write calibration cache in {path.parent}: {err}", stacklevel=4)
