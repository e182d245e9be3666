"""ExecutionPlan's accounting entry points: options handling and docstring examples."""

from __future__ import annotations

import doctest

import pytest

import dpprep.plan
from dpprep.accounting import dp
from dpprep.accounting.dp import AccountingOptions, DpSgdSchedule
from dpprep.plan import ExecutionPlan


def test_docstring_examples():
    result = doctest.testmod(dpprep.plan, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0


def test_options_default_to_the_plans_relation():
    plan = ExecutionPlan.create("full", 1000, steps=16, neighbouring="replace_one")
    rep = dp.epsilon(6.0, 1e-5, DpSgdSchedule(16, "full"), options=AccountingOptions(neighbouring="replace_one"))
    assert plan.epsilon(6.0, 1e-5) == rep
    rdp = AccountingOptions(accountant="rdp", neighbouring="replace_one")
    assert plan.epsilon(6.0, 1e-5, options=rdp) == dp.epsilon(6.0, 1e-5, DpSgdSchedule(16, "full"), options=rdp)


@pytest.mark.parametrize("method", ["epsilon", "calibrate"])
def test_options_with_another_relation_are_refused(method):
    plan = ExecutionPlan.create("full", 1000, steps=16, neighbouring="add_remove")
    with pytest.raises(ValueError, match="neighbouring"):
        getattr(plan, method)(2.0, 1e-5, options=AccountingOptions(neighbouring="replace_one"))
    with pytest.raises(ValueError, match="options"):
        getattr(plan, method)(2.0, 1e-5, options={"accountant": "rdp"})
