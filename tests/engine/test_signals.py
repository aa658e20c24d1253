"""Signal circles in the engine (SPEC §11): a ready signal circle waits for its name and
rendered key, and carries a bookmark like any circle waiting for the outside world, so a
bookmark completion works too (who may use it is `bpflow.access`'s question)."""

from __future__ import annotations

import pytest

from engine.errors import BookmarkError
from engine.instance import Instance
from engine.phase import Phase, box_phase, signal_wait
from engine.runtime import Engine
from engine.signals import token, waiting_for
from tests.engine.helpers import KEY, Clock, circle, template, waits

PAY = template(
    circle("order", box={"form": [{"name": "id", "type": "string"}]}),
    circle("paid", "order", retry=[10],
           box={"action": {"type": "signal", "name": "payment", "key": "${order.id}"}}),
    waits("ship", "paid"),
)


def _waiting() -> tuple[Engine, Instance]:
    engine = Engine(KEY, Clock())
    inst = engine.start(PAY)
    engine.complete(inst, "order", engine.bookmark(inst, "order"), {"id": "A-1"})
    return engine, inst


def test_a_waiting_signal_circle_is_ready_with_a_bookmark_and_its_rendered_key() -> None:
    engine, inst = _waiting()
    run = inst.circles["paid"]
    assert signal_wait(run) == {"name": "payment", "key": "A-1"}
    assert waiting_for(run) == token("payment", "A-1")
    assert box_phase(PAY.plan.nodes["paid"].circle.box, run) is Phase.STARTED
    assert "paid" in engine.ready(inst)
    view = engine.view(inst)["paid"]
    assert view["ready"] and view["bookmark"] == engine.bookmark(inst, "paid")


def test_the_bookmark_completes_the_signal_circle_and_the_flow_moves_on() -> None:
    engine, inst = _waiting()
    mark = engine.view(inst)["paid"]["bookmark"]
    engine.complete(inst, "paid", mark, {"amount": 12}, actor="ivy")
    assert inst.circles["paid"].state == "success"
    assert inst.circles["paid"].result == {"amount": 12}
    assert waiting_for(inst.circles["paid"]) is None  # a signal sent now meets nothing
    assert engine.ready(inst) == ["ship"]
    with pytest.raises(BookmarkError, match="already used"):
        engine.complete(inst, "paid", mark, {})


def test_a_failed_signal_circle_waits_again_with_a_new_bookmark() -> None:
    engine, inst = _waiting()
    old = engine.view(inst)["paid"]["bookmark"]
    engine.fail(inst, "paid", old, "payment refused")
    assert inst.circles["paid"].reason == "payment refused"
    assert engine.view(inst)["paid"]["bookmark"] is None  # a retry is scheduled
    clock = engine.clock
    assert isinstance(clock, Clock)
    clock.advance(10)
    engine.tick(inst)
    new = engine.view(inst)["paid"]["bookmark"]
    assert new is not None and new != old
    assert signal_wait(inst.circles["paid"]) == {"name": "payment", "key": "A-1"}
    with pytest.raises(BookmarkError, match="stale"):
        engine.complete(inst, "paid", old, {})
    engine.complete(inst, "paid", new, {"amount": 1})
    assert inst.circles["paid"].state == "success"
