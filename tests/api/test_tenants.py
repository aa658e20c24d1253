"""Tenants over the API (SPEC §12): nothing crosses tenants.

Two tenants, `default` and `acme`, each with an admin, a user, an approver and a user of the
role `finance`, templates of the same names (and one name only each has), instances, tasks
(one for the role `finance`, named the same in both), approval mail and guest messages.
Every endpoint of the app (the table is checked to cover every route) is called by every
role of one tenant against the other's ids and names: 404, lists and counts without the
other's, no delegation to its users, and its rows are the same afterwards. On SQLite and
PostgreSQL, on the short path and off it. Then: the token names the tenant (and a token
re-signed to name another is refused), quotas (429, 413), guests per tenant."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bpflow import files
from bpflow.access import Caller
from bpflow.api import create_app
from bpflow.auth import issue_token, verify_token
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.store.tables import (
    audience_t,
    audit_t,
    batches_t,
    blobs_t,
    circles_t,
    deliveries_t,
    drafts_t,
    events_t,
    failed_circles_t,
    files_t,
    instances_t,
    layouts_t,
    mail_t,
    operations_t,
    pinned_t,
    retired_t,
    substitutes_t,
    templates_t,
    tenants_t,
    users_t,
    wait_buckets_t,
    wait_rounds_t,
    webhooks_t,
)
from bpflow.worker import Worker
from tests.api.test_payloads import ROUTES, route_of
from tests.conftest import SECRET, run_async

PEOPLE = {  # tenant -> role -> username (usernames are unique across tenants)
    "default": {"admin": "admin", "user": "alice", "approver": "ann", "finance": "fay"},
    "acme": {"admin": "boss", "user": "zed", "approver": "zoe", "finance": "zach"},
}
ROLES = ("admin", "user", "approver", "finance")
WHO = ("anonymous", *ROLES)


def simple(title: str) -> dict[str, Any]:
    return {"name": "simple", "title": title, "circles": [
        {"uri": "a", "box": {"form": [{"name": "n", "type": "integer"}]}},
        {"uri": "b", "deps": [["a"]], "box": {"form": [{"name": "t", "type": "string"}]}},
        {"uri": "end", "deps": [["b"]]}]}


def ask(to: str) -> dict[str, Any]:
    return {"name": "ask", "circles": [
        {"uri": "ok", "box": {"action": {"type": "approval", "to": to, "subject": "please"}}}]}


FIN = {"name": "fin", "circles": [  # a task for the role finance, in both tenants
    {"uri": "pay", "assign": {"roles": ["finance"]},
     "box": {"form": [{"name": "amount", "type": "integer"}]}}]}


SIG = {"name": "sig", "circles": [  # waits for the signal paid/k, in both tenants
    {"uri": "s", "box": {"action": {"type": "signal", "name": "paid", "key": "k"}}}]}


def only(tenant: str) -> dict[str, Any]:
    return {"name": f"only-{tenant}", "circles": [{"uri": "x", "box": {"form": []}}]}


TABLES = (users_t, templates_t, instances_t, pinned_t, circles_t, events_t, mail_t,
          audience_t, retired_t, webhooks_t, deliveries_t, batches_t, substitutes_t, files_t,
          blobs_t, drafts_t, layouts_t, audit_t, operations_t, wait_rounds_t,
          wait_buckets_t, failed_circles_t)


def dump(store: Store, tenant: str) -> dict[str, list[tuple]]:
    """Every row of `tenant`, table by table (and its row of the tenants table)."""
    out = {}
    with store.reader() as conn:
        for table in TABLES:
            rows = conn.execute(select(table).where(table.c.tenant == tenant)).all()
            out[table.name] = sorted(tuple(map(repr, r)) for r in rows)
        out["tenants"] = [tuple(map(repr, r)) for r in conn.execute(
            select(tenants_t).where(tenants_t.c.name == tenant)).all()]
    return out


def test_the_dump_covers_every_table_with_a_tenant():
    with_tenant = {t.name for t in users_t.metadata.sorted_tables if "tenant" in t.c}
    assert with_tenant == {t.name for t in TABLES}


def build_world(store: Store) -> dict[str, dict[str, Any]]:
    """Both tenants' people, templates, instances, tasks, approval mail, guest messages."""
    if not store.has_tenant("acme"):
        store.add_tenant("acme")
    world: dict[str, dict[str, Any]] = {}
    for tenant, people in PEOPLE.items():
        s = store.of(tenant)
        for role, name in people.items():
            s.add_user(name, f"pw-{name}", [role])
        for body in (simple(f"the simple of {tenant}"), ask(people["approver"]), FIN,
                     only(tenant), SIG):
            s.put_template(body)
        starter = s.user(people["user"])
        world[tenant] = {
            "simple": s.start("simple", {}, starter).id,
            "other": s.start("simple", {}, starter).id,
            "ask": s.start("ask", {}, starter).id,
            "fin": s.start("fin", {}, starter).id,
            "sig": s.start("sig", {}, starter).id,
            "only": f"only-{tenant}",
            "batch": s.start_batch("simple", [people["user"]], created_by=people["admin"])[0],
        }
    Worker(store).run_once()  # the approval mail of both tenants
    for tenant, people in PEOPLE.items():
        s, w = store.of(tenant), world[tenant]
        box = Mailbox(s)
        w["mail"] = box.inbox(s.user(people["approver"]), kind="approval")[0]["id"]
        w["guest"] = box.guest_message("Guest", f"to {tenant}", "hello", "10.9.9.9")
        w["hook"] = s.add_webhook("http://127.0.0.1:9/h", ["circle.left"], "s" * 16)["id"]
        w["bookmark"] = s.engine.bookmark(s.get(w["simple"]), "a")
        w["fin_bookmark"] = s.engine.bookmark(s.get(w["fin"]), "pay")
        w["sig_bookmark"] = s.engine.bookmark(s.get(w["sig"]), "s")
        w["file"] = files.upload(s, Caller.of(s.user(people["user"])), "receipt.pdf",
                                 b"%PDF-1.4\n%%EOF\n")["id"]
        w["draft"] = s.add_draft(s.user(people["admin"])["id"], "simple", simple("a draft"))
        s.start_sandbox(str(w["draft"]), simple("a draft"), {}, s.user(people["admin"]))
        w["audit"] = s.add_audit(None, None, "quotas_changed", tenant)
        w["operation"] = f"{len(tenant):032x}"  # a bulk operation (SPEC §18), never run
        s.add_operation(w["operation"], "resume", {}, {}, None, [w["other"]], 1,
                        people["admin"])
        w["ids"] = {w[k] for k in ("simple", "other", "ask", "fin", "sig")}
    return world


