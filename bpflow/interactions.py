"""What happens when a person answers a box: submits a form, accepts or declines a
confirmation, signs in through the outer flow's `auth` circle.

Form layer → action layer → circle: a submitted form is validated; a form alone becomes
the circle's result; an `auth` action checks the credentials at once; any other action
gets the typed values staged on the circle (`${form.x}`) and runs on the worker
(`bpflow.actions`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from bpflow import auth, files
from bpflow.access import Caller, answering, drivable
from bpflow.errors import RateLimited
from bpflow.forms import FormError, validate
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.store.public import FRAME_TEMPLATE
from engine.errors import TransitionError, VariableError
from engine.instance import COMPLETED, FAILED, RUNNING, SUSPENDED, Instance
from engine.messages import N_
from engine.phase import action_started, approval
from engine.runtime import Engine

SIGNIN_TEMPLATE = FRAME_TEMPLATE  # the outer flow (not counted in a tenant's quota)
# The outer flows a sign-in continues: its `main` circle is the signed-in session, a marker
# that succeeds with `auth`, so the user's outer flow is usually completed. Only a
# terminated one is over (the next sign-in starts another).
OUTER_STATUSES = (RUNNING, FAILED, SUSPENDED, COMPLETED)


def take(engine: Engine, inst: Instance, cid: str, caller: Caller) -> None:
    """Whoever completes or fails a person's circle must be allowed to (`access.drivable`,
    on the state the step sees); a candidate doing so takes a task nobody holds."""
    drivable(caller, inst, cid)
    task = inst.circles[cid].task
    if task is not None and task["assignee"] is None:
        engine.claim(inst, cid, caller.username, caller.username)


def confirmed(engine: Engine, inst: Instance, cid: str,
              values: Callable[[], dict[str, Any]], actor: str | None) -> None:
    """The assignee sends a task whose delegate answered: recorded as their answer
    confirmed, or answered differently (委派, SPEC §15)."""
    task = inst.circles[cid].task
    delegate = (task or {}).get("delegate")
    if delegate and delegate.get("answer") is not None:
        engine.record(inst, "task_confirmed", cid,
                      {"delegate": delegate["to"],
                       "confirmed": delegate["answer"] == values()}, actor)


class Interactions:
    """The person-facing side of the boxes, on top of the store."""

    def __init__(self, store: Store):
        self.store = store
        self.mailbox = Mailbox(store)

    def accounts(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """A `user` field's check: the enabled account of that name (as stored, roles)."""
        user = self.store.user(name)
        return None if user is None else (user["username"], tuple(user["roles"]))

    def defaults(self, inst: Instance, cid: str) -> dict[str, Any]:
        """The form's defaults with `${...}` substituted (a missing value is left out);
        for a form sent back to its people (SPEC §15), the answers it held."""
        out = {}
        task = inst.circles[cid].task or {}
        answer = (task.get("returned") or {}).get("answer") or {}
        for field in inst.template.plan.nodes[cid].circle.box.form:
            if field.name in answer and field.type not in ("password", "file"):
                out[field.name] = answer[field.name]
            elif field.default is not None:
                try:
                    out[field.name] = self.store.engine.render(inst, cid, field.default)
                except VariableError:
                    pass
        return out

    def submit(self, instance_id: str, cid: str, bookmark: str, data: dict[str, Any],
               actor: str | None = None, client: str | None = None,
               caller: Caller | None = None) -> Instance:
        """A person submitted the form of a ready circle (or its confirmation); `client`
        (their address) counts an `auth` circle's failures against the sign-in limit;
        `caller`, when given, must be allowed to (checked on the state the step sees)."""
        if self.signs_in(self.store.peek(instance_id), cid):
            return self._sign_in_step(instance_id, cid, bookmark, data, actor, client)
        return self.store.apply(instance_id, self.step(cid, bookmark, data, actor, caller))

    async def submit_async(self, instance_id: str, cid: str, bookmark: str,
                           data: dict[str, Any], actor: str | None = None,
                           client: str | None = None,
                           caller: Caller | None = None) -> Instance:
        """`submit` for an event loop (the REST API)."""
        if self.signs_in(await self.store.peek_async(instance_id), cid):
            return await asyncio.to_thread(self._sign_in_step, instance_id, cid, bookmark,
                                           data, actor, client)
        return await self.store.apply_async(instance_id,
                                            self.step(cid, bookmark, data, actor, caller))

    @staticmethod
    def signs_in(inst: Instance, cid: str) -> bool:
        node = inst.template.plan.nodes.get(cid)
        return node is not None and node.circle.box.action_type == "auth"

    def step(self, cid: str, bookmark: str, data: dict[str, Any], actor: str | None,
             caller: Caller | None = None) -> Callable[[Engine, Instance], Instance]:
        """The store operation of a submission (not an `auth` one): decided on the
        instance's current state, inside the step that stores it. With `caller`, they
        must be allowed to act on the circle; a candidate claims a task nobody holds."""
        def op(engine: Engine, inst: Instance) -> Instance:
            node = inst.template.plan.nodes.get(cid)
            if node is None:
                raise TransitionError(N_("instance has no circle '%(uri)s'", uri=cid),
                                      instance=inst.id,
                                      circle=cid)
            box = node.circle.box
            engine.check_bookmark(inst, cid, bookmark)  # 409 before any 422
            if caller is not None and answering(caller, inst, cid):
                engine.answer(inst, cid, self._answer(inst, cid, data), caller.username)
                return inst
            if caller is not None:
                take(engine, inst, cid, caller)
            confirmed(engine, inst, cid, lambda: self._answer(inst, cid, data), actor)
            if box.confirm is not None:
                if data.get("accept"):
                    engine.complete(inst, cid, bookmark, {"accepted": True}, actor)
                else:
                    reason = str(data.get("reason") or "")
                    engine.fail(inst, cid, bookmark,
                                f"declined{': ' + reason if reason else ''}", actor)
                return inst
            if box.action_type is not None and action_started(inst.circles[cid]):
                # decided here, on the stored state: two submissions of the same form
                # never both reach its action
                raise TransitionError(N_("the form of circle '%(uri)s' was already sent; its"
                                         " action runs", uri=cid), instance=inst.id,
                                      circle=cid)
            values, _ = validate(box.form, data, self.defaults(inst, cid), self.accounts,
                                 files.holder(self.store, inst.id, cid, actor or ""))
            if box.action_type is None:
                engine.complete(inst, cid, bookmark, values, actor)
            else:  # the action runs on the worker with the typed values
                engine.mark_pending(inst, cid, bookmark, {"form": values}, actor)
            return inst
        return op

    def _answer(self, inst: Instance, cid: str, data: dict[str, Any]) -> dict[str, Any]:
        """What a person sends to a form or confirmation, as a delegate's answer keeps
        it: the form's values (validated: 422 as for its assignee), or the acceptance."""
        box = inst.template.plan.nodes[cid].circle.box
        if box.confirm is not None:
            return {"accept": bool(data.get("accept")), "reason": str(data.get("reason") or "")}
        return validate(box.form, data, self.defaults(inst, cid), self.accounts)[0]

    def _sign_in_step(self, instance_id: str, cid: str, bookmark: str, data: dict[str, Any],
                      actor: str | None, client: str | None = None) -> Instance:
        """The `auth` action checks the credentials at once (outside the store step: a
        password check is slow, and a failure is recorded)."""
        inst = self.store.get(instance_id)
        box = inst.template.plan.nodes[cid].circle.box
        self.store.engine.check_bookmark(inst, cid, bookmark)
        values, secrets = validate(box.form, data, self.defaults(inst, cid))
        result = self._authenticate(inst, cid, values.get("username", ""),
                                    secrets.get("password", ""), client)
        return self.store.complete(instance_id, cid, bookmark, result, actor)

    def _authenticate(self, inst: Instance, cid: str, username: str, password: str,
                      client: str | None = None) -> dict[str, Any]:
        """The auth action: the owner's credentials, a limited number of tries."""
        wait = auth.sign_in_allowed(username, client)
        if wait:
            raise FormError({"password": N_("too many failed attempts; try again in %(n)s"
                                            " seconds", n=wait)})
        user = self.store.authenticate(username, password)
        owner = inst.user.get("username")
        if user is None or (owner and user["username"] != owner):
            auth.sign_in_failed(username, client)
            self.store.apply(inst.id, lambda e, i: e.record(
                i, "auth_failed", cid, {"username": username}, actor=owner))
            raise FormError({"password": N_("wrong username or password")})
        auth.sign_in_succeeded(username, client)
        return {"username": user["username"], "roles": user["roles"]}

    def confirm(self, instance_id: str, cid: str, bookmark: str, accept: bool,
                reason: str = "", actor: str | None = None) -> Instance:
        """A person accepted or declined a ready circle's confirmation (`step` decides,
        as for the REST API); a circle that asks for none is refused."""
        decide = self.step(cid, bookmark, {"accept": accept, "reason": reason}, actor)

        def op(engine: Engine, inst: Instance) -> Instance:
            node = inst.template.plan.nodes.get(cid)
            if node is not None and node.circle.box.confirm is None:
                raise TransitionError(N_("circle '%(uri)s' asks for no confirmation", uri=cid),
                                      instance=inst.id, circle=cid)
            return decide(engine, inst)
        return self.store.apply(instance_id, op)

    def sign_in(self, username: str, password: str,
                client: str | None = None) -> Instance | None:
        """The outer flow: the user's `signin` instance continues where it was (signing
        in again restarts nothing); the first sign-in starts one and completes its `auth`
        circle with the credentials, after which its `main` circle is the session itself:
        no business flow starts (people start those from My flows). None for wrong
        credentials; RateLimited while the username is over the sign-in limit from this
        `client` (the person's address), right password or not."""
        wait = auth.sign_in_allowed(username, client)
        if wait:
            raise RateLimited(N_("too many failed sign-ins; try again in %(n)s seconds", n=wait),
                              wait)
        user = self.store.authenticate(username, password)
        if user is None:
            auth.sign_in_failed(username, client)
            return None
        auth.sign_in_succeeded(username, client)
        if user["tenant"] != self.store.tenant:  # their frame is their tenant's
            return Interactions(self.store.of(user["tenant"]))._enter(user, password, client)
        return self._enter(user, password, client)

    def _enter(self, user: dict[str, Any], password: str, client: str | None) -> Instance:
        username = user["username"]  # as stored (normalised)
        existing = self.store.latest_instance(SIGNIN_TEMPLATE, user["id"], OUTER_STATUSES)
        if existing is not None:
            def again(e: Engine, i: Instance) -> Instance:
                e.record(i, "signed_in_again", data={"username": username}, actor=username)
                return i
            return self.store.apply(existing, again)
        inst = self.store.start(SIGNIN_TEMPLATE, {}, user, quota=False)  # the app's frame
        return self.submit(inst.id, "auth", self.store.engine.bookmark(inst, "auth"),
                           {"username": username, "password": password}, username, client)

    def reenter(self, instance_id: str, inst: Instance | None = None) -> Instance:
        """Re-entering a flow checks its decided approval mail (the seed's re-entry);
        `inst` is the copy the caller has just read (read again only if it asks anyone)."""
        if inst is None:
            inst = self.store.get(instance_id)
        asking = [cid for cid, run in inst.circles.items() if approval(run) is not None]
        for cid in asking:
            self.mailbox.settle(instance_id, cid)
        return self.store.get(instance_id) if asking else inst


