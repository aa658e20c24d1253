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

    hub.py       `Change`, the keys subscribers follow, the in-process fan-out (`Hub`)
    sqlite.py    `SqliteHub`: other processes' writes to an SQLite file, by its data version
    postgres.py  `PgHub`: NOTIFY / LISTEN between the processes on one PostgreSQL database
"""

from __future__ import annotations

import threading

from bpflow.store.changes.hub import (
    EVERYTHING,
    HEARD_S,
    PENDING_MAX,
    Change,
    Hub,
    Key,
    Subscription,
    instance_key,
    mail_change,
    mail_keys,
    task_keys,
    tasks_key,
)
from bpflow.store.changes.postgres import CHANNEL, GATHER_S, PAYLOAD_MAX, PgHub
from bpflow.store.changes.sqlite import WATCH_S, SqliteHub

__all__ = ["CHANNEL", "EVERYTHING", "GATHER_S", "HEARD_S", "PAYLOAD_MAX", "PENDING_MAX",
           "WATCH_S", "Change", "Hub", "Key", "PgHub", "SqliteHub", "Subscription", "hub_for",
           "instance_key", "mail_change", "mail_keys", "task_keys", "tasks_key"]

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
