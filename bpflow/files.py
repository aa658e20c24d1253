"""Files (SPEC §15): uploads, what a `file` form field holds, downloads, and the cleanup.

- `upload`: a person sends a file (at most `max_file_bytes()`, 10 MiB unless
  `BPFLOW_MAX_FILE_BYTES` says otherwise; at most `HOURLY_UPLOADS` files and
  `HOURLY_BYTES` bytes an hour). Its type is sniffed from the content (`filetype`), never
  taken from the name: HTML, SVG and other markup are refused, as is a file whose name
  claims another type than its content (a disguised file) or whose type the field does not
  accept. Its name is cut to a safe base name. The answer is the file's record
  `{"id", "name", "size", "sha256", "type"}`.
- `holder`: what a form's `file` field accepts, asked inside the form's step: the record
  (or id) of an upload by the same person, unused or already this instance's, of a type
  the field accepts and no larger than its `max_bytes`; the upload is then the instance's.
- `download`: who sees the instance (or the uploader, before a form holds it) gets the
  bytes, always as an attachment (`disposition`).
- `sweep`: a duty of the worker; uploads no form holds are removed after `UNUSED_FOR`.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import unicodedata
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import filetype  # type: ignore[import-untyped]

from bpflow import access
from bpflow.access import Caller
from bpflow.errors import NotFound, RateLimited
from bpflow.store import Store
from bpflow.store.public import file_record
from engine.errors import BpflowError
from engine.instance import iso
from engine.messages import N_
from engine.model import Field

if TYPE_CHECKING:
    from bpflow.worker import Worker


def visible(store: Store, caller: Caller, instance_id: str) -> Any:
    """`bpflow.moves.visible` (imported when first used: the form layer, which the moves
    import, asks this module's `holder`)."""
    from bpflow.moves import visible as seen
    return seen(store, caller, instance_id)

MAX_FILE_BYTES = 10 << 20  # one upload (BPFLOW_MAX_FILE_BYTES overrides)
HOURLY_UPLOADS = 100  # uploads of one person in an hour
HOURLY_BYTES = 200 << 20  # bytes one person uploads in an hour
UNUSED_FOR = timedelta(days=1)  # an upload no form holds is removed after this
SWEEP_EVERY = 60.0  # seconds between two sweeps of one worker
NAME_MAX = 200  # characters of a kept file name
# types known by their content (`filetype`) go by these extensions besides their own
ALIASES = {"jpg": {"jpeg", "jpe"}, "tif": {"tiff"}, "mid": {"midi"}}
# types without a signature: text, recognised only when the name says so and the content
# is text (UTF-8, no control characters but tab and line ends) and not markup
TEXT = {"txt": "text/plain", "csv": "text/csv", "tsv": "text/tab-separated-values",
        "md": "text/markdown", "log": "text/plain", "json": "application/json"}
# refused whatever they are called: what a browser would run or draw as a page
REFUSED = {"exe", "elf", "dll", "macho", "swf", "dex", "dcm", "wasm"}
MARKUP = re.compile(rb"\s*(<!--.*?-->\s*)*<\s*(!doctype|html|head|body|script|svg|\?xml|iframe"
                    rb"|object|embed|meta|xsl)", re.IGNORECASE | re.DOTALL)
CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class FileRefused(BpflowError, ValueError):
    """An upload that is not kept (HTTP 422): its type, its name or its size."""


class TooLarge(BpflowError):
    """An upload over the size limit (HTTP 413)."""


def max_file_bytes() -> int:
    """The most bytes one upload may have: `BPFLOW_MAX_FILE_BYTES`, else 10 MiB."""
    raw = os.environ.get("BPFLOW_MAX_FILE_BYTES", "").strip()
    if not raw:
        return MAX_FILE_BYTES
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(f"BPFLOW_MAX_FILE_BYTES must be a positive number of bytes, not {raw!r}")
    return int(raw)


def safe_name(name: str) -> str:
    """A file name safe to keep and to offer: its base name (no folders, either slash),
    NFC, without control or invisible characters, leading dots or spaces; at most
    NAME_MAX characters, its extension kept; "file" when nothing is left."""
    name = unicodedata.normalize("NFC", str(name)).replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    name = name.strip().lstrip(". ").rstrip(". ")
    if len(name) > NAME_MAX:
        stem, dot, ext = name.rpartition(".")
        ext = ext[:20] if dot and stem else ""
        name = name[:NAME_MAX - len(ext) - 1].rstrip() + ("." + ext if ext else "")
    return name or "file"


def extension(name: str) -> str:
    """A name's extension, lower case, without its dot ("" for none)."""
    stem, dot, ext = name.rpartition(".")
    return ext.lower() if dot and stem else ""


def sniff(content: bytes, name: str) -> str:
    """The type of the content (a MIME type), which the name's extension must agree with;
    FileRefused otherwise."""
    ext = extension(name)
    if MARKUP.match(content[:4096]):
        raise FileRefused(N_("HTML, SVG and XML files are not accepted"))
    kind = filetype.guess(content)
    if kind is not None:
        if kind.extension in REFUSED:
            raise FileRefused(N_("files of type %(type)s are not accepted", type=kind.mime))
        if ext != kind.extension and ext not in ALIASES.get(kind.extension, ()):
            raise FileRefused(N_("the file's content is %(type)s, not what its name %(name)s"
                                 " says", type=kind.mime, name=name))
        return str(kind.mime)
    if ext in TEXT and _text(content):
        return TEXT[ext]
    raise FileRefused(N_("the type of %(name)s could not be recognised from its content",
                         name=name))


def _text(content: bytes) -> bool:
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return CONTROL.search(content) is None


def accepted(field: Field, name: str, size: int) -> None:
    """FileRefused unless a file field takes a file of this name (its type checked) and
    size."""
    if field.accept and "." + extension(name) not in field.accept:
        raise FileRefused(N_("%(name)s is not one of the accepted types: %(accept)s",
                             name=name, accept=", ".join(field.accept)))
    if field.max_bytes is not None and size > field.max_bytes:
        raise FileRefused(N_("%(name)s is larger than %(limit)s bytes", name=name,
                             limit=field.max_bytes))


def upload(store: Store, caller: Caller, name: str, content: bytes,
           field: Field | None = None) -> dict[str, Any]:
    """Keep a person's upload; its record. `field`, when the upload names the form field
    it is for, checks its `accept` and `max_bytes` now (the form checks them again)."""
    limit = max_file_bytes()
    if len(content) > limit:
        raise TooLarge(N_("the file is larger than %(limit)s bytes", limit=limit))
    if not content:
        raise FileRefused(N_("the file is empty"))
    name = safe_name(name)
    kind = sniff(content, name)
    if field is not None:
        accepted(field, name, len(content))
    count, size = store.uploads_since(caller.id, store.clock() - timedelta(hours=1))
    if count >= HOURLY_UPLOADS or size + len(content) > HOURLY_BYTES:
        raise RateLimited(N_("too many uploads in an hour; try again later"), 3600)
    detail = store.add_file(caller.id, caller.username, name, content,
                            hashlib.sha256(content).hexdigest(), kind)
    return file_record(detail)


def field_of(store: Store, caller: Caller, instance_id: str, uri: str, name: str) -> Field:
    """The `file` field `name` of circle `uri`, of an instance the caller sees."""
    inst = visible(store, caller, instance_id)
    node = inst.template.plan.nodes.get(uri)
    found = [f for f in node.circle.box.form if f.name == name] if node else []
    if not found or found[0].type != "file":
        raise NotFound(N_("circle '%(uri)s' has no file field '%(name)s'", uri=uri,
                          name=name))
    return found[0]


def holder(store: Store, instance_id: str, uri: str,
           owner: str) -> Callable[[Field, Any], dict[str, Any]]:
    """A form's check of a `file` field's value (the record or its id), inside its step:
    ValueError (the field's message) unless it is an upload by `owner` that no other
    instance holds, of a type and size the field accepts. The upload becomes the
    instance's; the answer is its record."""
    def hold(field: Field, value: Any) -> dict[str, Any]:
        file_id = value.get("id") if isinstance(value, dict) else value
        if not isinstance(file_id, str) or not re.fullmatch(r"[0-9a-f]{32}", file_id):
            raise ValueError(N_("must be a file uploaded with POST /api/files"))
        detail = store.file(file_id)
        if detail is None or detail["owner"] != owner or detail["instance_id"] not in (
                None, instance_id):
            raise ValueError(N_("must be a file you uploaded for this flow"))
        try:
            accepted(field, detail["name"], detail["size"])
        except FileRefused as exc:
            raise ValueError(exc.args[0]) from None
        bound = store.bind_file(file_id, detail["owner_id"], instance_id, uri)
        if bound is None:  # used by another instance meanwhile
            raise ValueError(N_("must be a file you uploaded for this flow"))
        return file_record(bound)
    return hold


def fetch(store: Store, caller: Caller, file_id: str) -> tuple[dict[str, Any], bytes]:
    """(detail, bytes) of an upload for who may download it: whoever sees its instance,
    or its uploader before a form holds it; else it is not found."""
    detail = store.file(file_id) if re.fullmatch(r"[0-9a-f]{32}", file_id) else None
    missing = NotFound(N_("no file '%(id)s'", id=file_id[:40]))
    if detail is None:
        raise missing
    if detail["instance_id"] is None:
        if not access.may_fetch_upload(caller, detail["tenant"], detail["owner_id"]):
            raise missing
    else:
        try:
            visible(store, caller, detail["instance_id"])
        except NotFound:
            raise missing from None
    content = store.file_content(detail)
    if content is None:
        raise missing
    return detail, content


def listing(store: Store, caller: Caller, instance_id: str) -> list[dict[str, Any]]:
    """The uploads an instance's forms hold, for who sees it: each record with its
    uploader, circle and time."""
    visible(store, caller, instance_id)
    return [{**file_record(d), "owner": d["owner"], "uri": d["circle"],
             "created_at": iso(d["created_at"])} for d in store.instance_files(instance_id)]


def disposition(name: str) -> str:
    """`Content-Disposition` for a download: always an attachment, the name in ASCII
    (anything else an underscore) and in full (RFC 6266 `filename*`)."""
    plain = re.sub(r"[^A-Za-z0-9._ -]", "_", name).strip() or "file"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


class Sweeper:
    """The worker's duty removing uploads no form held within `UNUSED_FOR` (at most once
    a `SWEEP_EVERY` seconds per worker)."""

    __name__ = "sweep_files"

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, worker: Worker) -> int:
        now = time.monotonic()
        if now - self.last < SWEEP_EVERY:
            return 0
        self.last = now
        return worker.store.sweep_files(worker.store.clock() - UNUSED_FOR)
