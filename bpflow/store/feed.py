"""The event feed (read from the history), webhooks and their deliveries (SPEC §11).

The feed is a projection of the history table `events`, which every step writes in its
own transaction: nothing committed is missing from it, nothing rolled back is in it.
A cursor names a position in the history:

- SQLite (one writer at a time, so ids are in commit order): the event id, `"42"`;
- PostgreSQL: the writing transaction's id and the event id, `"7713.42"`. A page holds
  only rows of transactions older than the oldest one still running
  (`pg_snapshot_xmin`), so a transaction that commits late is read later, never skipped.

A page scans history rows after the cursor and keeps those of the feed's kinds (`KINDS`);
its `next` is the cursor of the last row scanned, so rows not in the feed are passed over
once.

A webhook's `cursor` is how far the feed has been handed to its deliveries. The worker
(`bpflow.webhooks`) hands out a window and advances the cursor in one transaction, with
the webhook's row locked (and the cursor compared), so two workers never hand out the
same window; then it posts the pending deliveries and records the answers in batches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, get_args

from sqlalchemy import func, insert, select, text, tuple_, update

from bpflow.store.errors import BadCursor, Conflict, NotFound
from bpflow.store.parts import StoreParts
from bpflow.store.tables import deliveries_t, events_t, instances_t, webhooks_t
from engine.instance import iso
from engine.messages import N_

# the feed's event types (SPEC §11): the API's schemas name them from here
FeedType = Literal["instance.started", "instance.completed", "instance.failed",
                   "instance.terminated", "instance.suspended", "instance.resumed",
                   "instance.migrated", "circle.entered", "circle.left", "circle.reset",
                   "approval.signers_added", "approval.signers_removed",
                   "approval.transferred", "approval.delegated", "task.transferred",
                   "task.delegated", "comment.added",
                   "cc.sent", "urge.sent", "task.returned"]
TYPES: tuple[str, ...] = get_args(FeedType)
# history kind -> feed type: an instance's event of the same name, and a circle's
KINDS: dict[str, str] = {
    **{t.replace(".", "_"): t for t in TYPES if t.startswith("instance.")},
    "circle_ready": "circle.entered",
    "circle_succeeded": "circle.left",
    "circle_failed": "circle.left",
    "circle_skipped": "circle.left",
    "circle_reset": "circle.reset",
    **{t.replace(".", "_"): t for t in TYPES if t.startswith(("approval.", "task."))},
    "comment": "comment.added",  # a comment on an instance (SPEC §15): data {"text"}
    "cc_sent": "cc.sent",  # SPEC §15: copies and urges (a circle's, or an ad hoc copy's none)
    "urge_sent": "urge.sent",
    "circle_returned": "task.returned",  # SPEC §15: work sent back to an earlier step
}
MAX_WEBHOOKS = 20  # per tenant
MAX_SCAN = 10  # a page scans at most this many times its limit of history rows
PG_XMIN = text("pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
_COLUMNS = (events_t.c.id, events_t.c.tx, events_t.c.kind, events_t.c.instance_id,
            events_t.c.actor,
            events_t.c.circle, events_t.c.at, events_t.c.after, events_t.c.data,
            instances_t.c.template)


@dataclass(frozen=True, order=True)
class Position:
    """A place in the history: (transaction id, event id); tx is 0 on SQLite."""

    tx: int
    id: int

    def text(self, postgres: bool) -> str:
        return f"{self.tx}.{self.id}" if postgres else str(self.id)


START = Position(0, 0)


def position(cursor: str | None, postgres: bool) -> Position:
    """The position a cursor names (None or "" for the start); BadCursor otherwise."""
    if not cursor:
        return START
    parts = cursor.split(".")
    if len(parts) != (2 if postgres else 1) or not all(
            p.isascii() and p.isdigit() and len(p) <= 19 for p in parts):
        raise BadCursor(N_("not a cursor of this feed: %(cursor)s", cursor=repr(cursor[:40])))
    numbers = [int(p) for p in parts]
    if any(n >= 2 ** 63 for n in numbers):
        raise BadCursor(N_("not a cursor of this feed: %(cursor)s", cursor=repr(cursor[:40])))
    return Position(*numbers) if postgres else Position(0, numbers[0])


def item(row: Any, postgres: bool) -> dict[str, Any]:
    """A history row as the feed shows it."""
    kind, after, data = row.kind, row.after or {}, dict(row.data or {})
    if kind.startswith("instance_"):
        if "status" in after:
            data = {"status": after["status"], **data}
    elif KINDS[kind] == "circle.left":
        data = {"state": after.get("state"), "result": after.get("result"),
                "reason": after.get("reason"), **data}
    elif kind == "comment":
        data = {"author": row.actor, **data}
    return {"id": row.id, "cursor": Position(row.tx or 0, row.id).text(postgres),
            "type": KINDS[kind], "instance": row.instance_id, "template": row.template,
            "uri": None if kind.startswith("instance_") else row.circle, "at": iso(row.at),
            "data": data}


class Feed(StoreParts):
    """The event feed, webhooks and deliveries (part of `Store`)."""

    # ----------------------------------------------------------------- the feed
    def _scan(self, conn, tenant: str | None, after: Position, limit: int) -> list[Any]:
        """Up to `limit` history rows of `tenant` after `after`, in feed order."""
        q = select(*_COLUMNS).join(instances_t, instances_t.c.id == events_t.c.instance_id).where(
            instances_t.c.sandbox.is_(False))  # a draft tried in the designer: not fed
        if tenant is not None:
            q = q.where(events_t.c.tenant == tenant)
        if self.postgres:
            q = q.where(tuple_(events_t.c.tx, events_t.c.id) > tuple_(after.tx, after.id),
                        events_t.c.tx < PG_XMIN).order_by(events_t.c.tx, events_t.c.id)
        else:
            q = q.where(events_t.c.tx.is_(None), events_t.c.id > after.id).order_by(
                events_t.c.id)
        return list(conn.execute(q.limit(limit)))

    def _page(self, conn, tenant: str | None, after: Position, limit: int,
              types: Iterable[str] | None = None) -> tuple[list[dict[str, Any]], Position]:
        kinds = {k for k, t in KINDS.items() if types is None or t in types}
        items, last = [], after
        for _ in range(MAX_SCAN):
            rows = self._scan(conn, tenant, last, limit)
            for row in rows:
                last = Position(row.tx or 0, row.id)
                if row.kind in kinds:
                    items.append(item(row, self.postgres))
                    if len(items) == limit:
                        return items, last
            if len(rows) < limit:
                break
        return items, last

    def feed(self, after: str | None = None, limit: int = 100
             ) -> tuple[list[dict[str, Any]], str]:
        """The feed of this store's tenant after the cursor `after`: up to `limit` items
        and the cursor to read on from (`after` itself when nothing is new). BadCursor for
        a cursor this store does not know."""
        start = position(after, self.postgres)
        with self.reader() as conn:
            items, last = self._page(conn, self._owner(), start, limit)
        return items, last.text(self.postgres) if last != start else \
            after or START.text(self.postgres)

    def feed_end(self, conn=None) -> str:
        """A cursor after everything committed now (where a new webhook starts)."""
        if conn is None:
            with self.reader() as conn:
                return self.feed_end(conn)
        if self.postgres:
            return Position(conn.execute(select(PG_XMIN)).scalar(), 0).text(True)
        return str(conn.execute(select(func.max(events_t.c.id))).scalar() or 0)

    # ----------------------------------------------------------------- webhooks
    def add_webhook(self, url: str, events: Sequence[str], secret: str,
                    created_by: str | None = None) -> dict[str, Any]:
        """A new webhook of this tenant, receiving the events committed from now on
        (Conflict past `MAX_WEBHOOKS`)."""
        tenant = self._owner()
        with self.db.begin() as conn:
            count = conn.execute(select(func.count()).select_from(webhooks_t).where(
                webhooks_t.c.tenant == tenant)).scalar_one()
            if count >= MAX_WEBHOOKS:
                raise Conflict(N_("tenant '%(name)s' has %(n)s webhooks already, the most it may"
                                  " have: delete one first", name=tenant, n=MAX_WEBHOOKS))
            new = conn.execute(insert(webhooks_t).values(
                tenant=tenant, url=url, events=list(events), secret=secret,
                created_by=created_by, created_at=self.clock(), cursor=self.feed_end(conn),
                failures=0).returning(webhooks_t.c.id)).scalar_one()
        return self.webhook(new)

    def webhooks(self) -> list[dict[str, Any]]:
        """This tenant's webhooks, oldest first, with their delivery counts."""
        with self.reader() as conn:
            rows = conn.execute(select(webhooks_t).where(self._here(webhooks_t))
                                .order_by(webhooks_t.c.id)).mappings().all()
            counts = self._delivery_counts(conn, [r["id"] for r in rows])
        return [_webhook(r, counts.get(r["id"], {})) for r in rows]

    def webhook(self, webhook_id: int) -> dict[str, Any]:
        with self.reader() as conn:
            row = conn.execute(select(webhooks_t).where(
                self._here(webhooks_t), webhooks_t.c.id == webhook_id)).mappings().first()
            if row is None:
                raise NotFound(N_("no webhook %(id)s", id=webhook_id))
            return _webhook(row, self._delivery_counts(conn, [webhook_id]).get(webhook_id, {}))

    def _delivery_counts(self, conn, ids: list[int]) -> dict[int, dict[str, int]]:
        counts: dict[int, dict[str, int]] = defaultdict(dict)
        if ids:
            for wid, state, n in conn.execute(
                    select(deliveries_t.c.webhook_id, deliveries_t.c.state, func.count())
                    .where(deliveries_t.c.webhook_id.in_(ids))
                    .group_by(deliveries_t.c.webhook_id, deliveries_t.c.state)):
                counts[wid][state] = n
        return counts

    def delete_webhook(self, webhook_id: int) -> dict[str, Any]:
        """Delete a webhook of this tenant and its deliveries (NotFound otherwise);
        returns it as it was."""
        hook = self.webhook(webhook_id)
        with self.db.begin() as conn:
            conn.execute(deliveries_t.delete().where(
                self._here(deliveries_t), deliveries_t.c.webhook_id == webhook_id))
            gone = conn.execute(webhooks_t.delete().where(
                self._here(webhooks_t), webhooks_t.c.id == webhook_id)).rowcount
            if not gone:
                raise NotFound(N_("no webhook %(id)s", id=webhook_id))
        return hook

    def deliveries(self, webhook_id: int, limit: int = 50) -> list[dict[str, Any]]:
        """A webhook's deliveries, newest first (NotFound for another tenant's webhook)."""
        self.webhook(webhook_id)
        cols = [deliveries_t.c[k] for k in ("id", "event_id", "state", "attempts",
                                            "status_code", "error", "next_at", "created_at",
                                            "delivered_at")]
        with self.reader() as conn:
            rows = conn.execute(select(*cols, deliveries_t.c.body)
                                .where(self._here(deliveries_t),
                                       deliveries_t.c.webhook_id == webhook_id)
                                .order_by(deliveries_t.c.id.desc()).limit(limit)).mappings()
            return [{**{k: v for k, v in r.items() if k != "body"},
                     "type": (r["body"] or {}).get("type"),
                     "next_at": r["next_at"] if r["state"] == "pending" else None}
                    for r in rows]

    # ------------------------------------------------- the worker's side (all tenants)
    def hand_out(self, limit: int = 1000) -> int:
        """For every enabled webhook that is not failing: the feed after its cursor, of
        its types, written as pending deliveries, and the cursor advanced, in one
        transaction per webhook with its row locked. Returns how many deliveries were
        written."""
        with self.reader() as conn:
            ids = list(conn.execute(select(webhooks_t.c.id).where(
                self._here(webhooks_t), webhooks_t.c.disabled_at.is_(None),
                webhooks_t.c.failures == 0).order_by(webhooks_t.c.id)).scalars())
        handed = 0
        for wid in ids:
            try:
                handed += self._hand_out_one(wid, limit)
            except Conflict:
                pass  # another worker handed this window out
        return handed

    def _hand_out_one(self, webhook_id: int, limit: int) -> int:
        q = select(webhooks_t).where(webhooks_t.c.id == webhook_id,
                                     webhooks_t.c.disabled_at.is_(None))
        if self.postgres:
            q = q.with_for_update(skip_locked=True)
        with self.db.begin() as conn:
            hook = conn.execute(q).mappings().first()
            if hook is None:  # another worker holds it, or it is gone
                return 0
            start = position(hook["cursor"], self.postgres)
            items, last = self._page(conn, hook["tenant"], start, limit, set(hook["events"]))
            if last == start:
                return 0
            moved = conn.execute(update(webhooks_t).where(
                webhooks_t.c.id == webhook_id, webhooks_t.c.cursor == hook["cursor"])
                .values(cursor=last.text(self.postgres))).rowcount
            if moved != 1:  # (the row lock makes this unreachable; the cursor is the rule)
                raise Conflict(N_("webhook %(id)s: its cursor moved meanwhile", id=webhook_id))
            now = self.clock()
            if items:
                conn.execute(insert(deliveries_t), [
                    {"tenant": hook["tenant"], "webhook_id": webhook_id, "event_id": i["id"],
                     "body": i, "state": "pending", "attempts": 0, "next_at": now,
                     "created_at": now} for i in items])
        return len(items)

    def claim_deliveries(self, limit: int = 1000, lease: float = 60.0) -> list[dict[str, Any]]:
        """Pending deliveries due now of enabled webhooks, oldest first, each held for
        `lease` seconds (its `next_at` moved on) so no other worker posts it meanwhile."""
        now = self.clock()
        q = (select(deliveries_t.c.id, deliveries_t.c.webhook_id, deliveries_t.c.event_id,
                    deliveries_t.c.body, deliveries_t.c.attempts, webhooks_t.c.url,
                    webhooks_t.c.secret)
             .join(webhooks_t, webhooks_t.c.id == deliveries_t.c.webhook_id)
             .where(self._here(deliveries_t), deliveries_t.c.state == "pending",
                    deliveries_t.c.next_at <= now, webhooks_t.c.disabled_at.is_(None))
             .order_by(deliveries_t.c.next_at, deliveries_t.c.id).limit(limit))
        if self.postgres:
            q = q.with_for_update(of=deliveries_t, skip_locked=True)
        if self._nothing_to_claim(q):
            return []
        with self.db.begin() as conn:
            rows = [dict(r) for r in conn.execute(q).mappings()]
            if rows:
                conn.execute(update(deliveries_t).where(
                    deliveries_t.c.id.in_([r["id"] for r in rows])).values(
                    next_at=now + timedelta(seconds=lease)))
        return rows

    def record_deliveries(self, results: Sequence[Attempt], backoff, failure_limit: int
                          ) -> list[int]:
        """The answers of one round of attempts, in one transaction: 2xx delivered, the
        others pending again after `backoff(attempts)` seconds. A webhook whose every
        attempt of the round failed counts one more failure (any 2xx: none); at
        `failure_limit` it is disabled with the last error as its reason and its pending
        deliveries fail. Returns the ids of the webhooks disabled."""
        if not results:
            return []
        now = self.clock()
        ok: defaultdict[int | None, list[Attempt]] = defaultdict(list)
        failed: defaultdict[int | None, list[Attempt]] = defaultdict(list)
        for r in results:
            (ok if r.ok else failed)[r.status].append(r)
        rounds: dict[int, Attempt | None] = {}
        for r in results:  # per webhook: None if something got through, else the last
            if r.ok:
                rounds[r.webhook_id] = None
            elif rounds.get(r.webhook_id, r) is not None:
                rounds[r.webhook_id] = r
        disabled = []
        with self.db.begin() as conn:
            for status, done in ok.items():
                conn.execute(update(deliveries_t).where(
                    deliveries_t.c.id.in_([r.delivery_id for r in done])).values(
                    state="delivered", attempts=deliveries_t.c.attempts + 1,
                    status_code=status, error=None, delivered_at=now, next_at=None))
            for status, missed in failed.items():
                alike = defaultdict(list)  # one statement per answer and wait
                for r in missed:
                    alike[(r.error[:1000], backoff(r.attempts + 1))].append(r.delivery_id)
                for (error, wait), ids in alike.items():
                    conn.execute(update(deliveries_t).where(deliveries_t.c.id.in_(ids)).values(
                        attempts=deliveries_t.c.attempts + 1, status_code=status,
                        error=error, next_at=now + timedelta(seconds=wait)))
            fine = [w for w, last in rounds.items() if last is None]
            if fine:
                conn.execute(update(webhooks_t).where(webhooks_t.c.id.in_(fine),
                                                      webhooks_t.c.failures != 0)
                             .values(failures=0))
            for wid, last in rounds.items():
                if last is None:
                    continue
                failures = conn.execute(update(webhooks_t).where(webhooks_t.c.id == wid)
                                        .values(failures=webhooks_t.c.failures + 1)
                                        .returning(webhooks_t.c.failures)).scalar()
                if failures is not None and failures >= failure_limit:
                    reason = (f"{failures} consecutive failed deliveries; the last: "
                              f"{last.error}")[:1000]
                    conn.execute(update(webhooks_t).where(webhooks_t.c.id == wid).values(
                        disabled_at=now, disabled_reason=reason))
                    conn.execute(update(deliveries_t).where(
                        deliveries_t.c.webhook_id == wid, deliveries_t.c.state == "pending")
                        .values(state="failed", next_at=None))
                    disabled.append(wid)
        return disabled


@dataclass(frozen=True)
class Attempt:
    """The answer to one POST of a delivery."""

    delivery_id: int
    webhook_id: int
    attempts: int  # before this one
    ok: bool
    status: int | None  # the HTTP status, None when no answer came
    error: str = ""


def _webhook(row: Any, counts: dict[str, int]) -> dict[str, Any]:
    return {"id": row["id"], "url": row["url"], "events": list(row["events"]),
            "created_by": row["created_by"], "created_at": row["created_at"],
            "state": "disabled" if row["disabled_at"] else "failing" if row["failures"]
            else "active", "failures": row["failures"], "disabled_at": row["disabled_at"],
            "disabled_reason": row["disabled_reason"],
            "deliveries": {s: counts.get(s, 0) for s in ("pending", "delivered", "failed")}}


__all__ = ["KINDS", "TYPES", "Attempt", "BadCursor", "Feed", "FeedType", "Position", "position"]
