"""How changes reach open pages: push, not poll (SPEC §14).

After a step or a start commits, the store publishes a `Change`: the instance, its new
event counter, its tenant and the task-audience tokens whose lists it touched (`a:user`
holder, `u:user` candidate, `r:role` role; `*`: every list of the tenant, after a crowd
of starts). A page's background event subscribes to the keys of what it shows (the flow
page: its instance; the Tasks tab: the caller's tokens) and waits; on a change it re-reads
from the database. A change is a hint: correctness stays with the database, a missed or
doubled one only costs (or saves) a read.

One hub per database and process (`hub_for`). On SQLite (the embedded default: one
process) it fans out in the process, and notices by the file's data version that another
process (a `bpflow worker`, a command) wrote. On PostgreSQL it also sends every change with
`pg_notify` on a connection of its own right after the commit, and one listening
connection per process hands the changes of the other processes (backends, `bpflow
worker`s, the REST API) to its subscribers: a change made anywhere reaches every page.
Steps commit on any thread (a request's, the worker's, the SQLite writer's callers):
subscribers are woken on their own event loop (`call_soon_threadsafe`).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

log = logging.getLogger("bpflow.changes")

CHANNEL = "bpflow_changes"  # followed by the schema's name: `PgHub.channel`
PAYLOAD_MAX = 7000  # bytes of one notification (PostgreSQL's limit is 8000)
PENDING_MAX = 256  # changes a subscriber keeps unread; more and it is told "everything"
IDLE_S = 2.0  # seconds without a change before the sending connection is closed
# at most one notification round trip this often: a change after a quiet spell goes at
# once, a steady stream is gathered. Each is a transaction of the server's (one flow's
# steps on PostgreSQL: every 5 ms cost 60-80 us of each ~0.75 ms step, every 25 ms a
# third of that; bench/RESULTS.md); a page hears of a change at most this much later.
GATHER_S = 0.025
RETRY_S = 2.0  # before the listener connects again after losing its connection
WATCH_S = 1.0  # how often an SQLite file is checked for other processes' writes
BUSY_S = 5.0  # at most this often "everything" when their writes mix with ours
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
    task audience, or `*` for all of them)."""
    return ("t", tenant or "", token)


def task_keys(tenant: str | None, username: str, roles: Iterable[str]) -> list[Key]:
    """The keys a person's Tasks tab follows: the tasks they hold, those offered to them
    by name or by one of their roles, and a change to every list of their tenant."""
    tokens = [f"a:{username}", f"u:{username}", *(f"r:{r}" for r in roles), "*"]
    return [tasks_key(tenant, t) for t in tokens]


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


