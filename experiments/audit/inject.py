"""Planting a catalogue bug (:mod:`experiments.audit.bugs`) in dpprep's library code for the
duration of a ``with`` block (:func:`inject`), and auditing a learner under it
(:func:`audit_with_bug`). JAX's compilation caches and dpprep's own are cleared on entry and on
exit, so a function compiled inside the block never runs after it (and one compiled before it is
traced afresh inside), whatever caches its config hits.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import jax

from dpprep.auditing import AuditConfig, AuditResult, audit

from .bugs import Bug, check_bug


#: Modules whose caches hold data read from disk, not results of library code a bug could
#: change: kept across injections (clearing them only costs the reads again).
_DATA_CACHES = ("dpprep.data.", "dpprep.corrdp.data")


def clear_compilations() -> None:
    """Forget every compiled function and cached result of dpprep's code: JAX's caches and every
    ``functools`` cache of a loaded dpprep module (the engine's and sweeps' compiled calls, the
    plan's and the selection's accounts and calibrations, ...), except those of the data loaders
    (:data:`_DATA_CACHES`). A planted bug must neither hit an honest entry nor leave a broken one
    behind; a cache added to the library later is covered without a change here."""
    import sys

    for name, module in list(sys.modules.items()):
        if not (name == "dpprep" or name.startswith("dpprep.")) or name.startswith(_DATA_CACHES):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()
    jax.clear_caches()


@contextlib.contextmanager
def inject(name: str) -> Iterator[Bug]:
    """Test-only: plants bug ``name`` (:data:`BUGS`) in dpprep's library code for the duration of
    the block; every learner traced inside it runs the broken code (compilations are cleared on
    entry and exit, so none leaks in or out). Not thread-safe: the patch is a module attribute.
    Restores the originals on exit, also on error::

        with inject("clip_2c"):
            result = audit(AuditConfig("dp_gd", epsilon=1.0))
        result.violation  # True: a rigorous bound above the accounted ε
    """
    import importlib

    from dpprep.accounting import dp

    bug = check_bug(name)
    saved: list[tuple[Any, str, Any]] = []
    clear_compilations()
    # no broken calibration reaches a store (the runner's disk cache)
    with dp.calibration_store(None):
        try:
            for module_name, attribute, wrap in bug.patches:
                # "Class.method" patches a method of a class of the module
                owner: Any = importlib.import_module(module_name)
                *path, name = attribute.split(".")
                for part in path:
                    owner = getattr(owner, part)
                original = getattr(owner, name)
                saved.append((owner, name, original))
                setattr(owner, name, wrap(original))
            yield bug
        finally:
            for module, attribute, original in reversed(saved):
                setattr(module, attribute, original)
            clear_compilations()


def audit_with_bug(bug: str | None, cfg: AuditConfig, **kwargs: Any) -> AuditResult:
    """:func:`audit` of ``cfg`` with catalogue bug ``bug`` injected (None: the honest learner). A
    bug whose patches do not reach ``cfg.learner`` is refused (its audit would be an honest one)."""
    if bug is None:
        return audit(cfg, **kwargs)
    entry = check_bug(bug)
    if cfg.learner not in entry.learners:
        raise ValueError(
            f"bug {bug!r} does not reach learner {cfg.learner!r}; it reaches"
            f" {', '.join(entry.learners)}"
        )
    with inject(bug):
        return audit(cfg, **kwargs)


__all__ = ["audit_with_bug", "clear_compilations", "inject"]
