"""Copies and urges over HTTP (SPEC §15): `POST/GET /api/instances/{id}/cc`, `POST
/api/instances/{id}/urge` with its hourly limit (429 and `Retry-After`, also under a
flood of urges at once), the event feed's `cc.sent` and `urge.sent`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from bpflow.worker import Worker
from tests.conftest import settled

REVIEW = {"name": "review", "circles": [
    {"uri": "a", "box": {"confirm": "OK?"}, "assign": {"users": ["bob"]},
     "cc": {"users": ["ann"], "on": "ready"}},
    {"uri": "end", "deps": [["a"]]}]}


def started(api):
    with api.client("admin") as c:
        assert c.post("/api/templates", json=REVIEW).status_code in (200, 201)
    with api.client("alice") as c:
        return c.post("/api/instances", json={"template": "review"}).json()["id"]


def test_cc_then_read_then_listed(api):
    iid = started(api)
    with api.client("alice") as c:
        r = c.post(f"/api/instances/{iid}/cc", json={"users": ["bob", "admin"],
                                                     "comment": "FYI"})
        assert r.status_code == 200, r.text
        assert r.json()["copied"] == ["bob", "admin"]
        again = c.post(f"/api/instances/{iid}/cc", json={"users": ["bob"]}).json()
        assert again["copied"] == []  # one copy per person and instance
        assert [(x["user"], x["circle"], x["read_at"]) for x in again["copies"]] == [
            ("bob", None, None), ("admin", None, None)]
    with api.client("bob") as c:
        assert c.get(f"/api/instances/{iid}").status_code == 200  # opening it reads it
        mail = c.get("/api/mailbox", params={"kind": "cc"}).json()
        assert [(m["kind"], m["sender"], m["instance"]) for m in mail] == [("cc", "alice", iid)]
    with api.client("alice") as c:
        copies = {x["user"]: x["read_at"] for x in c.get(f"/api/instances/{iid}/cc").json()}
        assert copies["bob"] is not None and copies["admin"] is None
    Worker(api.store).run_once()  # the circle's own cc, on ready
    with api.client("ann") as c:
        assert c.get(f"/api/instances/{iid}").status_code == 200  # copied: she may read it
        assert c.post(f"/api/instances/{iid}/circles/a/complete",
                      json={"bookmark": "x", "result": {}}).status_code in (403, 409)
    def sent():
        with api.client("admin") as c:
            feed = c.get("/api/events", params={"limit": 500}).json()["items"]
        return [(e["type"], e["uri"], e["data"]["users"]) for e in feed
                if e["instance"] == iid and e["type"] == "cc.sent"]
    assert settled(sent, lambda got: len(got) >= 2) == [
        ("cc.sent", None, ["bob", "admin"]), ("cc.sent", "a", ["ann"])]


def test_a_flood_of_urges_sends_one_and_says_when_to_try_again(api):
    iid = started(api)

    def urge(_):
        with api.client("alice") as c:
            return c.post(f"/api/instances/{iid}/urge", json={"comment": "please"})
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(urge, range(24)))
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] + [429] * 23
    ok = next(r for r in answers if r.status_code == 200).json()
    assert ok == {"circles": {"a": ["bob"]}}
    limited = next(r for r in answers if r.status_code == 429)
    assert 3500 <= int(limited.headers["Retry-After"]) <= 3600
    assert "urged less than an hour ago" in limited.json()["detail"]
    with api.client("bob") as c:
        mail = c.get("/api/mailbox", params={"kind": "urge"}).json()
        assert len(mail) == 1 and "please" in mail[0]["body"]
    def urged():
        with api.client("admin") as c:
            feed = c.get("/api/events", params={"limit": 500}).json()["items"]
        return [e["uri"] for e in feed if e["instance"] == iid and e["type"] == "urge.sent"]
    assert settled(urged, bool) == ["a"]