class Client:
    """Requests to the app in-process as one user of one tenant (None: no token); the
    routes called are recorded."""

    def __init__(self, store: Store, app):
        self.store, self.app, self.checked = store, app, set()
        self.clients = itertools.count(1)

    def token(self, tenant: str, who: str) -> str:
        return issue_token(self.store.of(tenant).user(who), SECRET)

    def __call__(self, method: str, path: str, body: Any = None, token: str | None = None,
                 client: str | None = None, headers: dict[str, str] | None = None
                 ) -> httpx.Response:
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}),
                   **(headers or {})}
        address = client or f"10.0.{next(self.clients) % 250}.1"

        async def send():
            transport = httpx.ASGITransport(app=self.app, client=(address, 1234))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.request(method, path, json=body, headers=headers)
        r = run_async(send())
        self.checked.add((method, route_of(method, path.split("?")[0]).path))
        return r


# ------------------------------------------------------------------- the table
# Each row: method, path, body (formatted with the other tenant's ids as {v_*} and the
# caller's tenant's as {o_*}, {me} the caller's username), and what every signed-in role
# gets: a status, a role -> status dict, or a check (response, context) -> error or None.
# Without a token every row but the open ones is 401.
Check = Callable[[httpx.Response, dict[str, Any]], str | None]


def ids_in(r: httpx.Response, key: str = "id") -> set:
    return {item[key] for item in r.json()}


def no_other_instances(r, ctx) -> str | None:
    if r.status_code != 200:
        return f"status {r.status_code}"
    seen = ids_in(r)
    if seen & ctx["victim"]["ids"]:
        return f"sees {seen & ctx['victim']['ids']}"
    if int(r.headers["X-Total-Count"]) != len(seen):
        return f"X-Total-Count {r.headers['X-Total-Count']} for {len(seen)} listed"
    if ctx["role"] == "admin" and seen != ctx["own_instances"]():
        return f"an admin lists {len(seen)}, not the tenant's {len(ctx['own_instances']())}"
    return None


def nothing_listed(r, ctx) -> str | None:
    if r.status_code != 200 or r.json() or r.headers.get("X-Total-Count") != "0":
        return f"{r.status_code} {r.text[:200]} {r.headers.get('X-Total-Count')}"
    return None


def own_templates_only(r, ctx) -> str | None:
    names = {t["name"]: t for t in r.json()}
    if f"only-{ctx['victim_name']}" in names or f"only-{ctx['tenant']}" not in names:
        return f"lists {sorted(names)}"
    versions = ctx["own_store"].template_versions()
    if any(t["versions"] != versions[n] for n, t in names.items()):
        return f"versions {names} != {versions}"
    return None


def own_simple(r, ctx) -> str | None:
    if r.status_code != 200 or r.json()["body"].get("title") != f"the simple of {ctx['tenant']}":
        return f"{r.status_code} {r.text[:200]}"
    return None


def own_stats(r, ctx) -> str | None:
    if r.status_code != 200:
        return f"status {r.status_code}"
    count = sum(r.json()["instances"].values())
    own = ctx["own_store"].list_instances(template="simple", limit=1000)[1]
    if count > own:
        return f"counts {count} instances of simple, the tenant has {own}"
    return None


