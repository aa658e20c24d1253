"""What the parts of `Store` share, declared once for the type checker.

`Store` is assembled from parts (Templates, Users, Instances, Steps, ...), and each part
uses what `Store.__init__` sets up and what its sibling parts define. Every part derives
from `StoreParts`, which only declares those names: the attributes as annotations, the
methods as signatures seen by the type checker alone. At run time it is an empty class;
the definitions stay where they are (named beside each signature).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Row, Table
    from sqlalchemy.engine import Connection
    from sqlalchemy.engine import Engine as Database

    from bpflow.store import Store
    from bpflow.store.changes import Hub
    from bpflow.store.instances import Loaded
    from bpflow.store.reads import Straight
    from bpflow.store.reuse import Reused
    from bpflow.store.steps import Op
    from bpflow.store.writing import Driver, NewInstance, Write
    from engine.instance import Event, Instance
    from engine.model import Template
    from engine.runtime import Engine

T = TypeVar("T")


class StoreParts:
    """The attributes and methods the parts of `Store` use of one another."""

    # set by Store.__init__ (tenant: a class attribute of Store, set per view by `of`)
    tenant: str | None
    db: Database
    postgres: bool
    secret: bytes
    clock: Callable[[], datetime]
    engine: Engine
    worker_actions: frozenset[str]
    driver: Driver
    changes: Hub
    _lock: threading.Lock
    _cache: OrderedDict[str, Loaded]
    _cache_size: int
    _templates: dict[tuple[int, tuple[tuple[str, int], ...]], Template]
    _tried: OrderedDict[tuple[int, str, tuple[tuple[str, int], ...]], Template]
    _template_rows: dict[int, Any]
    _nested_cache: dict[int, tuple[Any, frozenset[str]]]
    _evaluating: dict[int, tuple[Template, bool]]
    _quota_cache: Reused
    _accounts: Reused
    _step_hook: list[Callable[[list[str], float | None], None] | None]
    _span_hook: list[Callable[..., AbstractContextManager[Any]] | None]

    if TYPE_CHECKING:
        # Store (bpflow/store/__init__.py)
        @property
        def _on_due(self) -> Callable[[], None] | None: ...
        def of(self, tenant: str | None) -> Store: ...
        def _here(self, table: Table) -> ColumnElement[bool]: ...
        def _listed(self, table: Table) -> ColumnElement[bool]: ...
        def _owner(self) -> str: ...
        def reader(self) -> Connection: ...
        def _rows(self, read: Straight, values: dict[str, Any]) -> list[Any]: ...

        # Templates
        def _latest_row(self, name: str) -> Row[Any] | None: ...
        def _template_row(self, name: str, version: int | None = None,
                          tenant: str | None = None) -> Row[Any] | None: ...
        def _version_id(self, name: str, version: int, tenant: str | None = None) -> int: ...
        def is_retired(self, name: str) -> bool: ...
        def latest_body(self, name: str) -> dict[str, Any] | None: ...
        def _built(self, row: Any) -> Template | None: ...
        def _build(self, row: Any, pinned: dict[str, int] | None
                   ) -> tuple[Template, dict[str, int]]: ...

        # Users
        def user_ids(self, conn: Connection, names: list[str]) -> dict[str, int]: ...

        # Substitutes
        def standing_of(self, conn: Connection, uid: int) -> tuple[Any, ...]: ...

        # Instances
        def _cached(self, instance_id: str) -> Loaded | None: ...
        def _take(self, instance_id: str) -> Loaded | None: ...
        def _keep(self, loaded: Loaded) -> None: ...
        def _load(self, instance_id: str, conn: Connection | None = None,
                  lock: bool = False) -> Loaded: ...
        async def _load_async(self, instance_id: str) -> Loaded: ...
        def _load_many(self, ids: list[str], conn: Connection | None = None,
                       lock: bool = False) -> dict[str, Loaded]: ...
        def _version_row(self, name: str, version: int | None) -> Row[Any]: ...
        def _new_instance(self, row: Any, inputs: dict[str, Any] | None,
                          user: dict[str, Any] | None, instance_id: str | None = None,
                          batch: str | None = None) -> tuple[Loaded, NewInstance]: ...
        def _step_write(self, loaded: Loaded, events: list[Event]) -> Write: ...
        def _written(self, writes: list[Write], commit: float | None = None) -> None: ...
        def _notify(self, due_at: datetime | None) -> None: ...

        # Steps
        def _quota_lock(self) -> threading.Lock | None: ...
        def _startable_row(self, name: str, version: int | None,
                           admit: Callable[[dict[str, Any]], None] | None,
                           quota: bool = True, count: int = 1) -> Row[Any]: ...
        def _begun(self, loaded: Loaded, new: NewInstance) -> Instance: ...
        def apply(self, instance_id: str, op: Op[T], optimistic: int = 3) -> T: ...
        def _step_span(self, instance_id: str) -> AbstractContextManager[Any]: ...
        async def apply_async(self, instance_id: str, op: Op[T],
                              optimistic: int = 3) -> T: ...
        def apply_many(self, ids: list[str], op: Op[Any]) -> dict[str, Any]: ...

        # Queries
        def _counts(self, cond: list[Any],
                    circle_counts: Callable[[Any], Iterable[Any]] | None = None
                    ) -> dict[str, Any]: ...

        # Leases
        def due_at(self, inst: Instance) -> datetime | None: ...

        # Tenants
        def quotas(self) -> dict[str, int]: ...
        def _admit_instance(self, count: int = 1) -> None: ...
        def _admit_template(self, name: str) -> None: ...
        def _admit_variables(self, variables: Any) -> None: ...

        # Migrating
        def _moved(self, write: Write) -> None: ...

        # Feed
        def _scan(self, conn: Connection, tenant: str | None, after: Any,
                  limit: int) -> list[Any]: ...
