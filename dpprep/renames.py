"""Old names that keep working, with a warning, after a public name changed.

dpprep names each thing once, with the word optax, jax_privacy and dp-accounting use where they
have one (``l2_clip_norm``, ``normalize_by``, ``stddev``, ``neighboring_relation``). Names it had
before stay usable for a release: each use warns with :class:`RenamedWarning` and does exactly
what the new name does. Passing a value under both names is a ``TypeError``, never a silent
choice. Standard library only, so that every layer of the package may use it.

>>> import dataclasses, warnings
>>> @renamed_kwargs(clip="l2_clip_norm")
... def bound(*, l2_clip_norm):
...     return l2_clip_norm
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     bound(clip=2.0), caught[0].category.__name__
(2.0, 'RenamedWarning')
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = [
    "RenamedWarning",
    "module_renames",
    "rename_keys",
    "renamed_fields",
    "renamed_kwargs",
    "warn_renamed",
]

_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=type)


class RenamedWarning(DeprecationWarning):
    """A name dpprep renamed was used; the message gives the new name. The old names go in 0.3."""


def warn_renamed(old: str, new: str, where: str = "", stacklevel: int = 2) -> None:
    """Warns that ``old`` (``where`` prefixes it, e.g. ``"Class."``) is now ``new``."""
    warnings.warn(
        f"{where}{old!r} is renamed {new!r}; the old name goes in dpprep 0.3",
        RenamedWarning,
        stacklevel=stacklevel + 1,
    )


def rename_keys(
    values: Mapping[str, Any], renames: Mapping[str, str], where: str = "", stacklevel: int = 2
) -> dict[str, Any]:
    """``values`` with each old key of ``renames`` replaced by its new name (warning once per
    key); a value given under both names is a ``TypeError``.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     values = {"clip_norm": 1.0, "learning_rate": 0.1}
    ...     rename_keys(values, {"clip_norm": "l2_clip_norm"})
    {'l2_clip_norm': 1.0, 'learning_rate': 0.1}
    """
    for old, new in renames.items():
        if old in values:
            if new in values:
                raise TypeError(f"{where}got both {old!r} and its new name {new!r}; pass {new!r}")
            warn_renamed(old, new, where, stacklevel + 1)
    # each value keeps its place (an order of swept names is an order of results)
    return {renames.get(name, name): value for name, value in values.items()}


def renamed_kwargs(**renames: str) -> Callable[[_F], _F]:
    """A decorator: each keyword argument ``old=`` of ``renames`` (``old="new"``) goes to ``new``,
    with a :class:`RenamedWarning`. Positional calls are unaffected."""

    def decorate(fn: _F) -> _F:
        name = str(getattr(fn, "__qualname__", fn)).removesuffix(".__init__")
        where = f"{name}(): argument "

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs.keys() & renames.keys():
                kwargs = rename_keys(kwargs, renames, where, stacklevel=3)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def renamed_fields(**renames: str) -> Callable[[_C], _C]:
    """A class decorator for dataclasses (put it above ``@dataclasses.dataclass``): the
    constructor takes each old field name ``old=`` of ``renames`` (``old="new"``) as ``new``, and
    reading ``obj.old`` gives ``obj.new``, both with a :class:`RenamedWarning`.

    ``repr``, ``dataclasses.asdict`` and ``dataclasses.replace`` know only the new names."""

    def decorate(cls: _C) -> _C:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"renamed_fields decorates dataclasses, got {cls!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = sorted(set(renames.values()) - fields)
        if missing:
            raise TypeError(f"{cls.__qualname__} has no fields {missing} to rename to")
        cls.__init__ = renamed_kwargs(**renames)(cls.__init__)  # type: ignore[method-assign]
        for old, new in renames.items():
            setattr(cls, old, _old_attribute(old, new, cls.__qualname__))
        return cls

    return decorate


def _old_attribute(old: str, new: str, owner: str) -> property:
    def get(self: Any) -> Any:
        warn_renamed(old, new, f"{owner}.", stacklevel=2)
        return getattr(self, new)

    return property(get, doc=f"Renamed :attr:`{new}` (warns).")


def module_renames(namespace: dict[str, Any], renames: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) serving each old name of ``renames`` (``{"old": "new"}``)
    as the module's ``new``, with a :class:`RenamedWarning`. Assign it as ``__getattr__`` under
    ``if not TYPE_CHECKING:``, so that type checkers see only the new names."""
    module = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name in renames:
            warn_renamed(name, renames[name], f"{module}.", stacklevel=2)
            return namespace[renames[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
