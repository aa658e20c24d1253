"""/api/drafts (SPEC §16) over HTTP, in-process: who may, what a draft answers with (its
problems, in the reader's language, and its changes), publishing, and bad bodies."""

from __future__ import annotations

import json

import pytest

from bpflow.api import create_app
from bpflow.store import Store
from tests.api.helpers import Client
from tests.conftest import SECRET

FORM = {"name": "simple", "circles": [
    {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
    {"uri": "end", "deps": [["a"]]}]}


@pytest.fixture
def call(db_url):
    store = Store(db_url, secret=SECRET)
    for name, roles in {"admin": ["admin"], "dee": ["designer"], "dan": ["user", "designer"],
                        "alice": ["user"]}.items():
        store.add_user(name, f"pw-{name}", roles)
    store.put_template(FORM)
    yield Client(store, create_app(lambda: store))
    store.close()


def test_designers_keep_their_own_drafts_and_publish_them(call):
    r = call("POST", "/api/drafts", json.dumps({"template": "simple"}), "dee")
    assert r.status_code == 201, r.text
    draft = r.json()
    assert (draft["author"], draft["name"], draft["body"], draft["problems"]) == (
        "dee", "simple", FORM, [])
    assert draft["changes"]["positions_only"] is False and not draft["changes"]["new"]
    here = f"/api/drafts/{draft['id']}"
    # others: a user is refused, another designer does not find it, an admin reads it
    assert call("GET", "/api/drafts", None, "alice").status_code == 403
    assert call("GET", here, None, "alice").status_code == 403
    assert call("GET", here, None, "dan").status_code == 404
    assert call("DELETE", here, None, "dan").status_code == 404
    assert call("GET", "/api/drafts", None, "dan").json() == []
    assert call("GET", here, None, "admin").status_code == 200
    assert call("PUT", here, json.dumps({"body": FORM}), "admin").status_code == 403
    assert [d["id"] for d in call("GET", "/api/drafts", None, "admin").json()] == [draft["id"]]
    # a broken edit is kept, with its problems pointing at what they concern, in Chinese
    broken = {"name": "simple", "circles": [
        {"uri": "a", "ui": {"x": 0, "y": 0}, "box": {"form": [{"name": "n", "type": "integer"}]}},
        {"uri": "end", "deps": [["nowhere"]], "ui": {"x": "right", "y": 0}}]}
    r = call("PUT", here, json.dumps({"body": broken}), "dee",
             headers={"Accept-Language": "zh-CN"})
    assert r.status_code == 200, r.text
    problems = {p["path"]: p for p in r.json()["problems"]}
    assert "/circles/1/ui/x" in problems and not problems["/circles/1/ui/x"]["warning"]
    assert any(p["code"] == "unknown_dependency" for p in problems.values())
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in p["message"])
               for p in problems.values()), problems
    assert r.json()["changes"]["changed"] == {"end": ["deps"]}
    r = call("POST", f"{here}/publish", None, "dee")
    assert r.status_code == 422 and r.json()["detail"]["errors"], r.text
    # moved only: the latest version, the positions kept as the layout
    placed = {**FORM, "circles": [{**c, "ui": {"x": 10 * i, "y": 0}}
                                  for i, c in enumerate(FORM["circles"])]}
    assert call("PUT", here, json.dumps({"body": placed}), "dee").json()["changes"][
        "positions_only"] is True
    r = call("POST", f"{here}/publish", None, "dee")
    assert (r.status_code, r.json()["version"], r.json()["created"]) == (200, 1, False)
    assert call("GET", here, None, "dee").status_code == 404  # published: gone
    r = call("POST", "/api/drafts", json.dumps({"template": "simple"}), "dan")
    assert r.json()["body"] == placed
    r = call("POST", "/api/drafts", json.dumps({"body": {**placed, "title": "Simple"}}), "dan")
    r = call("POST", f"/api/drafts/{r.json()['id']}/publish", None, "dan")
    assert (r.status_code, r.json()["version"], r.json()["created"]) == (201, 2, True)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("sent, status, said", [
    ('{"body": {"name": "x"}, "template": "simple"}', 422, "give either 'body' or 'template'"),
    ("{}", 422, "give either 'body' or 'template'"),
    ('{"body": "text"}', 422, "valid dictionary"),
    ('{"template": "nothing-here"}', 404, "no template 'nothing-here'"),
    ('{"body": {"n": NaN}}', 422, ""),
])
def test_bad_draft_bodies_get_a_clear_4xx(call, sent, status, said):
    r = call("POST", "/api/drafts", sent, "dee")
    assert r.status_code == status, r.text
    assert said in json.dumps(r.json()["detail"])
    assert call("GET", "/api/drafts", None, "dee").json() == []
    assert call("GET", "/api/drafts/99", None, "dee").status_code == 404
    assert call("PUT", "/api/drafts/0", json.dumps({"body": {}}), "dee").status_code == 422
