"""Comments and files (SPEC §15).

- `POST /api/instances/{id}/comments` `{"text", "uri"?}` and `GET` (`?uri=` for one
  circle's): whoever sees the instance; a comment is one step of its history
  (`bpflow.moves.comments`).
- `POST /api/files` (multipart: `file`, and optionally `instance`, `uri`, `field` naming
  the form field it is for, whose `accept` and `max_bytes` then apply at once) → the
  file's record; `GET /api/files/{id}`: the bytes, always as an attachment; `GET
  /api/instances/{id}/files`: the uploads its forms hold (`bpflow.files`).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, File, Form, Path, Query, Response, UploadFile
from pydantic import BaseModel, Field

from bpflow import files, moves
from bpflow.api.deps import CallerDep, StoreDep
from bpflow.api.errors import responses
from bpflow.api.schemas import json_answer

router = APIRouter(prefix="/api", tags=["comments and files"])
FILE_ID = r"^[0-9a-f]{32}$"


class CommentIn(BaseModel):
    text: str = Field(min_length=1, max_length=2 * moves.COMMENT_MAX,
                      description="at most 2000 characters (after line ends and spaces"
                      " around are tidied); shown as text, never as HTML")
    uri: str | None = Field(default=None, min_length=1, max_length=400,
                            description="the circle it is about (none: the whole flow)")


class CommentOut(BaseModel):
    seq: int = Field(description="its place in the instance's history")
    at: str
    author: str | None
    uri: str | None
    text: str


class FileOut(BaseModel):
    id: str
    name: str = Field(description="the uploaded name, cut to a safe base name")
    size: int
    sha256: str
    type: str = Field(description="the MIME type sniffed from the content")


class InstanceFileOut(FileOut):
    owner: str = Field(description="who uploaded it")
    uri: str | None = Field(description="the circle whose form holds it")
    created_at: str


@router.post("/instances/{instance_id}/comments", response_model=CommentOut,
             status_code=201, responses=responses(401, 404, 422))
async def comment(instance_id: str, body: CommentIn, store: StoreDep,
                  caller: CallerDep) -> Response:
    return json_answer(await moves.comment_async(store, caller, instance_id, body.text,
                                                 body.uri), 201)


@router.get("/instances/{instance_id}/comments", response_model=list[CommentOut],
            responses=responses(401, 404))
def comments(instance_id: str, store: StoreDep, caller: CallerDep,
             uri: Annotated[str | None, Query(min_length=1, max_length=400)] = None
             ) -> Response:
    return json_answer(moves.comments(store, caller, instance_id, uri))


@router.post("/files", response_model=FileOut, status_code=201,
             responses=responses(401, 404, 413, 422, 429))
async def upload(store: StoreDep, caller: CallerDep,
                 file: Annotated[UploadFile, File(description="the file (at most 10 MiB"
                                                  " unless configured)")],
                 instance: Annotated[str | None, Form(max_length=32)] = None,
                 uri: Annotated[str | None, Form(max_length=400)] = None,
                 field: Annotated[str | None, Form(max_length=100)] = None) -> Response:
    """The type is sniffed from the content: HTML, SVG, a type the field does not accept
    and a file whose name claims another type than its content are refused (422)."""
    content = await file.read(files.max_file_bytes() + 1)
    name = file.filename or "file"

    def keep() -> dict:
        target = files.field_of(store, caller, instance, uri, field) \
            if instance and uri and field else None
        return files.upload(store, caller, name, content, target)

    return json_answer(await asyncio.to_thread(keep), 201)


@router.get("/files/{file_id}", responses={**responses(401, 404), 200: {
    "description": "the file's bytes, as an attachment", "content": {
        "application/octet-stream": {}}}})
def download(file_id: Annotated[str, Path(pattern=FILE_ID)], store: StoreDep,
             caller: CallerDep) -> Response:
    """Whoever sees the instance whose form holds it (the uploader, before one does);
    always `Content-Disposition: attachment`, never shown inline."""
    detail, content = files.fetch(store, caller, file_id)
    return Response(content, media_type=detail["type"], headers={
        "Content-Disposition": files.disposition(detail["name"]),
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "private, no-store"})


@router.get("/instances/{instance_id}/files", response_model=list[InstanceFileOut],
            responses=responses(401, 404))
def instance_files(instance_id: str, store: StoreDep, caller: CallerDep) -> Response:
    return json_answer(files.listing(store, caller, instance_id))
