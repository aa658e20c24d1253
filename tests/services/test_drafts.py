"""Drafts (SPEC §16) on a real store, SQLite and PostgreSQL: who may keep them, their
problems and changes, publishing through the upload's path, positions kept as the
template's layout without a new version, and the shipped templates round-tripping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bpflow import drafts
from bpflow.access import Caller
from bpflow.errors import Conflict, Forbidden, NotFound, Refused
from bpflow.limits import LimitError
from bpflow.store import Store
from bpflow.tenancy import create_tenant
from engine.errors import DefinitionError

ROOT = Path(__file__).resolve().parents[2]
SIMPLE = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["a"]]}]}


def people(store: Store) -> dict[str, Caller]:
    for name, roles in {"admin": ["admin"], "dee": ["designer"], "dan": ["designer"],
                        "alice": ["user"]}.items():
        store.add_user(name, f"pw-{name}", roles)
    return {name: Caller.of(store.user(name)) for name in ("admin", "dee", "dan", "alice")}


def moved(body: dict, **places: tuple[float, float]) -> dict:
    return {**body, "circles": [{**c, "ui": {"x": places[c["uri"]][0], "y": places[c["uri"]][1]}}
                                if c["uri"] in places else c for c in body["circles"]]}


def test_a_draft_is_its_authors_and_admins_see_every_one(store):
    who = people(store)
    mine = drafts.create_draft(store, who["dee"], {"name": "half", "circles": []})
    theirs = drafts.create_draft(store, who["dan"], SIMPLE)
    assert (mine.author, mine.name, mine.body) == ("dee", "half", {"name": "half",
                                                                  "circles": []})
    assert [d.id for d in drafts.list_drafts(store, who["dee"])] == [mine.id]
    assert {d.id for d in drafts.list_drafts(store, who["admin"])} == {mine.id, theirs.id}
    with pytest.raises(NotFound):
        drafts.open_draft(store, who["dee"], theirs.id)
    with pytest.raises(NotFound):
        drafts.save_draft(store, who["dee"], theirs.id, SIMPLE)
    assert drafts.open_draft(store, who["admin"], theirs.id).body == SIMPLE
    with pytest.raises(Forbidden):  # seen, not theirs to change
        drafts.save_draft(store, who["admin"], theirs.id, {"name": "x"})
    for refused in (lambda: drafts.list_drafts(store, who["alice"]),
                    lambda: drafts.create_draft(store, who["alice"], SIMPLE),
                    lambda: drafts.open_draft(store, who["alice"], mine.id)):
        with pytest.raises(Forbidden):
            refused()
    saved = drafts.save_draft(store, who["dee"], mine.id, SIMPLE)
    assert (saved.name, saved.body, saved.created) == ("simple", SIMPLE, mine.created)
    drafts.delete_draft(store, who["admin"], theirs.id)
    with pytest.raises(NotFound):
        drafts.open_draft(store, who["dan"], theirs.id)
    # another tenant's admin never reaches them
    store.add_tenant("acme")
    acme = store.of("acme")
    acme.add_user("boss", "pw-boss", ["admin"])
    boss = Caller.of(acme.user("boss"))
    assert drafts.list_drafts(acme, boss) == []
    with pytest.raises(NotFound):
        drafts.open_draft(acme, boss, mine.id)
    with pytest.raises(NotFound):
        drafts.delete_draft(acme, boss, mine.id)


def test_bad_bodies_and_too_many_drafts_are_refused(store, monkeypatch):
    who = people(store)
    with pytest.raises(Refused, match="a draft is a JSON object"):
        drafts.create_draft(store, who["dee"], ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(LimitError, match="not finite"):
        drafts.create_draft(store, who["dee"], {"name": "x", "n": float("nan")})
    with pytest.raises(LimitError, match="bytes as JSON"):
        drafts.create_draft(store, who["dee"], {"name": "x", "d": ["y" * 60000] * 20})
    odd = drafts.create_draft(store, who["dee"], {"name": "a\x00b\n" + "c" * 200,
                                                  "t": "\x00"})
    assert (odd.name, odd.body["t"]) == ("ab" + "c" * 96, "\x00")  # listed by 100 at most
    drafts.delete_draft(store, who["dee"], odd.id)
    monkeypatch.setattr(drafts, "MAX_DRAFTS", 2)
    drafts.create_draft(store, who["dee"], {})
    drafts.create_draft(store, who["dee"], {})
    with pytest.raises(Conflict, match="you keep 2 drafts already"):
        drafts.create_draft(store, who["dee"], {})
    assert drafts.create_draft(store, who["dan"], {}).name == ""  # per author


def test_problems_point_at_what_they_concern(store):
    body = {"name": "p", "circles": [
        {"uri": "a", "ui": {"x": 10, "y": "far"}},
        {"uri": "b", "deps": [["nowhere"]], "ui": {"x": 1.5, "y": -2}}]}
    found = {(p.pointer, p.code) for p in drafts.problems(store, body)}
    assert ("/circles/0/ui/y", "schema") in found
    assert ("/circles/1/deps", "unknown_dependency") in found or \
        any(code == "unknown_dependency" for _, code in found)
    assert not any(p.startswith("/circles/1/ui") for p, _ in found)
    assert drafts.problems(store, SIMPLE) == []


def test_publishing_makes_a_version_and_moving_circles_alone_only_the_layout(store):
    who = people(store)
    first = drafts.create_draft(store, who["dee"], moved(SIMPLE, a=(0, 0), end=(200, 0)))
    assert drafts.changes(store, first.body).new
    assert drafts.publish(store, who["dee"], first.id) == ("simple", 1, True)
    with pytest.raises(NotFound):  # published: gone
        drafts.open_draft(store, who["dee"], first.id)
    store.start("simple", {}, store.user("alice"))  # version 1 is locked now
    opened = drafts.draft_from_template(store, who["dan"], "simple")
    assert opened == moved(SIMPLE, a=(0, 0), end=(200, 0))
    again = drafts.create_draft(store, who["dan"], moved(SIMPLE, a=(5, 50), end=(300, 9)))
    change = drafts.changes(store, again.body)
    assert (change.positions_only, change.moved, change.added, change.changed) == (
        True, ["a", "end"], [], {})
    assert drafts.publish(store, who["dan"], again.id) == ("simple", 1, False)
    assert store.layout("simple") == {"a": {"x": 5, "y": 50}, "end": {"x": 300, "y": 9}}
    assert store.latest_body("simple") == moved(SIMPLE, a=(0, 0), end=(200, 0))  # unchanged
    assert drafts.draft_from_template(store, who["dee"], "simple") == \
        moved(SIMPLE, a=(5, 50), end=(300, 9))
    # a real change: the next version, with what it changes
    grown = moved({"name": "simple", "title": "Simple", "circles": [
        {"uri": "a", "box": {"form": [{"name": "n", "type": "number"}]}},
        {"uri": "b", "deps": [["a"]]}, {"uri": "end", "deps": [["b"]]}]}, b=(100, 0))
    change = drafts.changes(store, grown)
    assert (change.added, change.removed, change.changed, change.template,
            change.positions_only) == (["b"], [], {"a": ["box"], "end": ["deps"]},
                                        ["title"], False)
    third = drafts.create_draft(store, who["dee"], grown)
    assert drafts.publish(store, who["dee"], third.id) == ("simple", 2, True)
    bad = drafts.create_draft(store, who["dee"], {"name": "simple", "circles": [{"uri": 1}]})
    with pytest.raises(DefinitionError):
        drafts.publish(store, who["dee"], bad.id)
    assert drafts.open_draft(store, who["dee"], bad.id).body  # kept while it cannot be
    with pytest.raises(Forbidden):
        drafts.publish(store, who["admin"], bad.id)


def test_every_shipped_template_opened_as_a_draft_publishes_back_unchanged(store):
    who = people(store)
    store.import_dir(ROOT / "upload" / "workflow")
    for path in sorted((ROOT / "upload" / "workflow").glob("*.json")):
        shipped = json.loads(path.read_text(encoding="utf-8"))
        name = shipped["name"]
        before = store.template_versions()[name]
        opened = drafts.draft_from_template(store, who["dee"], name)
        assert opened == shipped, path.name
        draft = drafts.create_draft(store, who["dee"], opened)
        assert not drafts.changes(store, draft.body).changes_meaning, path.name
        assert drafts.problems(store, draft.body) == [] or all(
            p.warning for p in drafts.problems(store, draft.body)), path.name
        assert drafts.publish(store, who["dee"], draft.id) == (name, before[-1], False)
        assert store.template_versions()[name] == before
        assert store.latest_body(name) == shipped


def test_a_designer_picks_among_the_enabled_people_and_roles_of_their_tenant(store):
    who = people(store)
    store.add_user("fin", "pw-fin", ["user", "finance"])
    store.add_user("gone", "pw-gone", ["auditor"])
    store.disable_user("gone")
    acme = create_tenant(store, "acme", "acmeadmin", "acmeadmin-password")
    acme.add_user("acmeaudit", "pw-acmeaudit", ["auditor"])
    found = drafts.people(store, who["dee"])
    assert found.users == ["admin", "alice", "dan", "dee", "fin"]
    assert found.roles == ["admin", "approver", "designer", "finance", "integration", "user"]
    theirs = drafts.people(acme, Caller.of(acme.user("acmeadmin")))
    assert theirs.users == ["acmeadmin", "acmeaudit"] and "auditor" in theirs.roles
    with pytest.raises(Forbidden):
        drafts.people(store, who["alice"])
