"""Bulk operations (SPEC §18): an admin retries, aborts, suspends, resumes or migrates
many instances at once, chosen by id or by a filter ("all that match").

Asking for one (`start`) records it with one pending item per instance it matched
(`Store.add_operation`) and in the audit log; the worker applies it (`Runner`, one of its
duties): it leases the operation, takes a chunk of pending items, moves each instance
through the move's own service (`bpflow.moves.flow`, the store's migration) and writes
the chunk's results with the operation's counts in one transaction. A worker or server
stopped midway leaves the lease to run out; the next worker goes on from the items still
pending. A move is never applied twice: its step also records `MARKER` with the
operation's id in the instance's history, and checks for it first (a chunk whose results
were lost with a crashed worker finds its moves done); a migration is done when the
instance is at the target version already.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bpflow import audit
from bpflow.access import Caller, require_admin
from bpflow.errors import NotFound, Refused
from bpflow.moves import flow
from bpflow.moves.steps import Op
from bpflow.store import Store
from bpflow.store.public import COUNT_MAX, DONE, FOLD_MAX, FOLD_PRESSED, REFUSED
from engine.errors import BpflowError
from engine.instance import Instance
from engine.messages import N_
from engine.runtime import Engine

if TYPE_CHECKING:
    from bpflow.worker import Worker

log = logging.getLogger("bpflow.operations")

ACTIONS = ("retry", "abort", "suspend", "resume", "migrate")
MARKER = "operation_applied"  # the history event a bulk move leaves in its step
CHUNK = 50  # items applied between two writes of their results
IDS_MAX = 10_000  # instances one request names by id
__all__ = ["ACTIONS", "COUNT_MAX", "IDS_MAX", "Runner", "durations", "incidents", "instances",
           "overdue", "progress", "start"]


Result = tuple[str, str, "str | None"]  # (instance id, done or refused, the reason)


class AlreadyApplied(Exception):
    """The move of this operation is in the instance's history already (stops the step)."""


def start(store: Store, caller: Caller, action: str, filter: dict[str, Any] | None = None,
          instances: list[str] | None = None, params: dict[str, Any] | None = None
          ) -> dict[str, Any]:
    """Record the bulk operation `action` on the instances of `instances` or matching
    `filter` (admins of the tenant only); the worker applies it. → {"operation",
    "matched"}. For `migrate`, `params` name "template", "from", "to", "map" and
    "dry_run" (checked now, as the migration would)."""
    require_admin(caller)
    if action not in ACTIONS:
        raise Refused(N_("unknown action '%(action)s' (expected %(actions)s)", action=action,
                         actions=", ".join(ACTIONS)))
    if (filter is None) == (instances is None):
        raise Refused(N_("give either a filter or a list of instances"))
    if instances is not None and len(instances) > IDS_MAX:
        raise Refused(N_("at most %(n)s instances per request", n=IDS_MAX))
    params = dict(params or {})
    f = {k: v for k, v in (filter or {}).items() if v is not None}
    if action == "migrate":
        missing = [k for k in ("template", "from", "to") if params.get(k) is None]
        if missing:
            raise Refused(N_("a migration needs %(keys)s", keys=", ".join(missing)))
        store.migrate_instances(params["template"], params["from"], params["to"],
                                params.get("map"), [], True)  # the versions and the map
        f.update(template=params["template"], version=params["from"])
    op_id = uuid.uuid4().hex
    shown = ({k: v.isoformat() if isinstance(v, datetime) else v for k, v in f.items()}
             if filter is not None or action == "migrate" else None)  # as JSON keeps it
    matched = store.add_operation(op_id, action, params, f, shown,
                                  None if instances is None else list(dict.fromkeys(instances)),
                                  caller.id, caller.username)
    audit.record(store, caller, "operation_started", op_id, None,
                 {"action": action, "params": params, "filter": shown,
                  "instances": None if instances is None else len(instances),
                  "matched": matched})
    return {"operation": op_id, "matched": matched}


def progress(store: Store, caller: Caller, op_id: str, after: str | None = None,
             limit: int = 100, state: str | None = None) -> dict[str, Any]:
    """The operation (admins of its tenant only; another's is not found): its counts
    and a page of its per-instance results in instance id order after `after`."""
    require_admin(caller)
    op = store.operation(op_id)
    items = store.operation_items(op_id, state, after, limit)
    return {
        "operation": op["id"], "action": op["action"], "params": op["params"],
        "filter": op["filter"], "created_by": op["created_by"], "created_at": op["created_at"],
        "matched": op["matched"], "done": op["done"], "refused": op["refused"],
        "pending": op["matched"] - op["done"] - op["refused"],
        "finished": op["finished_at"] is not None, "finished_at": op["finished_at"],
        "items": [{"instance": i["instance_id"], "state": i["state"],
                   "reason": i["reason"], "at": i["at"]} for i in items],
        "next": items[-1]["instance_id"] if items else after,
    }


