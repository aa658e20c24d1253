"""No row ever references another tenant's (SPEC §12), whatever the users of two tenants do.

Random sequences of what people do over the API (start, complete, claim, delegate, withdraw,
decide approval mail, guest messages, upload, retire and restore templates), each by a user
of `default` or `acme` and aimed at any instance or mail of either tenant, with the worker
sending approval mail in between. After each sequence, SQL over every table: each row's
tenant is the tenant of every row it references, the names a task waits for are its
tenant's users, and the foreign-key check is clean. No answer is a 500. On SQLite and
PostgreSQL."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text

from bpflow.api import create_app
from bpflow.store import Store
from bpflow.store.tables import circles_t, users_t
from bpflow.worker import Worker
from tests.api.test_tenants import FIN, PEOPLE, Client, ask, only, simple
from tests.conftest import SECRET

USERS = [(tenant, name) for tenant, people in PEOPLE.items() for name in people.values()]
TEMPLATES = ("simple", "ask", "fin")
RESULTS = {"a": {"n": 1}, "b": {"t": "x"}, "pay": {"amount": 1}, "ok": {"fine": True}}
OPS = ("start", "start", "start", "complete", "complete", "complete", "claim", "unclaim",
       "delegate", "withdraw", "worker", "worker", "decide", "decide", "guest", "upload",
       "retire", "abort")

# (what, SQL counting rows whose tenant differs from the row they reference)
CROSSING = [
    ("instance -> template", "SELECT count(*) FROM instances i JOIN templates t"
     " ON t.id = i.template_id WHERE t.tenant <> i.tenant"),
    ("instance -> user", "SELECT count(*) FROM instances i JOIN users u ON u.id = i.user_id"
     " WHERE u.tenant <> i.tenant"),
    ("pinned -> instance", "SELECT count(*) FROM instance_templates p JOIN instances i"
     " ON i.id = p.instance_id WHERE i.tenant <> p.tenant"),
    ("pinned -> template", "SELECT count(*) FROM instance_templates p JOIN templates t"
     " ON t.id = p.template_id WHERE t.tenant <> p.tenant"),
    ("circle -> instance", "SELECT count(*) FROM circle_states c JOIN instances i"
     " ON i.id = c.instance_id WHERE i.tenant <> c.tenant"),
    ("event -> instance", "SELECT count(*) FROM events e JOIN instances i"
     " ON i.id = e.instance_id WHERE i.tenant <> e.tenant"),
    ("audience -> instance", "SELECT count(*) FROM task_audience a JOIN instances i"
     " ON i.id = a.instance_id WHERE i.tenant <> a.tenant"),
    ("audience -> user named", "SELECT count(*) FROM task_audience a JOIN users u"
     " ON u.username = substr(a.who, 3) WHERE (a.who LIKE 'u:%' OR a.who LIKE 'a:%')"
     " AND u.tenant <> a.tenant"),
    ("mail -> recipient", "SELECT count(*) FROM mailbox m JOIN users u"
     " ON u.id = m.recipient_id WHERE u.tenant <> m.tenant"),
    ("mail -> sender", "SELECT count(*) FROM mailbox m JOIN users u ON u.id = m.sender_id"
     " WHERE u.tenant <> m.tenant"),
    ("mail -> instance", "SELECT count(*) FROM mailbox m JOIN instances i"
     " ON i.id = m.instance_id WHERE i.tenant <> m.tenant"),
    ("retirement -> template", "SELECT count(*) FROM template_retirements r WHERE NOT EXISTS"
     " (SELECT 1 FROM templates t WHERE t.tenant = r.tenant AND t.name = r.name)"),
]


def crossings(store: Store) -> list[str]:
    """What references another tenant's row (empty when nothing does)."""
    found = []
    with store.reader() as conn:
        for what, sql in CROSSING:
            n = conn.execute(text(sql)).scalar()
            if n:
                found.append(f"{what}: {n} rows")
        if not store.postgres:  # PostgreSQL checks its foreign keys on every write
            bad = conn.execute(text("PRAGMA foreign_key_check")).all()
            if bad:
                found.append(f"foreign_key_check: {bad[:5]}")
        tenant_of = dict(conn.execute(select(users_t.c.username, users_t.c.tenant)).all())
        for row in conn.execute(select(circles_t.c.tenant, circles_t.c.instance_id,
                                       circles_t.c.circle, circles_t.c.task)).all():
            task = row.task or {}
            names = [task.get("assignee")] + list((task.get("candidates") or {})
                                                  .get("users") or [])
            for name in names:
                if name and tenant_of.get(name, row.tenant) != row.tenant:
                    found.append(f"task {row.instance_id}/{row.circle} of {row.tenant}"
                                 f" names {name} of {tenant_of[name]}")
    return found


