"""Uploads (SPEC §15): each file's record, and its bytes kept once per tenant and content
hash, in the table `file_blobs` (the default) or in a folder (`BPFLOW_FILES_DIR`:
`<folder>/<tenant>/<ab>/<sha256>`, written to a temporary name and renamed, 0600).

A record's `instance_id` is null until a form of that instance holds it (`bind_file`);
`sweep_files` removes the records still unused after a day, and the bytes no record
names any more. Who may upload, read or download is the services' to decide
(`bpflow.files`); here every query keeps to the store's tenant, as everywhere.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, update

from bpflow.store.parts import StoreParts
from bpflow.store.tables import blobs_t, files_t

DETAIL = (files_t.c.id, files_t.c.name, files_t.c.size, files_t.c.sha256, files_t.c.type,
          files_t.c.tenant, files_t.c.owner_id, files_t.c.owner, files_t.c.instance_id,
          files_t.c.circle, files_t.c.created_at)


def folder() -> Path | None:
    """Where the bytes of uploads are kept: `BPFLOW_FILES_DIR`, else the database."""
    raw = os.environ.get("BPFLOW_FILES_DIR", "").strip()
    return Path(raw) if raw else None


def _detail(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def record(detail: dict[str, Any]) -> dict[str, Any]:
    """The record a form's result holds: id, name, size, sha256, type."""
    return {k: detail[k] for k in ("id", "name", "size", "sha256", "type")}


class Files(StoreParts):
    """The `files` and `file_blobs` tables, and the folder when one is configured."""

    def add_file(self, owner_id: int, owner: str, name: str, content: bytes, sha256: str,
                 kind: str) -> dict[str, Any]:
        """Keep an upload (its bytes once per content hash); its detail."""
        tenant = self._owner()
        row = {"id": uuid.uuid4().hex, "tenant": tenant, "owner_id": owner_id,
               "owner": owner, "name": name, "size": len(content), "sha256": sha256,
               "type": kind, "instance_id": None, "circle": None,
               "created_at": self.clock()}
        place = folder()
        if place is not None:
            _write(place / tenant / sha256[:2] / sha256, content)
        with self.db.begin() as conn:
            if place is None:
                known = conn.execute(select(blobs_t.c.sha256).where(
                    blobs_t.c.tenant == tenant, blobs_t.c.sha256 == sha256)).first()
                if known is None:
                    conn.execute(insert(blobs_t).values(tenant=tenant, sha256=sha256,
                                                        content=content))
            conn.execute(insert(files_t).values(**row))
        return row

    def file(self, file_id: str) -> dict[str, Any] | None:
        """An upload's detail (of this store's tenant), or None."""
        with self.reader() as conn:
            row = conn.execute(select(*DETAIL).where(self._here(files_t),
                                                     files_t.c.id == file_id)).first()
        return None if row is None else _detail(row)

    def file_content(self, detail: dict[str, Any]) -> bytes | None:
        """The bytes of an upload (None if they are gone)."""
        place = folder()
        if place is not None:
            path = place / detail["tenant"] / detail["sha256"][:2] / detail["sha256"]
            try:
                return path.read_bytes()
            except FileNotFoundError:
                return None
        with self.reader() as conn:
            return conn.execute(select(blobs_t.c.content).where(
                blobs_t.c.tenant == detail["tenant"],
                blobs_t.c.sha256 == detail["sha256"])).scalar()

    def bind_file(self, file_id: str, owner_id: int, instance_id: str,
                  circle: str) -> dict[str, Any] | None:
        """Let a form of `instance_id` hold the upload: only the uploader's, and only one
        unused or already that instance's. Its detail, or None when it may not."""
        with self.db.begin() as conn:
            conn.execute(update(files_t).where(
                self._here(files_t), files_t.c.id == file_id, files_t.c.owner_id == owner_id,
                files_t.c.instance_id.is_(None)).values(instance_id=instance_id,
                                                        circle=circle))
            row = conn.execute(select(*DETAIL).where(
                self._here(files_t), files_t.c.id == file_id,
                files_t.c.owner_id == owner_id,
                files_t.c.instance_id == instance_id)).first()
        return None if row is None else _detail(row)

    def instance_files(self, instance_id: str) -> list[dict[str, Any]]:
        """The uploads the forms of an instance hold, oldest first."""
        with self.reader() as conn:
            rows = conn.execute(select(*DETAIL).where(
                self._here(files_t), files_t.c.instance_id == instance_id)
                .order_by(files_t.c.created_at, files_t.c.id)).all()
        return [_detail(r) for r in rows]

    def uploads_since(self, owner_id: int, since: datetime) -> tuple[int, int]:
        """(how many, how many bytes) the user uploaded since `since`."""
        with self.reader() as conn:
            row = conn.execute(select(func.count(), func.coalesce(func.sum(files_t.c.size), 0))
                               .where(self._here(files_t), files_t.c.owner_id == owner_id,
                                      files_t.c.created_at >= since)).one()
        return int(row[0]), int(row[1])

    def sweep_files(self, before: datetime, limit: int = 500) -> int:
        """Remove uploads created before `before` that no form holds (every tenant for
        the worker's view), then the bytes no record names; how many records went."""
        unused = and_(self._here(files_t), files_t.c.instance_id.is_(None),
                      files_t.c.created_at < before)
        with self.db.begin() as conn:
            gone = conn.execute(select(files_t.c.id, files_t.c.tenant, files_t.c.sha256)
                                .where(unused).limit(limit)).all()
            if not gone:
                return 0
            conn.execute(delete(files_t).where(files_t.c.id.in_([g.id for g in gone]),
                                               files_t.c.instance_id.is_(None)))
            hashes = {(g.tenant, g.sha256) for g in gone}
            kept = {(r.tenant, r.sha256) for r in conn.execute(
                select(files_t.c.tenant, files_t.c.sha256).where(
                    files_t.c.sha256.in_([h for _, h in hashes])))}
            orphans = hashes - kept
            for tenant, sha256 in orphans:
                conn.execute(delete(blobs_t).where(blobs_t.c.tenant == tenant,
                                                   blobs_t.c.sha256 == sha256))
        place = folder()
        if place is not None:
            for tenant, sha256 in orphans:
                (place / tenant / sha256[:2] / sha256).unlink(missing_ok=True)
        return len(gone)


def _write(path: Path, content: bytes) -> None:
    """Write the bytes once (a file already there holds the same content), atomically."""
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
