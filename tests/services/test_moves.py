"""Every move on an instance has one home (`bpflow.moves`): the rules asked inside it,
its side effects done there, the same for a thread and an event loop, and the routes and
page states only call it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpflow import moves
from bpflow.access import Caller
from bpflow.errors import Conflict, Forbidden, NotFound
from bpflow.mailbox import Mailbox
from bpflow_app.flowview import header
from engine.errors import TransitionError
from tests.conftest import run_async
from tests.services.helpers import ROOT, start_approval, users

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["a"]]}]}


def _pending(store, people, name):
    return Mailbox(store).inbox(people[name], kind="approval", status="pending")


@pytest.mark.parametrize("loop", [False, True])
def test_abort_closes_the_open_approval_mail_on_a_thread_and_a_loop(store, units, loop):
    iid, people = start_approval(store, units, ["ann"], 1)
    bob = Caller.of(people["bob"])
    assert len(_pending(store, people, "ann")) == 1
    if loop:
        inst = run_async(moves.control_async(store, bob, iid, "abort", "wrong claim"))
    else:
        inst = moves.control(store, bob, iid, "abort", "wrong claim")
    assert (inst.status, inst.reason) == ("terminated", "wrong claim")
    assert _pending(store, people, "ann") == []
    assert Mailbox(store).inbox(people["ann"])[0]["decision"] == "withdrawn"


def test_the_worker_expires_through_the_same_abort(store, units):
    iid, people = start_approval(store, units, ["ann"], 1)
    inst = moves.expire(store, iid, "expired")
    assert (inst.status, inst.reason) == ("terminated", "expired")
    assert store.history(iid)[-1]["actor"] == "worker"
    assert _pending(store, people, "ann") == []
    assert Mailbox(store).inbox(people["ann"])[0]["decision"] == "withdrawn"


def test_who_sees_a_flow_may_not_control_it_and_a_stranger_does_not_find_it(store, units):
    iid, people = start_approval(store, units, ["ann"], 1)
    users(store, "eve")
    ann, eve = Caller.of(people["ann"]), Caller.of(store.user("eve"))
    for move in ("suspend", "abort"):
        with pytest.raises(Forbidden):
            moves.control(store, ann, iid, move, "mine")
        with pytest.raises(NotFound):
            moves.control(store, eve, iid, move, "mine")
    with pytest.raises(Forbidden):
        moves.reset(store, ann, iid, "claim")
    assert store.get(iid).status == "running"


def test_an_unknown_move_or_a_move_its_status_forbids_is_refused(store, units):
    iid, people = start_approval(store, units, ["ann"], 1)
    bob = Caller.of(people["bob"])
    with pytest.raises(ValueError, match="unknown move"):
        moves.control(store, bob, iid, "explode")
    with pytest.raises(TransitionError):
        moves.control(store, bob, iid, "resume")


def test_a_start_with_a_key_gives_the_first_instance_and_is_per_user(store):
    people = users(store, "bob", "cid")
    store.put_template(FORM)
    bob, cid = Caller.of(people["bob"]), Caller.of(people["cid"])
    first, started = moves.start(store, bob, "simple", key="k1")
    again, started_again = run_async(moves.start_async(store, bob, "simple", key="k1"))
    other, other_started = moves.start(store, cid, "simple", key="k1")
    assert (started, started_again, other_started) == (True, False, True)
    assert again.id == first.id != other.id


def test_a_key_naming_another_users_instance_is_a_conflict(store):
    people = users(store, "bob", "cid")
    store.put_template(FORM)
    bob, cid = Caller.of(people["bob"]), Caller.of(people["cid"])
    inst = store.start("simple", {}, people["cid"],
                       instance_id=store.keyed_id(bob.id, "k1"))
    assert inst.user["id"] == cid.id
    with pytest.raises(Conflict):
        moves.start(store, bob, "simple", key="k1")


def test_the_flow_page_offers_the_moves_of_the_engines_table(store, units):
    iid, people = start_approval(store, units, ["ann"], 1)
    bob = Caller.of(people["bob"])
    assert header(store.get(iid)).controls == ["suspend", "abort"]
    assert header(moves.control(store, bob, iid, "suspend")).controls == ["resume", "abort"]
    assert header(moves.control(store, bob, iid, "abort", "x")).controls == []


STEPS = re.compile(r"\b(store|engine|Interactions\([^)]*\)|store_for\([^)]*\))\."
                   r"(apply|apply_async|start|start_async|complete|fail|submit|submit_async"
                   r"|abort|suspend|resume|reset|claim|unclaim|delegate|send_back)\(")


def test_routes_and_page_states_make_no_step_of_their_own():
    """A move made in a route or a page would escape the rules and side effects of
    `bpflow.moves`: they call it (or the mailbox for mail) and nothing else."""
    places = [*sorted((ROOT / "bpflow/api/routes").glob("*.py")),
              *sorted((ROOT / "bpflow_app").rglob("*.py"))]
    found = []
    for path in places:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if STEPS.search(code):
                found.append(f"{Path(path).relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
