"""Where instances wait (SPEC §18's durations), kept as an aggregate folded from the
history, so a template's durations are read from a few hundred rows however long its
history is.

The worker folds the history in order (`fold_waits`, from the feed's scan: every
committed event once, `Feed._scan`): a circle's round opens at its first `circle_ready`
(`wait_rounds`) and closes when it leaves `waiting` (`circle_succeeded`,
`circle_failed`; a reset drops an open round), and an instance's when it completes (from
its start). Each closed round adds one to its bucket in `wait_buckets`: per template,
version, circle ("" for whole instances), UTC day it ended and duration bucket (a
logarithmic scale of ratio `STEP`, so a percentile read from them is within 10 % of the
exact one; the maximum is exact), and to the same bucket of every day (`ALL_DAYS`), so
durations without `since` read a few hundred rows however long the history is. One fold
at a time: its transaction first locks the cursor row (`wait_cursor`), whose position it
moves with what it folded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from bpflow.store.feed import Position, position
from bpflow.store.parts import StoreParts
from bpflow.store.tables import instances_t, wait_buckets_t, wait_cursor_t, wait_rounds_t

STEP = 1.1  # the ratio of a bucket's upper bound to its lower one
LEAVING = ("circle_succeeded", "circle_failed")
FOLDED = ("circle_ready", "circle_reset", "instance_completed", *LEAVING)
FOLD_MAX = 5000  # history rows one fold reads
FOLD_PRESSED = 500  # ... while the worker has due instances to take up
WHOLE = ""  # the circle of an instance's own duration
ALL_DAYS = "*"  # the day of the buckets counting every day (read without `since`)


def bucket(seconds: float) -> int:
    """The bucket of a duration: 0 below a second, then k for [STEP**(k-1), STEP**k)."""
    return 0 if seconds < 1 else 1 + int(math.log(seconds) / math.log(STEP))


class Waits(StoreParts):
    """The durations aggregate (part of `Store`)."""

    def fold_waits(self, limit: int = FOLD_MAX) -> int:
        """Fold up to `limit` history rows after the cursor into the aggregate, in one
        transaction; how many were read (0: nothing new)."""
        with self.db.begin() as conn:
            # the lock first (SQLite: the write lock; PostgreSQL: the row's), then the
            # cursor: two folds never read the same rows
            conn.execute(update(wait_cursor_t).where(wait_cursor_t.c.id == 1)
                         .values(position=wait_cursor_t.c.position))
            at = conn.execute(select(wait_cursor_t.c.position)
                              .where(wait_cursor_t.c.id == 1)).scalar()
            if at is None:  # a database the migration made empty
                conn.execute(wait_cursor_t.insert().values(id=1, position=""))
                at = ""
            rows = self._scan(conn, None, position(at, self.postgres), limit)
            if not rows:
                return 0
            self._fold(conn, [r for r in rows if r.kind in FOLDED])
            last = Position(rows[-1].tx or 0, rows[-1].id)
            conn.execute(update(wait_cursor_t).where(wait_cursor_t.c.id == 1)
                         .values(position=last.text(self.postgres)))
        return len(rows)

    def _fold(self, conn: Any, rows: list[Any]) -> None:
        if not rows:
            return
        ids = sorted({r.instance_id for r in rows})
        r_t, i_t = wait_rounds_t.c, instances_t.c
        facts = {iid: (tenant, version, created) for iid, tenant, version, created in
                 conn.execute(select(i_t.id, i_t.tenant, i_t.version, i_t.created_at)
                              .where(i_t.id.in_(ids)))}
        opened = {(iid, cid): ready for iid, cid, ready in conn.execute(
            select(r_t.instance_id, r_t.circle, r_t.ready_at)
            .where(r_t.instance_id.in_(ids)))}
        before = dict(opened)
        sums: dict[tuple[Any, ...], list[float]] = {}
        for row in rows:
            if row.instance_id not in facts:
                continue
            tenant, version, created = facts[row.instance_id]
            key = (row.instance_id, row.circle)
            if row.kind == "circle_ready":
                opened.setdefault(key, row.at)
            elif row.kind == "circle_reset":
                opened.pop(key, None)
            elif row.kind == "instance_completed":
                self._add(sums, tenant, row.template, version, WHOLE, created, row.at)
            elif key in opened:
                self._add(sums, tenant, row.template, version, row.circle, opened.pop(key),
                          row.at)
        gone = [k for k in before if k not in opened or opened[k] != before[k]]
        for iid, cid in gone:
            conn.execute(wait_rounds_t.delete().where(r_t.instance_id == iid,
                                                      r_t.circle == cid))
        new = [{"instance_id": iid, "circle": cid, "ready_at": ready,
                "tenant": facts[iid][0]} for (iid, cid), ready in opened.items()
               if before.get((iid, cid)) != ready]
        if new:
            conn.execute(wait_rounds_t.insert(), new)
        if sums:
            self._upsert(conn, sums)

    @staticmethod
    def _add(sums: dict[tuple[Any, ...], list[float]], tenant: str, template: str,
             version: int, circle: str, began: datetime, ended: datetime) -> None:
        seconds = max(0.0, (ended - began).total_seconds())
        for day in (ended.date().isoformat(), ALL_DAYS):
            key = (tenant, template, version, circle, day, bucket(seconds))
            count, top = sums.get(key, [0, 0.0])
            sums[key] = [count + 1, max(top, seconds)]

    def _upsert(self, conn: Any, sums: dict[tuple[Any, ...], list[float]]) -> None:
        """Add the folded counts to their buckets (insert, or add on a conflict)."""
        b = wait_buckets_t
        rows = [{"tenant": k[0], "template": k[1], "version": k[2], "circle": k[3],
                 "day": k[4], "bucket": k[5], "count": int(v[0]), "max": v[1]}
                for k, v in sums.items()]
        ins = (pg_insert if self.postgres else sqlite_insert)(b)
        conn.execute(ins.on_conflict_do_update(
            index_elements=["tenant", "template", "version", "circle", "day", "bucket"],
            set_={"count": b.c.count + ins.excluded.count,
                  "max": func.greatest(b.c.max, ins.excluded.max) if self.postgres
                  else func.max(b.c.max, ins.excluded.max)}), rows)

    def durations(self, name: str, version: int | None = None,
                  since: datetime | None = None) -> dict[str, Any]:
        """How long `name`'s circles wait, from ready to leaving `waiting`, and its
        completed instances from start to completion, as folded so far: {"circles": {uri:
        {"count", "p50", "p95", "max"}}, "instances": {...}} in seconds (percentiles
        within 10 %). `since`: rounds ended on its UTC day or later."""
        b = wait_buckets_t.c
        q = (select(b.circle, b.bucket, func.sum(b.count), func.max(b.max))
             .where(self._here(wait_buckets_t), b.template == name)
             .group_by(b.circle, b.bucket).order_by(b.circle, b.bucket))
        if version is not None:
            q = q.where(b.version == version)
        # every day's rows, or those of the days since (ALL_DAYS sorts before a date)
        q = q.where(b.day == ALL_DAYS if since is None else b.day >= since.date().isoformat())
        found: dict[str, list[tuple[int, int, float]]] = {}
        with self.reader() as conn:
            for cid, k, count, top in conn.execute(q):
                found.setdefault(cid, []).append((k, int(count), float(top)))
        figures = {cid: _figures(buckets) for cid, buckets in found.items()}
        whole = figures.pop(WHOLE, {"count": 0, "p50": None, "p95": None, "max": None})
        return {"circles": figures, "instances": whole}


def _figures(buckets: Iterable[tuple[int, int, float]]) -> dict[str, Any]:
    """count, p50, p95 (nearest rank: the longest duration of the bucket holding it)
    and max of a circle's buckets in order."""
    buckets = list(buckets)
    n = sum(c for _, c, _ in buckets)
    top = max(t for _, _, t in buckets)
    out: dict[str, Any] = {"count": n, "max": round(top, 3)}
    for name, p in (("p50", 50), ("p95", 95)):
        rank, seen = math.ceil(n * p / 100), 0
        for _k, c, t in buckets:
            seen += c
            if seen >= rank:
                out[name] = round(t, 3)  # the bucket's longest: within STEP of it
                break
    return out


