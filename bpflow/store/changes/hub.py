"""The in-process fan-out of changes: what a `Change` is, the keys subscribers follow,
and the `Hub` handing committed changes to each subscriber on its own event loop (from
any thread, `call_soon_threadsafe`). The hubs that also hear other processes build on it
(`sqlite.SqliteHub`, `postgres.PgHub`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from bpflow.store import audience

PENDING_MAX = 256  # changes a subscriber keeps unread; more and it is told "everything"
HEARD_S = 10.0  # how long a new subscriber waits for the listener's LISTEN at most
Key = tuple[str, ...]


@dataclass(frozen=True)
class Change:
    """What one committed write changed. `instance` "" with `seq` None: everything may
    have changed (the listener lost its connection meanwhile)."""

    instance: str
    seq: int | None
    tenant: str | None = None
    tokens: frozenset[str] = field(default_factory=frozenset)  # task lists touched

    def keys(self) -> list[Key]:
        out: list[Key] = [instance_key(self.instance)] if self.instance else []
        return out + [tasks_key(self.tenant, t) for t in self.tokens]


EVERYTHING = Change("", None)


def instance_key(instance_id: str) -> Key:
    """The key of one instance's changes (what its flow page follows)."""
    return ("i", instance_id)


def tasks_key(tenant: str | None, token: str) -> Key:
    """The key of the changes to a task list of `tenant` (`token` as in the store's
    task audience, or `audience.EVERY` for all of them)."""
    return ("t", tenant or "", token)


def task_keys(tenant: str | None, username: str, roles: Iterable[str]) -> list[Key]:
    """The keys a person's Tasks tab follows: the tasks they hold, those offered to them
    by name or by one of their roles, and a change to every list of their tenant."""
    tokens = [*audience.tokens_of(username, roles), audience.EVERY]
    return [tasks_key(tenant, t) for t in tokens]


def mail_keys(tenant: str | None, user_id: int, guests: bool = False) -> list[Key]:
    """The keys a person's inbox follows: their mail, and guest messages for those who
    read them."""
    tokens = [audience.mail_of(user_id)] + ([audience.GUESTS] if guests else [])
    return [tasks_key(tenant, t) for t in tokens]


def mail_change(tenant: str | None, user_ids: Iterable[int | None]) -> Change:
    """The change of a write to these people's mail (None: a guest message)."""
    return Change("", 0, tenant, frozenset(audience.mail_of(u) for u in user_ids))


class Subscription:
    """A subscriber's changes, gathered on its event loop until it asks for them."""

    def __init__(self, hub: Hub, keys: list[Key], loop: asyncio.AbstractEventLoop):
        self.hub, self.keys, self.loop = hub, keys, loop
        self._changes: list[Change] = []
        self._arrived = asyncio.Event()

    def _put(self, changes: list[Change]) -> None:
        """(On the subscriber's loop.)"""
        if len(self._changes) + len(changes) > PENDING_MAX:
            self._changes = [EVERYTHING]
        else:
            self._changes.extend(changes)
        self._arrived.set()

    async def next(self, timeout: float) -> list[Change]:
        """The changes arrived since the last call, waiting up to `timeout` seconds for
        one ([] when none came)."""
        if not self._arrived.is_set():
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except TimeoutError:
                return []
        self._arrived.clear()
        out, self._changes = self._changes, []
        return out

    def close(self) -> None:
        self.hub._drop(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Hub:
    """The in-process fan-out of changes to subscribers (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: dict[Key, set[Subscription]] = {}
        self.listening = threading.Event()  # other processes' changes are heard
        self.listening.set()  # (none to hear here)

    def subscribe(self, keys: Iterable[Key]) -> Subscription:
        """Follow the changes of `keys` (call on the subscriber's event loop)."""
        sub = Subscription(self, list(dict.fromkeys(keys)), asyncio.get_running_loop())
        with self._lock:
            for key in sub.keys:
                self._subs.setdefault(key, set()).add(sub)
        self._listen()
        return sub

    async def heard(self, timeout: float = HEARD_S) -> bool:
        """Wait until the other processes' changes are heard (the listener's LISTEN
        holds): a read made after `subscribe` and this misses none of their commits, where
        one right after `subscribe` could miss those made before the LISTEN (the first
        subscription starts the listener). Whether they are (False after `timeout`
        seconds: the listener cannot connect)."""
        if self.listening.is_set():
            return True
        return await asyncio.to_thread(self.listening.wait, timeout)

    def _drop(self, sub: Subscription) -> None:
        with self._lock:
            for key in sub.keys:
                subs = self._subs.get(key)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._subs[key]

    def publish(self, changes: list[Change]) -> None:
        """Hand committed changes to this process's subscribers (and, on PostgreSQL, to
        the other processes'). Any thread; never raises, never waits for the network."""
        if changes:
            self.deliver(changes)

    def deliver(self, changes: list[Change]) -> None:
        """Wake the subscribers of these changes, each on its own loop."""
        found: dict[Subscription, list[Change]] = {}
        with self._lock:
            if not self._subs:
                return
            for change in changes:
                if change.seq is None and not change.instance:  # everything
                    subs = {s for group in self._subs.values() for s in group}
                else:
                    subs = {s for k in change.keys() for s in self._subs.get(k, ())}
                for sub in subs:
                    found.setdefault(sub, []).append(change)
        for sub, theirs in found.items():
            try:
                sub.loop.call_soon_threadsafe(sub._put, theirs)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                self._drop(sub)

    def subscribers(self) -> int:
        with self._lock:
            return len({s for group in self._subs.values() for s in group})

    def _listen(self) -> None:
        """Start hearing other processes' changes (PostgreSQL, an SQLite file)."""

    def close(self) -> None:
        """Stop the hub's threads (PostgreSQL, an SQLite file); subscribers are left as
        they are."""