class World:
    """Two tenants over the API in-process, and what has been made so far."""

    def __init__(self, store: Store):
        self.store = store
        if not store.has_tenant("acme"):
            store.add_tenant("acme")
        for tenant, people in PEOPLE.items():
            s = store.of(tenant)
            for role, name in people.items():
                s.add_user(name, f"pw-{name}", [role])
            for body in (simple(f"the simple of {tenant}"), ask(people["approver"]), FIN):
                s.put_template(body)
        self.call = Client(store, create_app(lambda: store))
        self.tokens = {name: self.call.token(tenant, name) for tenant, name in USERS}
        self.instances: list[tuple[str, str]] = []  # (tenant, id)
        self.versions = itertools.count(1)

    @staticmethod
    def mine(items: list, tenant: str, pick: int) -> list:
        """Two picks in three among `tenant`'s (items are (tenant, id)), else any."""
        own = [i for i in items if i[0] == tenant]
        return own if own and pick % 3 else items

    def mails(self, tenant: str, pick: int) -> list[tuple[str, int]]:
        with self.store.reader() as conn:
            rows = conn.execute(text("SELECT tenant, id FROM mailbox WHERE kind = 'approval'"
                                     " ORDER BY id")).all()
        return self.mine([tuple(r) for r in rows], tenant, pick)

    def ready(self, tenant: str, pick: int) -> tuple[str, str, str | None] | None:
        """An instance (mostly of `tenant`, by `pick`), a ready circle of it, its bookmark."""
        if not self.instances:
            return None
        some = self.mine(self.instances, tenant, pick)
        iid = some[pick % len(some)][1]
        inst = self.store.of(None).get(iid)
        ready = sorted(c for c in inst.circles if inst.circles[c].state == "waiting"
                       and c in RESULTS)
        uri = ready[pick % len(ready)] if ready else "a"
        try:
            mark = self.store.engine.bookmark(inst, uri)
        except Exception:  # not a bookmarkable circle now
            mark = "0.x"
        return iid, uri, mark

    def do(self, op: str, who: tuple[str, str], pick: int, other: tuple[str, str]) -> None:
        tenant, name = who
        token, call = self.tokens[name], self.call
        r = None
        if op == "start":
            r = call("POST", "/api/instances", {"template": TEMPLATES[pick % 3]}, token)
            if r.status_code == 201:
                self.instances.append((tenant, r.json()["id"]))
        elif op == "worker":
            Worker(self.store).run_once()
        elif op == "guest":
            path = "/api/guest/messages" if pick % 2 else f"/api/guest/{tenant}/messages"
            r = call("POST", path, {"name": "G", "subject": "s", "body": "b"}, None,
                     client=f"10.7.{pick % 3}.1")
        elif op == "upload":
            body = simple(f"v{next(self.versions)}") if pick % 2 else only(f"n{pick % 4}")
            r = call("POST", "/api/templates", body, token)
        elif op == "retire":
            what = "restore" if pick % 2 else "retire"
            r = call("POST", f"/api/templates/{TEMPLATES[pick % 3]}/{what}", None, token)
        elif op == "decide":
            mails = self.mails(tenant, pick)
            if mails:
                decision = ("approved", "rejected", "returned")[pick % 3]
                r = call("POST", f"/api/mailbox/{mails[pick % len(mails)][1]}/decision",
                         {"decision": decision, "comment": "c"}, token)
        else:
            target = self.ready(tenant, pick)
            if target is None:
                return
            iid, uri, mark = target
            base = f"/api/instances/{iid}"
            to = other[1] if pick % 2 else PEOPLE[tenant][("user", "finance", "approver")[pick % 3]]
            body: dict[str, Any] | None = {
                "complete": {"bookmark": mark, "result": RESULTS.get(uri, {})},
                "delegate": {"to": to}, "abort": {"reason": "stop"}}.get(op)
            path = {"complete": f"{base}/circles/{uri}/complete",
                    "claim": f"{base}/circles/{uri}/claim",
                    "unclaim": f"{base}/circles/{uri}/unclaim",
                    "delegate": f"{base}/circles/{uri}/assign",
                    "withdraw": f"{base}/circles/{uri}/withdraw",
                    "abort": f"{base}/abort"}[op]
            r = call("POST", path, body, token)
        if r is not None:
            assert r.status_code < 500, (op, who, r.status_code, r.text)


STEPS = st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(USERS),
                           st.integers(0, 1000), st.sampled_from(USERS)),
                 min_size=1, max_size=14)


