"""The actions the worker runs (http, mail, approval), each a handler from an
`ActionContext` (the rendered action and whom it acts for) to an `Outcome`.

A handler never raises for a failure of the outside world: that is an Outcome with a
readable reason, which fails the circle subject to its retries. An HTTP call carries an
idempotency key for its attempt, so a receiver can de-duplicate a repeated call.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from bpflow import egress, rounds, tracing
from bpflow.access import may_approve
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from engine.instance import Instance
from engine.messages import N_
from engine.runtime import Engine


@dataclass(frozen=True)
class Outcome:
    ok: bool | None  # None: the action started and now waits for the outside world
    result: Any = None
    reason: str = ""
    pending: dict[str, Any] | None = None


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every HTTP action, made once per process: making them (reading
    the trusted certificates) took 170 ms of CPU, more than the rest of a local call."""
    return httpx.create_ssl_context()


def run_http(action: dict[str, Any], idempotency_key: str) -> Outcome:
    method = str(action.get("method", "GET")).upper()
    refused = egress.refusal(str(action.get("url", "")))
    if refused:  # checked at every call: what a name resolves to may change
        return Outcome(False, reason=N_("%(method)s %(url)s refused: %(reason)s", method=method,
                                        url=action.get("url"), reason=refused))
    headers = {str(k): str(v) for k, v in (action.get("headers") or {}).items()}
    headers.setdefault("Idempotency-Key", idempotency_key)
    headers.update(tracing.traceparent())  # the action's span (SPEC §18), when traced
    kwargs: dict[str, Any] = {"headers": headers}
    if "json" in action:
        kwargs["json"] = action["json"]
    elif "body" in action:
        kwargs["content"] = str(action["body"])
    try:
        with httpx.Client(timeout=float(action.get("timeout", 10)), verify=_tls()) as client:
            response = client.request(method, str(action["url"]), **kwargs)
    except httpx.TimeoutException:
        return Outcome(False, reason=N_("%(method)s %(url)s timed out after %(seconds)s s",
                                        method=method, url=action["url"],
                                        seconds=action.get("timeout", 10)))
    except httpx.HTTPError as exc:
        return Outcome(False, reason=f"{method} {action['url']} failed: {exc}"
                                     f" ({type(exc).__name__})")
    try:
        result: Any = response.json() if response.content else None
    except ValueError:
        result = response.text
    return answered(method, str(action["url"]), response.status_code, result, response.text)


def answered(method: str, url: str, status: int, result: Any, text: str) -> Outcome:
    """What an HTTP action's answer means: a 2xx is the circle's result (the JSON body,
    else its text), anything else a failure saying so (an answer received, and one a
    designer gives a sandbox, SPEC §16)."""
    if 200 <= status < 300:
        return Outcome(True, result=result)
    snippet = text[:200]
    return Outcome(False, reason=f"{method} {url} answered HTTP {status}"
                                 + (f": {snippet}" if snippet else ""))


@dataclass(frozen=True)
class ActionContext:
    """What an action handler gets: the rendered action and whom it acts for."""

    store: Store
    instance_id: str
    circle: str
    epoch: int
    action: dict[str, Any]
    key: str  # idempotency key of this attempt
    user: dict[str, Any]  # the instance's user, on whose behalf the action runs
    shown: dict[str, Any]  # results of the circle's direct dependencies


def _recipients(to: Any) -> list[str]:
    names = [to] if isinstance(to, str) else list(to or [])
    return [str(n).strip() for n in names if str(n).strip()]


def http_unit(ctx: ActionContext) -> Outcome:
    return run_http(ctx.action, ctx.key)


def mail_unit(ctx: ActionContext) -> Outcome:
    to = _recipients(ctx.action.get("to"))
    ids = Mailbox(ctx.store).send("message", ctx.user, to, ctx.action.get("subject", ""),
                                  ctx.action.get("body", ""), instance=ctx.instance_id,
                                  circle=ctx.circle, epoch=ctx.epoch)
    return Outcome(True, result={"sent_to": to, "mails": ids})


def approval_unit(ctx: ActionContext) -> Outcome:
    """Ask the approvers (SPEC §15): every mail signed over the list and the quorum;
    under "sequence" only the first is asked now (the mailbox asks the next after each
    approval)."""
    to = list(dict.fromkeys(_recipients(ctx.action.get("to"))))
    quorum = ctx.action.get("quorum", "all")
    problem = rounds.quorum_problem(quorum, len(to))
    if problem:
        return Outcome(False, reason=problem)
    if ctx.user.get("username") in to:
        return Outcome(False, reason=N_("%(user)s cannot approve their own request",
                                        user=ctx.user["username"]))
    for name in to:
        person = ctx.store.user(name)
        if person is None:
            return Outcome(False, reason=N_("no user named %(name)s", name=name))
        if not may_approve(person["roles"]):
            return Outcome(False, reason=N_("%(name)s is not an approver", name=name))
    shown = ctx.action.get("data", ctx.shown)
    seats = rounds.seats_of(to)
    ids = Mailbox(ctx.store).send(
        "approval", ctx.user, rounds.asked(quorum, seats, {}),
        ctx.action.get("subject") or f"Approve {ctx.circle}", ctx.action.get("body", ""),
        instance=ctx.instance_id, circle=ctx.circle, epoch=ctx.epoch,
        payload_extra={"data": shown, **rounds.terms(quorum, seats)})
    return Outcome(None, pending={"approval": {"approvers": to, "quorum": quorum,
                                               "mails": ids}})


HANDLERS = {"http": http_unit, "mail": mail_unit, "approval": approval_unit}


def shown_data(engine: Engine, inst: Instance, cid: str) -> dict[str, Any]:
    """What an approver sees by default: the results of the circle's direct deps."""
    node = inst.template.plan.nodes[cid]
    out = {}
    for group in node.deps:
        for dep in group:
            run = inst.circles[dep]
            if run.state == "success":
                out[dep.rsplit(".", 1)[-1]] = run.result
    return out
