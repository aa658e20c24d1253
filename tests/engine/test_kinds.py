"""The action kinds are declared once (`engine.kinds`): every other list of kinds in the
engine follows that one, and what is run by bpflow is never a person's to drive."""

from __future__ import annotations

from engine import boxes, kinds


def test_every_declared_kind_has_its_checks_and_keys_and_nothing_else_does() -> None:
    assert set(boxes.CHECKS) == set(kinds.KINDS) == set(boxes.ACTION_KEYS)
    assert kinds.ACTION_TYPES == tuple(kinds.KINDS)


def test_only_a_persons_kind_is_not_automatic_and_an_unknown_kind_is() -> None:
    assert not kinds.automatic(None)  # no action: a person's form or confirmation
    assert not kinds.automatic("auth")
    assert all(kinds.automatic(k) for k in kinds.KINDS if k != "auth")
    assert kinds.automatic("a-kind-added-later")  # never completable by hand by default


def test_the_worker_runs_http_mail_and_approval() -> None:
    assert kinds.WORKER_RUN == {"http", "mail", "approval"}
    assert {k.name for k in kinds.KINDS.values() if k.pending} == {"approval", "signal"}


def test_an_unknown_action_type_names_the_declared_ones() -> None:
    [(where, message)] = boxes.check_box({"action": {"type": "fax"}})
    assert where == "/action/type" and ", ".join(kinds.ACTION_TYPES) in message
