"""Drafts (SPEC §16): `GET|POST /api/drafts`, `GET|PUT|DELETE /api/drafts/{id}` and
`POST /api/drafts/{id}/publish`: templates being designed, for admins and designers, each
draft its author's (the tenant's admins see them all). Each answer with a draft carries
its analysis (`problems`) and what publishing it changes (`changes`). Each route is one
call of `bpflow.drafts`, which asks `bpflow.access` who may."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request, Response

from bpflow import drafts
from bpflow.access import Caller
from bpflow.api.deps import CallerDep, StoreDep, language_of
from bpflow.api.errors import responses, say
from bpflow.api.schemas import (
    MAX_INT,
    DraftIn,
    DraftOut,
    DraftPublished,
    DraftSummary,
    draft_payload,
    draft_summary,
)
from bpflow.store import Store

router = APIRouter(prefix="/api/drafts", tags=["drafts"])
DraftId = Path(ge=1, le=MAX_INT, description="the draft's id")


def _answer(store: Store, draft: drafts.Draft, request: Request) -> DraftOut:
    lang = language_of(request.scope)
    return draft_payload(draft, drafts.problems(store, draft.body),
                         drafts.changes(store, draft.body), lambda text: say(text, lang))


def _body(store: Store, caller: Caller, content: DraftIn) -> dict:
    if content.template is not None:
        return drafts.draft_from_template(store, caller, content.template)
    assert content.body is not None  # DraftIn holds one of the two
    return content.body


@router.get("", response_model=list[DraftSummary], responses=responses(401, 403))
def list_drafts(store: StoreDep, caller: CallerDep) -> list[DraftSummary]:
    """Your drafts (an admin: every author's of the tenant), the latest changed first."""
    return [draft_summary(d) for d in drafts.list_drafts(store, caller)]


@router.post("", response_model=DraftOut, status_code=201,
             responses=responses(401, 403, 404, 409, 422))
def create(content: DraftIn, store: StoreDep, caller: CallerDep,
           request: Request) -> DraftOut:
    """A new draft holding `body`, or the latest version of `template` (404: no such
    template). 409 once you keep 50 drafts."""
    return _answer(store, drafts.create_draft(store, caller, _body(store, caller, content)),
                   request)


@router.get("/{draft_id}", response_model=DraftOut, responses=responses(401, 403, 404))
def read(store: StoreDep, caller: CallerDep, request: Request,
         draft_id: int = DraftId) -> DraftOut:
    return _answer(store, drafts.open_draft(store, caller, draft_id), request)


@router.put("/{draft_id}", response_model=DraftOut,
            responses=responses(401, 403, 404, 422))
def save(content: DraftIn, store: StoreDep, caller: CallerDep, request: Request,
         draft_id: int = DraftId) -> DraftOut:
    """Replace the draft's body (its author only: an admin seeing it gets 403)."""
    return _answer(store, drafts.save_draft(store, caller, draft_id,
                                            _body(store, caller, content)), request)


@router.delete("/{draft_id}", status_code=204, responses=responses(401, 403, 404))
def delete(store: StoreDep, caller: CallerDep, draft_id: int = DraftId) -> Response:
    drafts.delete_draft(store, caller, draft_id)
    return Response(status_code=204)


@router.post("/{draft_id}/publish", response_model=DraftPublished, status_code=201,
             responses={**responses(401, 403, 404, 409, 422, 429),
                        200: {"model": DraftPublished,
                              "description": "identical to the latest (positions aside)"}})
def publish(store: StoreDep, caller: CallerDep, response: Response,
            draft_id: int = DraftId) -> DraftPublished:
    """Publish the draft as `POST /api/templates` does (201: a new version; 200: the
    latest already, only positions moved, which become the layout; 422 with the analysis'
    errors) and delete it."""
    name, version, created = drafts.publish(store, caller, draft_id)
    if not created:
        response.status_code = 200
    _, template = store.template(name, version)
    return DraftPublished(name=name, version=version, analysis=template.analysis,
                          created=created)