# ------------------------------------------------------------------- the page's
def instances(store: Store, caller: Caller, f: dict[str, Any], limit: int = 50,
              offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The tenant's instances matching `f` (admins only), newest first, and their number
    (up to COUNT_MAX + 1)."""
    require_admin(caller)
    return store.operation_instances({k: v for k, v in f.items() if v is not None},
                                     limit, offset)


def incidents(store: Store, caller: Caller, shown: int = 20) -> list[dict[str, Any]]:
    """Failed circles grouped by template, circle and reason (admins only)."""
    require_admin(caller)
    return store.incidents(shown=shown)


def overdue(store: Store, caller: Caller, limit: int = 50, offset: int = 0
            ) -> tuple[list[dict[str, Any]], int]:
    """Open tasks past their due time (admins only)."""
    require_admin(caller)
    return store.overdue_tasks(limit, offset)


def durations(store: Store, caller: Caller, name: str, version: int | None = None,
              since: datetime | None = None) -> dict[str, Any]:
    """Where `name`'s instances wait (admins only; NotFound for an unknown template or
    version)."""
    require_admin(caller)
    versions = store.template_versions().get(name)
    if not versions or (version is not None and version not in versions):
        raise NotFound(N_("no template '%(name)s'", name=name))
    return store.durations(name, version, since)


# ----------------------------------------------------------------- the worker's
def fold_waits(worker: Worker) -> int:
    """The worker's duty folding new history into the durations (`Store.fold_waits`): a
    short fold while instances keep falling due (it holds the write lock while it runs),
    the backlog caught up when they do not."""
    return worker.store.fold_waits(FOLD_PRESSED if worker.pressed else FOLD_MAX)


class Runner:
    """The worker's duty: one chunk of one leased operation a round (held for the
    worker's lease seconds, as its instances are); how many items it settled (0:
    nothing to do)."""

    __name__ = "operations"

    def __call__(self, worker: Worker) -> int:
        everyone = worker.store
        op = everyone.claim_operation(worker.name, worker.lease)
        if op is None:
            return 0
        store = everyone.of(op["tenant"])
        ids = store.pending_items(op["id"], CHUNK)
        by = store.user(op["created_by"])
        caller = Caller.of(by) if by is not None else None
        results: list[Result]
        if caller is None or caller.id != op["created_by_id"] or not caller.is_admin:
            results = [(iid, REFUSED, str(N_("the admin who asked for it may not do this any"
                                             " more"))) for iid in ids]
        elif op["action"] == "migrate":
            results = _migrate(store, op, ids)
        else:
            results = [_apply(store, caller, op, iid) for iid in ids]
        if not store.settle_items(op["id"], worker.name, worker.lease, results):
            log.warning("operation %s: lease lost, leaving it to its new holder", op["id"])
            return len(ids)
        if store.finish_operation(op["id"], worker.name):
            done = store.operation(op["id"])
            audit.record(store, caller if caller is not None else None,
                         "operation_finished", op["id"], None,
                         {"action": op["action"], "matched": done["matched"],
                          "done": done["done"], "refused": done["refused"]})
        return max(len(ids), 1)


def _apply(store: Store, caller: Caller, op: dict[str, Any], iid: str) -> Result:
    """One instance's move, through its service, checked and marked in its step."""
    params, op_id = op["params"], op["id"]
    within = _marked(store, caller, op_id)
    try:
        if op["action"] == "retry":
            flow.retry(store, caller, iid, params.get("circle"), within=within)
        else:
            flow.control(store, caller, iid, op["action"], params.get("reason"),
                         within=within)
    except AlreadyApplied:
        pass
    except BpflowError as exc:
        return iid, REFUSED, str(exc)
    return iid, DONE, None


def _marked(store: Store, caller: Caller, op_id: str) -> Callable[[Op], Op]:
    def within(move: Op) -> Op:
        def op(engine: Engine, inst: Instance) -> None:
            if store.applied(inst.id, MARKER, op_id):
                raise AlreadyApplied(inst.id)
            move(engine, inst)
            engine.record(inst, MARKER, None, {"operation": op_id}, caller.username)
        return op
    return within


def _migrate(store: Store, op: dict[str, Any], ids: list[str]) -> list[Result]:
    """A chunk moved by the migration (`Store.migrate_instances`, a dry run when asked):
    an instance at the target version already was moved (by this operation before a
    restart, or otherwise)."""
    p = op["params"]
    rows = {r["id"]: r for r in store.instance_rows(ids)}
    there = [iid for iid in ids if rows.get(iid, {}).get("version") == p["to"]]
    rest = [iid for iid in ids if iid not in there and iid in rows]
    results: list[Result] = [(iid, DONE, None) for iid in there]
    results += [(iid, REFUSED, str(N_("no instance '%(id)s'", id=iid)))
                for iid in ids if iid not in rows]
    if rest:
        try:
            outcome = store.migrate_instances(p["template"], p["from"], p["to"], p.get("map"),
                                              rest, bool(p.get("dry_run")),
                                              op["created_by"])
        except BpflowError as exc:
            return results + [(iid, REFUSED, str(exc)) for iid in rest]
        results += [(iid, DONE, None) for iid in outcome["migrated"]]
        results += [(r["id"], REFUSED, "; ".join(map(str, r["reasons"])))
                    for r in outcome["refused"]]
    return results

