"""Inputs (SPEC §4): a new instance's inputs are checked against the declared ones."""

from __future__ import annotations

import pytest

from engine.inputs import InputError
from tests.engine.helpers import template, waits


def test_inputs_are_checked_against_the_declaration(engine):
    tpl = template(waits("a"), inputs={"amount": "number"})
    with pytest.raises(InputError, match="missing input 'amount'"):
        engine.start(tpl, {})
    with pytest.raises(InputError, match="must be number"):
        engine.start(tpl, {"amount": "12"})
    assert engine.start(tpl, {"amount": 12}).inputs == {"amount": 12}