def uploaded_here(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    if r.status_code not in (200, 201):
        return f"status {r.status_code} {r.text[:200]}"
    if ctx["own_store"].latest_body("simple")["title"] != f"the simple of {ctx['victim_name']}":
        return "not stored in the caller's tenant"
    return None


def uploaded_elsewhere(r, ctx) -> str | None:
    """A name only the other tenant has is a new name in the caller's."""
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    if r.status_code not in (200, 201) or r.json()["version"] != 1:
        return f"status {r.status_code} {r.text[:200]}"
    return None


def started_here(r, ctx) -> str | None:
    if r.status_code != 201:
        return f"status {r.status_code} {r.text[:200]}"
    if r.json()["id"] in ctx["victim"]["ids"] or ctx["own_store"].get(r.json()["id"]) is None:
        return "not started in the caller's tenant"
    return None


def own_tasks_only(r, ctx) -> str | None:
    if r.status_code != 200:
        return f"status {r.status_code}"
    seen = ids_in(r, "instance")
    if seen & ctx["victim"]["ids"]:
        return f"sees the other tenant's tasks {seen & ctx['victim']['ids']}"
    if int(r.headers["X-Total-Count"]) != len(r.json()):
        return "X-Total-Count counts more than listed"
    if ctx["role"] == "finance" and ctx["own"]["fin"] not in seen:
        return "finance does not see its own tenant's finance task"
    return None


def own_mail_only(r, ctx) -> str | None:
    if r.status_code != 200:
        return f"status {r.status_code}"
    seen = ids_in(r)
    theirs = {ctx["victim"]["mail"], ctx["victim"]["guest"]}
    if seen & theirs:
        return f"sees the other tenant's mail {seen & theirs}"
    if ctx["role"] == "admin" and ctx["kind"] in (None, "guest") and \
            ctx["own"]["guest"] not in seen:
        return "an admin does not see its tenant's guest message"
    if ctx["role"] == "approver" and ctx["kind"] is None and ctx["own"]["mail"] not in seen:
        return "the approver does not see its own approval"
    return None


def no_delegation_out(r, ctx) -> str | None:
    if r.status_code < 400:
        return f"delegated to the other tenant's user: {r.status_code}"
    return None


def own_events_only(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    if r.status_code != 200:
        return f"status {r.status_code} {r.text[:200]}"
    seen = {i["instance"] for i in r.json()["items"]}
    return f"sees the other tenant's events of {seen & ctx['victim']['ids']}" \
        if seen & ctx["victim"]["ids"] else None


def own_webhooks_only(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    seen = {h["id"] for h in r.json()}
    if ctx["victim"]["hook"] in seen or ctx["own"]["hook"] not in seen:
        return f"lists the webhooks {seen}"
    return None


def webhook_here(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    if r.status_code != 201:
        return f"status {r.status_code} {r.text[:200]}"
    if r.json()["id"] not in {h["id"] for h in ctx["own_store"].webhooks()}:
        return "not created in the caller's tenant"
    return None


def signalled_own_only(r, ctx) -> str | None:
    """A signal reaches the caller's tenant's waiting circle only (the other's is the
    same afterwards: the dump)."""
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    if r.status_code != 200 or r.json() != {"delivered": 1}:
        return f"{r.status_code} {r.text[:200]}"
    if ctx["own_store"].get(ctx["own"]["sig"]).circles["s"].state != "success":
        return "the caller's own waiting circle was not completed"
    return None


def own_drafts_only(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    seen = {d["id"] for d in r.json()}
    if ctx["victim"]["draft"] in seen or ctx["own"]["draft"] not in seen:
        return f"lists the drafts {seen}"
    return None


def own_operation_instances(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    seen = {i["id"] for i in r.json()["items"]}
    if seen & ctx["victim"]["ids"] or not seen:
        return f"lists the instances {seen}"
    return None


def own_operation(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    return None if r.status_code == 202 and r.json()["matched"] == 0 else \
        f"{r.status_code} {r.text[:200]}"


def own_audit_only(r, ctx) -> str | None:
    if ctx["role"] != "admin":
        return None if r.status_code == 403 else f"status {r.status_code}"
    seen = {e["id"] for e in r.json()["items"]}
    if ctx["victim"]["audit"] in seen or ctx["own"]["audit"] not in seen:
        return f"lists the audit entries {seen}"
    return None


ADMIN_ONLY_404 = {"admin": 404, "user": 403, "approver": 403, "finance": 403}
ADMIN_ONLY_200 = {"admin": 200, "user": 403, "approver": 403, "finance": 403}
OPEN = {"GET /api/health", "POST /api/auth/token"}
ROWS: list[tuple[str, str, Any, int | dict[str, int] | Check]] = [
    ("GET", "/api/health", None, 200),
    ("POST", "/api/auth/token", {"username": "{me}", "password": "pw-{me}"},
     lambda r, ctx: None if verify_token(r.json()["access_token"], SECRET).tenant ==
     ctx["tenant"] else "the token does not name the caller's tenant"),
    ("GET", "/api/templates", None, own_templates_only),
    ("GET", "/api/templates/{v_only}", None, 404),
    ("GET", "/api/templates/{v_only}?version=1", None, 404),
    ("GET", "/api/templates/simple", None, own_simple),
    ("GET", "/api/templates/{v_only}/stats", None, 404),
    ("GET", "/api/templates/simple/stats", None, own_stats),
    ("POST", "/api/templates/{v_only}/retire", None, ADMIN_ONLY_404),
    ("POST", "/api/templates/{v_only}/restore", None, ADMIN_ONLY_404),
    ("POST", "/api/templates/simple/retire", None, ADMIN_ONLY_200),
    ("POST", "/api/templates/simple/restore", None, ADMIN_ONLY_200),
    ("POST", "/api/instances", {"template": "{v_only}"}, 404),
    ("POST", "/api/instances", {"template": "simple"}, started_here),
    ("GET", "/api/instances", None, no_other_instances),
    ("GET", "/api/instances?limit=200", None, no_other_instances),
    ("GET", "/api/instances?template={v_only}", None, nothing_listed),
    ("GET", "/api/tasks", None, own_tasks_only),
    ("GET", "/api/tasks?assigned=candidate", None, own_tasks_only),
    ("GET", "/api/tasks?template=fin", None, own_tasks_only),
    ("GET", "/api/mailbox", None, own_mail_only),
    ("GET", "/api/mailbox?kind=guest", None, own_mail_only),
    ("POST", "/api/mailbox/{v_mail}/decision", {"decision": "approved"}, 404),
    ("POST", "/api/mailbox/{v_guest}/decision", {"decision": "approved"}, 404),
    ("POST", "/api/instances/{o_fin}/circles/pay/assign", {"to": "{v_finance}"},
     no_delegation_out),
    ("POST", "/api/instances/{o_simple}/circles/a/assign", {"to": "{v_user}"},
     no_delegation_out),
    ("GET", "/api/batches/{v_batch}/stats", None, ADMIN_ONLY_404),
    ("POST", "/api/instances/bulk", {"template": "{v_only}", "role": "user"}, ADMIN_ONLY_404),
    ("POST", "/api/instances/bulk", {"template": "simple", "users": ["{v_user}"]},
     {"admin": 422, "user": 403, "approver": 403, "finance": 403}),  # not a user here
]
for _kind in ("simple", "ask", "fin"):
    _iid = "{v_" + _kind + "}"
    ROWS += [
        ("GET", f"/api/instances/{_iid}", None, 404),
        ("GET", f"/api/instances/{_iid}/history", None, 404),
        ("GET", f"/api/instances/{_iid}/reset-preview?uri=a", None, 404),
        ("POST", f"/api/instances/{_iid}/reset", {"uri": "a"}, 404),
        ("POST", f"/api/instances/{_iid}/suspend", None, 404),
        ("POST", f"/api/instances/{_iid}/resume", None, 404),
        ("POST", f"/api/instances/{_iid}/abort", {"reason": "stop"}, 404),
    ]
ROWS += [
    ("POST", "/api/instances/{v_simple}/circles/a/complete",
     {"bookmark": "{v_bookmark}", "result": {"n": 1}}, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/fail",
     {"bookmark": "{v_bookmark}", "reason": "no"}, 404),
    ("POST", "/api/instances/{v_fin}/circles/pay/complete",
     {"bookmark": "{v_fin_bookmark}", "result": {"amount": 1}}, 404),
    ("POST", "/api/instances/{v_fin}/circles/pay/fail",
     {"bookmark": "{v_fin_bookmark}", "reason": "no"}, 404),
    ("POST", "/api/instances/{v_ask}/circles/ok/complete",
     {"bookmark": "{v_bookmark}", "result": {}}, 404),
    ("POST", "/api/instances/{v_sig}/circles/s/complete",
     {"bookmark": "{v_sig_bookmark}", "result": {}}, 404),
    ("POST", "/api/instances/{v_sig}/circles/s/fail",
     {"bookmark": "{v_sig_bookmark}", "reason": "no"}, 404),
    ("POST", "/api/signals/paid", {"key": "k", "data": {"from": "{tenant}"}},
     signalled_own_only),
    ("POST", "/api/instances/{v_fin}/circles/pay/claim", None, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/claim", None, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/unclaim", None, 404),
    ("POST", "/api/instances/{v_fin}/circles/pay/assign", {"to": "{o_finance}"}, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/assign", {"to": "{me}"}, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/withdraw", None, 404),
    ("POST", "/api/instances/{v_ask}/circles/ok/withdraw", None, 404),
]
ROWS += [  # changing running flows (SPEC §11)
    ("POST", "/api/templates/{v_only}/migrate", {"from": 1, "to": 1}, ADMIN_ONLY_404),
    ("POST", "/api/templates/simple/migrate", {"from": 1, "to": 1, "instances": ["{v_simple}"]},
     ADMIN_ONLY_404),
    ("GET", "/api/templates/{v_only}/circles/x/instances?state=waiting", None, 404),
    ("GET", "/api/templates/simple/circles/a/instances?state=waiting", None,
     lambda r, ctx: no_other_instances(r, {**ctx, "role": None}) or (
         None if ctx["role"] != "admin" or ctx["own"]["simple"] in ids_in(r)
         else "an admin does not see the tenant's instance waiting at 'a'")),
]
ROWS += [  # account basics (SPEC §17): nobody resets another tenant's password; a wrong
    # current password changes nothing
    ("POST", "/api/users/{v_user}/password", {"password": "a-new-password"}, ADMIN_ONLY_404),
    ("POST", "/api/auth/password", {"current_password": "not-theirs",
                                    "new_password": "a-new-password"}, 422),
]
ROWS += [  # the event feed and webhooks (SPEC §11)
    ("GET", "/api/events", None, own_events_only),
    ("GET", "/api/events?limit=1000", None, own_events_only),
    ("GET", "/api/webhooks", None, own_webhooks_only),
    ("GET", "/api/audit", None, own_audit_only),  # SPEC §18
    # operations (SPEC §18): the other tenant's instances, operations and templates are
    # not found, nor listed
    ("POST", "/api/operations", {"action": "abort", "instances": ["{v_simple}"]},
     ADMIN_ONLY_404),
    ("POST", "/api/operations", {"action": "abort", "filter": {"template": "only-{victim}"}},
     own_operation),
    ("GET", "/api/operations/{v_operation}", None, ADMIN_ONLY_404),
    ("GET", "/api/operations/lists/instances?template=simple", None, own_operation_instances),
    ("GET", "/api/operations/lists/incidents", None, ADMIN_ONLY_200),
    ("GET", "/api/operations/lists/overdue", None, ADMIN_ONLY_200),
    ("GET", "/api/templates/{v_only}/durations", None, ADMIN_ONLY_404),
    ("GET", "/api/webhooks/{v_hook}", None, ADMIN_ONLY_404),
    ("GET", "/api/webhooks/{v_hook}/deliveries", None, ADMIN_ONLY_404),
    ("DELETE", "/api/webhooks/{v_hook}", None, ADMIN_ONLY_404),
    ("POST", "/api/webhooks", {"url": "http://127.0.0.1:9/h", "events": ["circle.left"],
                               "secret": "s" * 16}, webhook_here),
]
WHILE = {"from": "2026-01-01T00:00:00+00:00", "until": "2099-01-01T00:00:00+00:00"}
ROWS += [  # approvals as teams run them (SPEC §15): nothing of the other tenant is
    # reached, no one of it named
    ("POST", "/api/mailbox/{v_mail}/signers", {"users": ["{o_approver}"], "where": "with"},
     404),
    ("DELETE", "/api/mailbox/{v_mail}/signers", {"users": ["{v_approver}"]}, 404),
    ("POST", "/api/mailbox/{v_mail}/transfer", {"to": "{o_approver}"}, 404),
    ("POST", "/api/mailbox/{v_mail}/delegate", {"to": "{o_user}"}, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/delegate", {"to": "{o_user}"}, 404),
    ("GET", "/api/instances/{v_ask}/circles/ok/return-targets", None, 404),
    ("POST", "/api/instances/{v_simple}/circles/a/return", {"comment": "amend"}, 404),
    ("POST", "/api/instances/{v_simple}/cc", {"users": ["{o_user}"]}, 404),
    ("GET", "/api/instances/{v_simple}/cc", None, 404),
    ("POST", "/api/instances/{v_ask}/urge", {"comment": "please"}, 404),
    ("POST", "/api/instances/{v_simple}/comments", {"text": "hello"}, 404),
    ("GET", "/api/instances/{v_simple}/comments", None, 404),
    ("GET", "/api/instances/{v_simple}/files", None, 404),
    ("GET", "/api/files/{v_file}", None, 404),
    ("POST", "/api/files", None, 422),  # no file: nothing kept anywhere
    ("PUT", "/api/me/substitute", {"to": "{v_user}", **WHILE}, 422),  # not one of theirs
    ("GET", "/api/me/substitute", None, 404),
    ("DELETE", "/api/me/substitute", None, 404),
    ("PUT", "/api/users/{v_user}/substitute", {"to": "{v_approver}", **WHILE},
     ADMIN_ONLY_404),
    ("GET", "/api/users/{v_user}/substitute", None, ADMIN_ONLY_404),
    ("DELETE", "/api/users/{v_user}/substitute", None, ADMIN_ONLY_404),
]
ROWS += [  # drafts (SPEC §16): the other tenant's are not found, nor its templates
    ("GET", "/api/drafts", None, own_drafts_only),
    ("POST", "/api/drafts", {"template": "only-{victim}"}, ADMIN_ONLY_404),
    ("GET", "/api/drafts/{v_draft}", None, ADMIN_ONLY_404),
    ("PUT", "/api/drafts/{v_draft}", {"body": {"name": "mine"}}, ADMIN_ONLY_404),
    ("DELETE", "/api/drafts/{v_draft}", None, ADMIN_ONLY_404),
    ("POST", "/api/drafts/{v_draft}/publish", None, ADMIN_ONLY_404),
    # trying a draft (the other tenant's is being tried): not found either
    *(("POST", f"/api/drafts/{{v_draft}}/try{tail}", body, ADMIN_ONLY_404) for tail, body in (
        ("", {}), ("/circles/a/fill", {"values": {"n": 1}}),
        ("/circles/a/decide", {"decision": "approved"}), ("/circles/a/answer", {}),
        ("/circles/a/fire", None))),
    ("GET", "/api/drafts/{v_draft}/try", None, ADMIN_ONLY_404),
    ("GET", "/api/drafts/{v_draft}/try/circles/a/return-targets", None, ADMIN_ONLY_404),
    ("DELETE", "/api/drafts/{v_draft}/try", None, ADMIN_ONLY_404),
]
ROWS += [  # last: an upload of the other tenant's template (same name, its body) is the
    # caller's own, a new version in the caller's tenant
    ("POST", "/api/templates", simple("the simple of {victim}"), uploaded_here),
    ("POST", "/api/templates", only("{victim}"), uploaded_elsewhere),
]
GUEST_ROWS = [  # called after the other tenant's rows are compared (they reach default)
    ("POST", "/api/guest/messages", {"name": "G", "subject": "s", "body": "b"}, 201),
    ("POST", "/api/guest/{tenant}/messages", {"name": "G", "subject": "s", "body": "b"}, 201),
    ("POST", "/api/guest/nowhere/messages", {"name": "G", "subject": "s", "body": "b"}, 404),
]


def fill(value: Any, values: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return value.format(**values)
    if isinstance(value, dict):
        return {k: fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, values) for v in value]
    return value


@pytest.fixture
def store(db_url):
    s = Store(db_url, secret=SECRET)
    yield s
    s.close()


@pytest.mark.parametrize("short_path", [True, False], ids=["short-path", "routes"])
@pytest.mark.parametrize("tenant, victim", [("default", "acme"), ("acme", "default")])
def test_nothing_crosses_tenants(store, tenant, victim, short_path):
    """Every route (the framework's routes), and the routes the short path answers first
    (`app.hot`: the other rows take the same code in both variants)."""
    world = build_world(store)
    app = create_app(lambda: store)
    assert app.hot is not None
    hot = {("POST", route.path) for route, _ in app.hot.routes}
    if not short_path:
        app.hot = None
    call = Client(store, app)
    own_store = store.of(tenant)
    tokens = {role: call.token(tenant, PEOPLE[tenant][role]) for role in ROLES}
    before = dump(store, victim)
    failures = []

    def run(rows):
        if short_path:
            rows = [row for row in rows
                    if (row[0], route_of(row[0], row[1].split("?")[0]).path) in hot]
        for (method, path, body, expect), who in itertools.product(rows, WHO):
            role = None if who == "anonymous" else who
            values = {"me": PEOPLE[tenant].get(role, "nobody"), "tenant": tenant,
                      "victim": victim,
                      **{f"v_{k}": v for k, v in world[victim].items() if k != "ids"},
                      **{f"o_{k}": v for k, v in world[tenant].items() if k != "ids"},
                      **{f"v_{r}": n for r, n in PEOPLE[victim].items()},
                      **{f"o_{r}": n for r, n in PEOPLE[tenant].items()}}
            url, sent = fill(path, values), fill(body, values)
            r = call(method, url, sent, tokens.get(role))
            where = f"{who} {method} {path}"
            if r.status_code >= 500 or "Traceback" in r.text:
                failures.append(f"{where}: {r.status_code} {r.text[:300]}")
                continue
            if role is None:
                opened = f"{method} {path}" in OPEN or "/guest/" in path
                if not opened and r.status_code != 401:
                    failures.append(f"{where}: {r.status_code}, not 401")
                if f"{method} {path}" == "POST /api/auth/token":
                    continue  # no username to sign in with
                if not opened:
                    continue
            ctx = {"role": role, "tenant": tenant, "kind": "guest" if "kind=guest" in path
                   else None, "victim_name": victim,
                   "victim": world[victim], "own": world[tenant], "own_store": own_store,
                   "own_instances": lambda: {i.id if hasattr(i, "id") else i["id"]
                                             for i in own_store.list_instances(
                                                 limit=100000)[0]}}
            if callable(expect):
                problem = expect(r, ctx)
                if problem:
                    failures.append(f"{where}: {problem}")
                continue
            want = expect.get(role, expect.get("admin")) if isinstance(expect, dict) \
                else expect
            if role is None and "/guest/" not in path:
                want = 200 if path == "/api/health" else want
            if r.status_code != want:
                failures.append(f"{where}: {r.status_code}, not {want}: {r.text[:200]}")

    run(ROWS)
    after = dump(store, victim)
    changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
    run(GUEST_ROWS)
    assert not failures, "\n".join(failures)
    assert not changed, f"the other tenant's rows changed: {changed}"
    assert call.checked == (hot if short_path else {(m, r.path) for r in ROUTES
                                                    for m in r.methods})
    # and the caller's own ids work (the 404s above are not for want of trying)
    r = call("GET", f"/api/instances/{world[tenant]['simple']}", None, tokens["user"])
    assert r.status_code == 200


# ------------------------------------------------------------- token, quotas, guests
def test_the_token_names_the_tenant_and_a_changed_claim_is_refused(store):
    world = build_world(store)
    call = Client(store, create_app(lambda: store))
    r = call("POST", "/api/auth/token", {"username": "zed", "password": "pw-zed"})
    assert r.status_code == 200
    token = r.json()["access_token"]
    assert verify_token(token, SECRET).tenant == "acme"
    assert call("GET", f"/api/instances/{world['acme']['simple']}", None, token
                ).status_code == 200
    zed = store.of("acme").user("zed")
    for other in ("default", "nowhere"):  # signed with the server's own key
        forged = issue_token({**zed, "tenant": other}, SECRET)
        assert verify_token(forged, SECRET).tenant == other
        for path in (f"/api/instances/{world['acme']['simple']}",
                     f"/api/instances/{world['default']['simple']}", "/api/instances",
                     "/api/tasks", "/api/mailbox", "/api/templates"):
            r = call("GET", path, None, forged)
            assert r.status_code == 401, (other, path, r.status_code, r.text)
    # a default admin's token re-signed to name acme does not make them acme's admin
    forged = issue_token({**store.user("admin"), "tenant": "acme"}, SECRET)
    assert call("GET", "/api/instances", None, forged).status_code == 401
    assert call("POST", "/api/templates", only("x"), forged).status_code == 401


@pytest.mark.parametrize("short_path", [True, False], ids=["short-path", "routes"])
def test_quotas_answer_429_and_413_with_clear_messages(store, short_path):
    build_world(store)
    acme = store.of("acme")
    app = create_app(lambda: store)
    if not short_path:
        app.hot = None
    call = Client(store, app)
    zed, boss = call.token("acme", "zed"), call.token("acme", "boss")
    alice = call.token("default", "alice")
    running = acme.usage()["instances"]
    acme.set_quotas({"instances": running + 1, "templates": acme.usage()["templates"],
                     "variables_bytes": 64})
    first = call("POST", "/api/instances", {"template": "simple"}, zed,
                 headers={"Idempotency-Key": "k1"})
    assert first.status_code == 201
    r = call("POST", "/api/instances", {"template": "simple"}, zed)
    assert r.status_code == 429, r.text
    assert "quota" in r.json()["detail"] and "acme" in r.json()["detail"]
    assert acme.usage()["instances"] == running + 1
    # the same Idempotency-Key answers the first instance, quota or not
    again = call("POST", "/api/instances", {"template": "simple"}, zed,
                 headers={"Idempotency-Key": "k1"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    # finishing one makes room again
    assert call("POST", f"/api/instances/{first.json()['id']}/abort", {"reason": "x"}, zed
                ).status_code == 200
    assert call("POST", "/api/instances", {"template": "simple"}, zed).status_code == 201
    # default has no quota: its starts go on
    assert call("POST", "/api/instances", {"template": "simple"}, alice).status_code == 201
    # templates: a new version of a known name is fine, a new name is not
    r = call("POST", "/api/templates", {**simple("v2"), "description": "new"}, boss)
    assert r.status_code == 201, r.text
    r = call("POST", "/api/templates", only("new"), boss)
    assert r.status_code == 429 and "quota" in r.json()["detail"], r.text
    assert "only-new" not in acme.template_versions()
    assert call("POST", "/api/templates", only("new"), call.token("default", "admin")
                ).status_code == 201
    # variables (the circles' results, not the inputs): a start or a step storing more
    # than the quota is 413, and nothing is stored
    acme.set_quotas({"instances": None, "templates": None, "variables_bytes": 5})
    needs = {"name": "needs", "circles": [
        {"uri": "x"},  # done at the start: its result is a variable ({"x": null})
        {"uri": "a", "deps": [["x"]], "box": {"form": [{"name": "t", "type": "string"}]}}]}
    assert call("POST", "/api/templates", needs, boss).status_code == 201
    count = acme.list_instances(limit=500)[1]
    r = call("POST", "/api/instances", {"template": "needs"}, zed)
    assert r.status_code == 413, r.text
    assert "bytes" in r.json()["detail"] and "acme" in r.json()["detail"]
    assert acme.list_instances(limit=500)[1] == count
    acme.set_quotas({"variables_bytes": 64})
    r = call("POST", "/api/instances", {"template": "needs"}, zed)
    assert r.status_code == 201, r.text
    inst = r.json()
    mark = inst["circles"]["a"]["bookmark"]
    r = call("POST", f"/api/instances/{inst['id']}/circles/a/complete",
             {"bookmark": mark, "result": {"t": "y" * 200}}, zed)
    assert r.status_code == 413, r.text
    assert "bytes" in r.json()["detail"] and "acme" in r.json()["detail"]
    assert acme.get(inst["id"]).circles["a"].state == "waiting"
    r = call("POST", f"/api/instances/{inst['id']}/circles/a/complete",
             {"bookmark": mark, "result": {"t": "y"}}, zed)
    assert r.status_code == 200, r.text
    # default's quotas are its own
    assert call("POST", "/api/instances", {"template": "simple"}, alice).status_code == 201


def test_guest_messages_reach_their_tenants_admins_only(store):
    build_world(store)
    store.of("acme").add_user("boss2", "pw-boss2", ["admin"])
    call = Client(store, create_app(lambda: store))
    note = {"name": "Visitor", "subject": "for acme", "body": "hello acme"}
    r = call("POST", "/api/guest/acme/messages", note, client="10.1.1.1")
    assert r.status_code == 201, r.text
    sent = r.json()["id"]
    for who in ("boss", "boss2"):
        r = call("GET", "/api/mailbox?kind=guest", None, call.token("acme", who))
        assert sent in ids_in(r), who
    for who in ("admin", "alice"):
        r = call("GET", "/api/mailbox?kind=guest", None, call.token("default", who))
        assert sent not in ids_in(r), who
    for who in ("zed", "zoe", "zach"):  # not the acme admins' colleagues either
        r = call("GET", "/api/mailbox?kind=guest", None, call.token("acme", who))
        assert sent not in ids_in(r), who
    r = call("POST", "/api/guest/messages", {**note, "subject": "for default"},
             client="10.1.1.1")
    assert r.status_code == 201
    mine = call("GET", "/api/mailbox?kind=guest", None, call.token("default", "admin"))
    assert r.json()["id"] in ids_in(mine)
    assert r.json()["id"] not in ids_in(
        call("GET", "/api/mailbox?kind=guest", None, call.token("acme", "boss")))
    for unknown in ("nowhere", "Acme", "acme-", "a" * 64):
        r = call("POST", f"/api/guest/{unknown}/messages", note, client="10.1.1.1")
        assert r.status_code == 404 if unknown == "nowhere" else r.status_code in (404, 422)
        assert "Traceback" not in r.text
    assert call("POST", "/api/guest/nowhere/messages", note).status_code == 404
    # the rate limit counts per tenant and client: 5 per window
    from bpflow.mailbox import GUEST_RATE
    limit = GUEST_RATE[0]
    for _ in range(limit - 1):  # one each was sent above
        assert call("POST", "/api/guest/acme/messages", note, client="10.1.1.1"
                    ).status_code == 201
    r = call("POST", "/api/guest/acme/messages", note, client="10.1.1.1")
    assert r.status_code == 429, r.text
    assert "try again" in r.json()["detail"]
    # the same client may still write to default (its own count there), another client
    # to acme
    assert call("POST", "/api/guest/messages", note, client="10.1.1.1").status_code == 201
    assert call("POST", "/api/guest/default/messages", note, client="10.1.1.1"
                ).status_code == 201
    assert call("POST", "/api/guest/acme/messages", note, client="10.1.1.2"
                ).status_code == 201


def test_a_decision_past_the_variables_quota_stores_nothing(store):
    """An approval whose decision would store more variables than the tenant allows: 413,
    and the mail stays undecided (not decided with the instance unmoved, which left the
    approval stuck: every retry 409 'already approved')."""
    acme = store.of(store.add_tenant("acme"))
    acme.add_user("zed", "pw-zed", ["user"])
    acme.add_user("zoe", "pw-zoe", ["approver"])
    acme.put_template({"name": "ask", "circles": [
        {"uri": "ok", "box": {"action": {"type": "approval", "to": "zoe", "subject": "s"}}},
        {"uri": "end", "deps": [["ok"]]}]})
    inst = acme.start("ask", {}, acme.user("zed"))
    Worker(store).run_once()
    acme.set_quotas({"variables_bytes": 150})
    call = Client(store, create_app(lambda: store))
    zoe = call.token("acme", "zoe")
    [mail] = call("GET", "/api/mailbox?kind=approval", None, zoe).json()
    r = call("POST", f"/api/mailbox/{mail['id']}/decision",
             {"decision": "approved", "comment": "c" * 300}, zoe)
    assert r.status_code == 413, r.text
    assert "acme" in r.json()["detail"]
    [again] = call("GET", "/api/mailbox?kind=approval", None, zoe).json()
    assert again["decision"] is None and again["comment"] in (None, "")
    assert acme.get(inst.id).circles["ok"].state == "waiting"
    Worker(store).run_once()  # the worker's look at decided mail changes nothing either
    r = call("POST", f"/api/mailbox/{mail['id']}/decision",
             {"decision": "approved", "comment": "ok"}, zoe)
    assert r.status_code == 200, r.text
    assert r.json()["decision"] == "approved" and r.json()["signature_ok"]
    assert acme.get(inst.id).circles["ok"].state == "success"


def test_the_instances_quota_never_refuses_a_sign_in(store):
    """The app's frame (`signin`) is not a business flow: a tenant at its running-instances
    quota still lets a user sign in for the first time (it was refused: QuotaExceeded)."""
    from bpflow.errors import QuotaExceeded
    from bpflow.interactions import Interactions
    from bpflow.tenancy import create_tenant
    acme = create_tenant(store, "acme", "boss", "pw-boss")
    acme.add_user("zoe", "pw-zoe", ["user"])
    acme.put_template(simple("s"))
    acme.set_quotas({"instances": 1})
    acme.start("simple", {}, acme.user("boss"))
    assert Interactions(store).sign_in("zoe", "pw-zoe", "10.0.0.1").status == "completed"
    with pytest.raises(QuotaExceeded):
        acme.start("simple", {}, acme.user("zoe"))
    assert acme.usage()["instances"] == 1