@pytest.fixture
def world(db_url):
    store = Store(db_url, secret=SECRET)
    yield World(store)
    store.close()


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(steps=STEPS)
def test_no_row_ever_references_another_tenants(world, steps):
    """The world carries over from example to example (more to cross with each)."""
    for op, who, pick, other in steps:
        world.do(op, who, pick, other)
    Worker(world.store).run_once()
    assert not crossings(world.store)


def test_the_checks_see_a_crossing(db_url):
    """The SQL above finds a row of one tenant pointing at another's (written by hand,
    with the foreign keys off on SQLite; PostgreSQL refuses to write it at all)."""
    store = Store(db_url, secret=SECRET)
    try:
        world = World(store)
        world.do("start", ("acme", "zed"), 0, ("acme", "zed"))
        assert not crossings(store)
        iid = world.instances[0][1]
        if store.postgres:
            import sqlalchemy.exc
            with pytest.raises(sqlalchemy.exc.IntegrityError), store.db.begin() as conn:
                conn.execute(text("UPDATE circle_states SET tenant = 'default'"
                                  " WHERE instance_id = :i"), {"i": iid})
            return
        import sqlite3
        raw = sqlite3.connect(store.db.url.database, isolation_level=None)
        try:
            raw.execute("PRAGMA foreign_keys=OFF")
            raw.execute("UPDATE events SET tenant = 'default' WHERE instance_id = ?", (iid,))
        finally:
            raw.close()
        found = crossings(store)
        assert any(f.startswith("event -> instance") for f in found), found
        assert any(f.startswith("foreign_key_check") for f in found), found
    finally:
        store.close()


def test_the_instances_quota_holds_for_starts_at_the_same_moment(tmp_path):
    """Twenty starts at once against a quota of five: five start, fifteen are refused (the
    count and the insert are one at a time in a process; a regression was all twenty)."""
    import threading

    from bpflow.errors import QuotaExceeded
    from bpflow.store.migrate import upgrade
    url = f"sqlite:///{tmp_path / 'race.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    try:
        acme = store.of(store.add_tenant("acme"))
        acme.add_user("zed", "pw", ["user"])
        acme.put_template(simple("s"))
        acme.set_quotas({"instances": 5})
        zed, outcomes = acme.user("zed"), []
        barrier = threading.Barrier(20)

        def start() -> None:
            barrier.wait()
            try:
                acme.start("simple", {}, zed)
                outcomes.append("started")
            except QuotaExceeded:
                outcomes.append("refused")
        threads = [threading.Thread(target=start) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert acme.usage()["instances"] == 5, outcomes
        assert sorted(outcomes) == ["refused"] * 15 + ["started"] * 5
    finally:
        store.close()


def test_the_instances_quota_holds_for_async_starts_at_the_same_moment(tmp_path):
    """The same for the API's `start_async`, twenty gathered on one event loop."""
    import asyncio

    from bpflow.errors import QuotaExceeded
    from bpflow.store.migrate import upgrade
    from tests.conftest import run_async
    url = f"sqlite:///{tmp_path / 'race.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    try:
        acme = store.of(store.add_tenant("acme"))
        acme.add_user("zed", "pw", ["user"])
        acme.put_template(simple("s"))
        acme.set_quotas({"instances": 5})
        zed = acme.user("zed")

        async def starts():
            return await asyncio.gather(*(acme.start_async("simple", {}, zed)
                                          for _ in range(20)), return_exceptions=True)
        outcomes = run_async(starts())
        assert sum(isinstance(o, QuotaExceeded) for o in outcomes) == 15, outcomes
        assert acme.usage()["instances"] == 5
    finally:
        store.close()


def test_an_action_result_past_the_variables_quota_fails_the_circle_once(tmp_path):
    """An HTTP action whose answer is larger than the tenant's variables quota: called once,
    the circle fails saying why (not re-sent at every batch of the worker)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from bpflow.store.migrate import upgrade
    hits = []

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self):
            hits.append(self.path)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps({"big": "x" * 500}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    upgrade(url)
    store = Store(url, secret=SECRET)
    try:
        acme = store.of(store.add_tenant("acme"))
        acme.add_user("zed", "pw", ["user"])
        acme.put_template({"name": "h", "circles": [{"uri": "h", "box": {"action": {
            "type": "http", "method": "POST",
            "url": f"http://127.0.0.1:{server.server_port}/pay"}}}]})
        acme.set_quotas({"variables_bytes": 100})
        inst = acme.start("h", {}, acme.user("zed"))
        worker = Worker(store)
        for _ in range(3):
            worker.run_once()
        circle = acme.get(inst.id).circles["h"]
        assert len(hits) == 1, f"the action ran {len(hits)} times"
        assert circle.state != "waiting" and "quota" in (circle.reason or "")
    finally:
        server.shutdown()
        store.close()