class PgHub(Hub):
    """A hub that also sends its changes to, and receives those of, the other processes
    on the same PostgreSQL database and schema (NOTIFY / LISTEN on `channel`).

    Sending happens on a thread of its own, so a step never waits for it: it gathers the
    changes that arrive together into as few notifications as fit. Each carries this
    hub's origin, so the listener skips what this process delivered already."""

    def __init__(self, conninfo: str) -> None:
        super().__init__()
        self.conninfo = conninfo
        self.origin = f"{os.getpid()}-{id(self):x}"
        self._outbox: queue.SimpleQueue[Change | None] = queue.SimpleQueue()
        self._threads: dict[str, threading.Thread] = {}
        self._stop = threading.Event()
        self._started = threading.Lock()
        self.listening.clear()  # set while the listener's LISTEN holds
        self.listener_pid = 0  # its server process
        self._channel: str | None = None

    def publish(self, changes: list[Change]) -> None:
        if not changes:
            return
        self.deliver(changes)
        if self._stop.is_set():
            return
        if self._start("notify", self._notifier):
            atexit.register(self._flush)
        for change in changes:
            self._outbox.put(change)

    def _listen(self) -> None:
        self._start("listen", self._listener)

    def _start(self, name: str, target) -> bool:
        """Start thread `name` unless it runs already; whether it was started now."""
        if name in self._threads or self._stop.is_set():
            return False
        with self._started:
            if name in self._threads:
                return False
            thread = threading.Thread(target=target, daemon=True,
                                      name=f"bpflow-changes-{name}")
            try:
                thread.start()
            except RuntimeError:  # the interpreter is shutting down
                return False
            self._threads[name] = thread
            return True

    def close(self) -> None:
        self._stop.set()
        self._flush()
        listener = self._threads.get("listen")
        if listener is not None:
            listener.join(timeout=10)

    # ------------------------------------------------------------------ sending
    def _notifier(self) -> None:
        """Send what is published, gathered; the connection is closed after IDLE_S
        seconds with nothing to send (opened again on the next change)."""
        conn, sent = None, 0.0
        while True:
            batch, more = self._drain(IDLE_S if conn is not None else None, sent + GATHER_S)
            if not batch and conn is not None:
                conn.close()  # idle
                conn = None
            if batch:
                conn = self._send(conn, self.payloads(batch))
                sent = time.monotonic()
            if not more:
                break
        if conn is not None:
            conn.close()

    def _send(self, conn, payloads: list[str]):
        import psycopg
        for attempt in range(2):  # a broken connection is opened again once
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.conninfo, autocommit=True)
                    # a notification is a hint, kept nowhere: its transaction need not
                    # wait for the disk, nor make the steps' commits wait behind it
                    conn.execute("SET synchronous_commit TO off")
                conn.execute("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                             (self.channel(conn), payloads))
                return conn
            except psycopg.Error as exc:
                conn = None
                if attempt:
                    log.warning("changes not sent to the other processes: %s", exc)
        return None

    def channel(self, conn) -> str:
        """The channel of this database's schema: installations sharing a database in
        schemas of their own (`-csearch_path`) hear only their own changes. A channel
        is an identifier (63 bytes at most): a long schema name is shortened to its
        digest."""
        if self._channel is None:
            schema = conn.execute("SELECT current_schema()").fetchone()[0] or "public"
            name = f"{CHANNEL}_{schema}"
            if len(name.encode()) > 63 or '"' in name:
                name = f"{CHANNEL}_{hashlib.sha256(schema.encode()).hexdigest()[:32]}"
            self._channel = name
        return self._channel

    def _drain(self, timeout: float | None, gather_until: float) -> tuple[list[Change], bool]:
        """(the changes waiting, up to 1000, after up to `timeout` seconds for the
        first and, once it came, until the monotonic time `gather_until` for more;
        whether to go on: False once the hub closes)."""
        try:
            first = self._outbox.get(timeout=timeout)
        except queue.Empty:
            return [], True
        wait = gather_until - time.monotonic()
        if wait > 0 and first is not None:
            time.sleep(wait)
        batch: list[Change] = []
        while first is not None:
            batch.append(first)
            if len(batch) >= 1000:
                return batch, True
            try:
                first = self._outbox.get_nowait()
            except queue.Empty:
                return batch, True
        return batch, False

    def _flush(self) -> None:
        """Send what is waiting before the process exits (a one-shot command's step
        still reaches the pages)."""
        thread = self._threads.get("notify")
        if thread is not None and thread.is_alive():
            self._outbox.put(None)
            thread.join(timeout=5)

    def payloads(self, changes: list[Change]) -> list[str]:
        """The notifications carrying `changes`, each under PAYLOAD_MAX bytes."""
        out: list[str] = []
        rows: list[str] = []
        size = 0
        for c in changes:
            row = json.dumps([c.instance, c.seq, c.tenant, sorted(c.tokens)],
                             separators=(",", ":"))
            if rows and size + len(row) + 1 > PAYLOAD_MAX - len(self.origin) - 16:
                out.append(self._payload(rows))
                rows, size = [], 0
            rows.append(row)
            size += len(row.encode()) + 1
        if rows:
            out.append(self._payload(rows))
        return out

    def _payload(self, rows: list[str]) -> str:
        return f'{{"o":"{self.origin}","c":[{",".join(rows)}]}}'

    # ---------------------------------------------------------------- receiving
    def _listener(self) -> None:
        """One connection listening for the whole process; after losing it, everything
        may have changed meanwhile (subscribers are told so and re-read)."""
        import psycopg
        lost = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(f'LISTEN "{self.channel(conn)}"')
                    self.listener_pid = conn.info.backend_pid
                    self.listening.set()
                    if lost:
                        self.deliver([EVERYTHING])
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self.received(note.payload)
            except psycopg.Error as exc:
                self.listening.clear()
                if not lost:
                    log.warning("listening for changes failed (%s); trying again", exc)
                lost = True
                time.sleep(RETRY_S)
        self.listening.clear()

    def received(self, payload: str) -> None:
        """Deliver a notification of another process (ours were delivered already)."""
        try:
            note = json.loads(payload)
            if note["o"] == self.origin:
                return
            changes = [Change(str(iid), seq, tenant, frozenset(tokens))
                       for iid, seq, tenant, tokens in note["c"]]
        except (ValueError, KeyError, TypeError):
            log.warning("a change notification that does not parse: %.200s", payload)
            return
        self.deliver(changes)


class SqliteHub(Hub):
    """A hub on an SQLite file, which other processes on the machine may share (a
    `bpflow worker`, a command): while anyone subscribes, one thread per process reads the
    file's `PRAGMA data_version` every WATCH_S seconds (no table is read). When it moved
    and this process published nothing meanwhile, another process wrote: every subscriber
    is told that everything may have changed and checks what it shows. When both happened,
    which writes were whose cannot be told apart: subscribers are told so at most every
    BUSY_S seconds (no page then misses another process's change for longer)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._published = 0  # local publishes so far (the watcher compares)
        self._watching = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # a new subscriber or the close: look at once
        self.listening.clear()  # set while the watcher knows the file's version

    def publish(self, changes: list[Change]) -> None:
        if changes:
            self._published += 1
            self.deliver(changes)

    def _listen(self) -> None:
        with self._watching:
            if self._watcher is None and not self._stop.is_set():
                self._watcher = threading.Thread(target=self._watch, daemon=True,
                                                 name="bpflow-changes-watch")
                self._watcher.start()
        self._wake.set()  # when not watching yet, a look at once: `heard` is quick

    def _watch(self) -> None:
        import sqlite3
        conn = sqlite3.connect(self.path, check_same_thread=False)
        try:
            version, published, told = None, self._published, 0.0
            look = time.monotonic()  # the next look at the file's version
            while True:
                self._wake.wait(max(0.0, look - time.monotonic()))
                self._wake.clear()
                if self._stop.is_set():
                    break
                if not self.subscribers():
                    version = None
                    self.listening.clear()
                    look = time.monotonic() + WATCH_S
                    continue
                if version is not None and time.monotonic() < look:
                    continue  # a new subscriber while watching already: heard
                look = time.monotonic() + WATCH_S
                now, mine = conn.execute("PRAGMA data_version").fetchone()[0], self._published
                self.listening.set()
                moved = version is not None and now != version
                if moved and (mine == published or time.monotonic() - told >= BUSY_S):
                    told = time.monotonic()
                    self.deliver([EVERYTHING])
                version, published = now, mine
        except sqlite3.Error as exc:
            log.warning("watching %s for other processes' changes stopped: %s",
                        self.path, exc)
        finally:
            conn.close()
            self.listening.clear()
            with self._watching:
                self._watcher = None

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=10)


_HUBS: dict[str, Hub] = {}
_HUBS_LOCK = threading.Lock()


def hub_for(url: str, postgres: bool = False, sqlite_file: str | None = None) -> Hub:
    """The hub of the database at `url` in this process (PostgreSQL: `url` as psycopg
    takes it; an SQLite file: its path)."""
    with _HUBS_LOCK:
        hub = _HUBS.get(url)
        if hub is None:
            hub = _HUBS[url] = (PgHub(url) if postgres else
                                SqliteHub(sqlite_file) if sqlite_file else Hub())
        return hub
