"""Read-only queries: instance lists and counts, history, what the pages show of many
instances at once (last step, change counter, mail counts). Plain queries on the
store's tables, no engine step, each a couple of statements however many rows there are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, case, exists, func, or_, select

from bpflow.store import audience
from bpflow.store.accounts import Caller, standing
from bpflow.store.mail import MAIL_KINDS, visible_mail
from bpflow.store.parts import StoreParts
from bpflow.store.tables import audience_t, circles_t, events_t, instances_t, mail_t
from engine.instance import Event

# what a list shows of an instance (`GET /api/instances`, taking part, where a circle is)
SUMMARY = tuple(instances_t.c[k] for k in ("id", "template", "version", "status", "reason",
                                           "user", "created_at", "updated_at"))
STEP_EVENTS = ("circle_succeeded", "circle_failed", "circle_skipped", "circle_reset",
               "circle_retry_scheduled", "circle_pending", "circle_ready")


class Queries(StoreParts):
    """The store's read-only queries (part of `Store`)."""

    def list_instances(self, user_id: int | None = None, template: str | None = None,
                       status: str | None = None, limit: int = 50, offset: int = 0,
                       excluding: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Instances newest first (of one user unless `user_id` is None; none of the
        template `excluding`) and the total."""
        cond = [self._listed(instances_t)]
        if user_id is not None:
            cond.append(instances_t.c.user_id == user_id)
        if template:
            cond.append(instances_t.c.template == template)
        if excluding:
            cond.append(instances_t.c.template != excluding)
        if status:
            cond.append(instances_t.c.status == status)
        q = (select(*SUMMARY).where(*cond)
             .order_by(instances_t.c.created_at.desc(), instances_t.c.id).limit(limit)
             .offset(offset))
        with self.reader() as conn:
            rows = conn.execute(q).mappings().all()
            total = conn.execute(select(func.count()).select_from(instances_t)
                                 .where(*cond)).scalar_one()
        return [dict(r) for r in rows], total

    def search_instances(self, user_id: int, text: str, words: dict[str, str], limit: int,
                         offset: int = 0, template: str | None = None,
                         status: str | None = None, excluding: str | None = None,
                         most: int = 2000, templates: Sequence[str] = ()
                         ) -> tuple[list[dict[str, Any]], int, bool]:
        """Of a user's newest `most` instances (as `list_instances` filters them), those
        whose template, id or last step ("<circle> <word>", `words` naming each kind
        of `STEP_EVENTS`) holds `text` in any case, or whose template is one of
        `templates` (found by their titles): a page newest first, their number, and
        whether the user has more than `most` to look at."""
        i, e = instances_t, events_t
        cond = [self._listed(i), i.c.user_id == user_id]
        cond += [i.c.template == template] if template else []
        cond += [i.c.status == status] if status else []
        cond += [i.c.template != excluding] if excluding else []
        ids = select(i.c.id).where(*cond).order_by(i.c.created_at.desc(), i.c.id)
        newest = ids.limit(most).subquery()
        last = events_t.alias("last")
        seq = (select(func.max(last.c.seq)).where(last.c.instance_id == e.c.instance_id,
                                                 last.c.kind.in_(STEP_EVENTS))
               .scalar_subquery())
        word = case(*((e.c.kind == k, w) for k, w in words.items()), else_=e.c.kind)
        step = (select(e.c.circle + " " + word)
                .where(e.c.instance_id == i.c.id, e.c.seq == seq).scalar_subquery())
        held = "%" + "".join("\\" + c if c in "\\%_" else c for c in text.lower()) + "%"
        found = [i.c.id.in_(select(newest.c.id)), or_(
            *(func.lower(v).like(held, escape="\\") for v in (i.c.template, i.c.id, step)),
            *([i.c.template.in_(list(templates))] if templates else []))]
        q = (select(*SUMMARY).where(*found).order_by(i.c.created_at.desc(), i.c.id)
             .limit(limit).offset(offset))
        with self.reader() as conn:
            rows = conn.execute(q).mappings().all()
            total = conn.execute(select(func.count()).select_from(i).where(*found)
                                 ).scalar_one()
            looked = conn.execute(select(func.count()).select_from(
                ids.limit(most + 1).subquery())).scalar_one()
        return [dict(r) for r in rows], int(total), looked > most

    def stats(self, template: str, user_id: int | None = None) -> dict[str, Any]:
        """Busybee's InstanceCountState: circles per state, instances per status."""
        cond = [self._listed(instances_t), instances_t.c.template == template]
        if user_id is not None:
            cond.append(instances_t.c.user_id == user_id)
        return self._counts(cond)

    def _counts(self, cond: list[Any], circle_counts: Callable[[Any], Iterable[Any]] | None
                = None) -> dict[str, Any]:
        """Circles per state and instances per status of the instances meeting `cond`;
        `circle_counts(conn)` gives the (circle, state, count) rows when they are found
        otherwise (a crowd's: `Crowds.batch_stats`)."""
        circles: dict[str, dict[str, int]] = {}
        with self.reader() as conn:
            q = (select(circles_t.c.circle, circles_t.c.state, func.count())
                 .join(instances_t, instances_t.c.id == circles_t.c.instance_id)
                 .where(*cond).group_by(circles_t.c.circle, circles_t.c.state))
            found: Iterable[Any] = (conn.execute(q) if circle_counts is None
                                    else circle_counts(conn))
            for cid, state, n in found:
                circles.setdefault(cid, {s: 0 for s in ("waiting", "success", "failure",
                                                        "skipped")})[state] = n
            statuses: dict[str, int] = dict(conn.execute(select(instances_t.c.status, func.count())
                                         .where(*cond).group_by(instances_t.c.status)).all())
        return {"circles": circles, "instances": statuses}

    def latest_instance(self, template: str, user_id: int,
                        statuses: Iterable[str]) -> str | None:
        """The id of the user's newest instance of `template` in one of `statuses`."""
        q = (select(instances_t.c.id)
             .where(self._here(instances_t), instances_t.c.template == template,
                   instances_t.c.user_id == user_id,
                    instances_t.c.status.in_(list(statuses)))
             .order_by(instances_t.c.created_at.desc()).limit(1))
        with self.reader() as conn:
            return conn.execute(q).scalar()

    def history(self, instance_id: str,
                kinds: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """An instance's history, in order (only the events of `kinds` when given)."""
        q = select(events_t).where(self._here(events_t),
                                   events_t.c.instance_id == instance_id).order_by(
            events_t.c.seq)
        if kinds is not None:
            q = q.where(events_t.c.kind.in_(list(kinds)))
        with self.reader() as conn:
            rows = conn.execute(q).all()
        return [Event(r.seq, r.at, r.kind, r.actor, r.circle, r.before, r.after,
                      r.data or {}).to_dict() for r in rows]

    def last_steps(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The newest circle event (circle, kind, at) of each instance."""
        if not ids:
            return {}
        newest = (select(events_t.c.instance_id, func.max(events_t.c.seq).label("seq"))
                  .where(self._here(events_t), events_t.c.instance_id.in_(ids),
                         events_t.c.kind.in_(STEP_EVENTS))
                  .group_by(events_t.c.instance_id).subquery())
        q = select(events_t.c.instance_id, events_t.c.circle, events_t.c.kind,
                   events_t.c.at).join(newest, and_(events_t.c.instance_id == newest.c.instance_id,
                                                    events_t.c.seq == newest.c.seq))
        with self.reader() as conn:
            return {r.instance_id: {"circle": r.circle, "kind": r.kind, "at": r.at}
                    for r in conn.execute(q)}


    def instance_stamp(self, instance_id: str) -> tuple[int, str] | None:
        """(event counter, status) of an instance: what a page compares once it follows
        the instance's changes (one that committed before it subscribed)."""
        q = select(instances_t.c.seq, instances_t.c.status).where(
            self._here(instances_t), instances_t.c.id == instance_id)
        with self.reader() as conn:
            row = conn.execute(q).first()
        return (row.seq, row.status) if row else None


    def tasks(self, caller: Caller, assigned: str = "all", template: str | None = None,
              limit: int = 50, offset: int = 0) -> tuple[list[Any], int]:
        """The open tasks (SPEC §10) of running instances the caller may act on, oldest
        first, and their number: `me` those they hold, `candidate` those nobody holds that
        name them or one of their roles, `all` both. Rows: instance_id, circle, epoch,
        task, ready_at, template, version."""
        a, c, i = audience_t, circles_t, instances_t
        held = audience.held_by(caller.username)
        offered = audience.offered_to(caller.username, caller.roles)
        tokens = {"me": held, "candidate": offered}.get(assigned, held + offered)
        whom, tokens = self._offered_as_substitute(caller, tokens, assigned)
        # only active instances' open tasks are listed there (`Instances._step_write`)
        cond = [a.c.tenant == caller.tenant, self._here(a), whom]
        if template:
            cond.append(a.c.instance_id.in_(select(i.c.id).where(i.c.template == template)))
        # A task may name the caller more than once (by name and by a role, by two roles):
        # the first rows in order hold `offset + limit` tasks however often each appears,
        # and a top-N sort of them is a fraction of a millisecond; the count is of tasks.
        first = (select(a.c.instance_id, a.c.circle).where(*cond)
                 .order_by(a.c.ready_at, a.c.instance_id, a.c.circle)
                 .limit((offset + limit) * len(tokens)))
        tasks = (select(a.c.instance_id, a.c.circle).where(*cond)
                 .group_by(a.c.instance_id, a.c.circle).subquery())
        with self.reader() as conn:
            keys = list(dict.fromkeys(tuple(r) for r in conn.execute(first)))
            keys = keys[offset:offset + limit]
            found = {}
            if keys:
                q = (select(c.c.instance_id, c.c.circle, c.c.epoch, c.c.task, c.c.ready_at,
                            i.c.template, i.c.version)
                     .join(i, i.c.id == c.c.instance_id)
                     .where(c.c.instance_id.in_({k[0] for k in keys}),
                            c.c.circle.in_({k[1] for k in keys})))
                found = {(r.instance_id, r.circle): r for r in conn.execute(q)}
            rows = [found[k] for k in keys if k in found]
            total = conn.execute(select(func.count()).select_from(tasks)).scalar_one()
        return rows, int(total)

    def _offered_as_substitute(self, caller: Caller, tokens: list[str], assigned: str
                               ) -> tuple[Any, list[str]]:
        """The condition on `task_audience.who` of a task list, and every token it names:
        the caller's `tokens`, and unless only their own (`me`) are asked for, the work
        addressed by name to whom they stand in for now (SPEC §15), of the templates the
        substitution names (each row's instance looked up by its key when it names some:
        never the list of every instance of a template)."""
        a, i = audience_t, instances_t
        now = standing(caller, self.clock(), any_template=True) if assigned != "me" else []
        everywhere = [t for s in now if s.templates is None
                      for t in audience.addressed_to(s.username)]
        some = [(audience.addressed_to(s.username), s.templates) for s in now
                if s.templates is not None]
        tokens = tokens + everywhere
        whom: Any = a.c.who.in_(tokens)
        if some:  # per row found by `who`, its instance's template (its primary key)
            whom = or_(whom, *(and_(a.c.who.in_(names), exists().where(
                i.c.id == a.c.instance_id, i.c.template.in_(templates)))
                for names, templates in some))
            tokens = tokens + [t for names, _ in some for t in names]
        return whom, tokens

    def taking_part(self, caller: Caller, limit: int = 50) -> list[dict[str, Any]]:
        """Instances others started that asked the caller: a task names them (as a
        candidate by name or by one of their roles, or as its holder), or they were sent
        approval mail; newest first (who may see them is `access.sight`'s, the same)."""
        c, i = circles_t, instances_t
        tokens = audience.tokens_of(caller.username, caller.roles)
        named = select(c.c.instance_id).where(c.c.people.is_not(None), or_(
            *(c.c.people.contains(f" {t} ", autoescape=True) for t in tokens)))
        mailed = select(mail_t.c.instance_id).where(mail_t.c.recipient_id == caller.id,
                                                    mail_t.c.instance_id.is_not(None))
        q = (select(*SUMMARY).where(i.c.tenant == caller.tenant, self._listed(i),
                                 or_(i.c.user_id.is_(None), i.c.user_id != caller.id),
                                 or_(i.c.id.in_(named), i.c.id.in_(mailed)))
             .order_by(i.c.created_at.desc(), i.c.id).limit(limit))
        with self.reader() as conn:
            return [dict(r) for r in conn.execute(q).mappings().all()]

    def mail_about(self, user_id: int | None, instance_id: str) -> bool:
        """Whether the user was sent mail about the instance (an approver may look at it)."""
        q = select(mail_t.c.id).where(self._here(mail_t), mail_t.c.recipient_id == user_id,
                                      mail_t.c.instance_id == instance_id).limit(1)
        with self.reader() as conn:
            return conn.execute(q).first() is not None


    def mail_counts(self, caller: Caller) -> dict[str, dict[str, int]]:
        """Per mail kind the user can see: {"total", "unread", "pending"} (pending: approvals
        not yet decided)."""
        q = (select(mail_t.c.kind, func.count(),
                    func.sum(case((mail_t.c.read_at.is_(None), 1), else_=0)),
                    func.sum(case((and_(mail_t.c.kind == "approval",
                                        mail_t.c.decision.is_(None)), 1), else_=0)))
             .where(visible_mail(caller, now=self.clock())).group_by(mail_t.c.kind))
        out = {k: {"total": 0, "unread": 0, "pending": 0} for k in MAIL_KINDS}
        with self.reader() as conn:
            for kind, total, unread, pending in conn.execute(q):
                out[kind] = {"total": int(total), "unread": int(unread or 0),
                             "pending": int(pending or 0)}
        return out

    def observed(self, now: Any) -> dict[str, list[tuple[Any, ...]]]:
        """What `GET /metrics` reports of the database (SPEC §18), every tenant's (the
        view's): {"instances": [(tenant, status, n)], "tasks_open": [(tenant, n)],
        "tasks_overdue": [(tenant, n)]}. Counted on the indexes, one query each."""
        tasks = (select(audience_t.c.tenant, audience_t.c.instance_id, audience_t.c.circle)
                 .where(self._here(audience_t)).distinct().subquery())
        overdue = (select(tasks.c.tenant, func.count())
                   .join(circles_t, and_(circles_t.c.instance_id == tasks.c.instance_id,
                                         circles_t.c.circle == tasks.c.circle))
                   # a task's due time is its own (engine.tasks: ISO 8601 in UTC, which
                   # sorts as text), not the circle's `due_at` (a timer's)
                   .where(circles_t.c.task["due_at"].as_string() < now.isoformat())
                   .group_by(tasks.c.tenant))
        with self.reader() as conn:
            return {
                "instances": [tuple(r) for r in conn.execute(
                    select(instances_t.c.tenant, instances_t.c.status, func.count())
                    .where(self._here(instances_t))
                    .group_by(instances_t.c.tenant, instances_t.c.status))],
                "tasks_open": [tuple(r) for r in conn.execute(
                    select(tasks.c.tenant, func.count()).group_by(tasks.c.tenant))],
                "tasks_overdue": [tuple(r) for r in conn.execute(overdue)],
            }
