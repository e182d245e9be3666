"""Every docstring example in the package runs and gives what it shows (the examples are docs
that cannot rot)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dpprep


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(dpprep.__path__, "dpprep."):
        if info.name.endswith("__main__"):
            continue
        spec = importlib.util.find_spec(info.name)
        with open(spec.origin, encoding="utf-8") as handle:
            if ">>>" in handle.read():
                names.append(info.name)
    return ["dpprep", *names] if ">>>" in (dpprep.__doc__ or "") else names


MODULES = _modules_with_examples()


def test_examples_were_found():
    assert {
        "dpprep.clipping",
        "dpprep.noise",
        "dpprep.step",
        "dpprep.frameworks",
        "dpprep.plan",
        "dpprep.accounting.dp",
    } <= set(MODULES)
    # accounting.dp's ten-odd examples (once also run by tests/accounting/test_dp.py) stay
    tests = doctest.DocTestFinder().find(importlib.import_module("dpprep.accounting.dp"))
    assert sum(len(test.examples) for test in tests) >= 10


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, (
        f"{result.failed} of {result.attempted} examples failed"
    )
