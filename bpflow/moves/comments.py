"""Comments on an instance (SPEC §15): whoever sees the instance (`access.seeing`) writes
one and reads them all. A comment is an event of the instance's history (kind `comment`,
its actor the author, its data the text and, when it is about one, the circle's uri),
written as one step: it is in the event feed (`comment.added`) and reaches the pages
following the instance like any other step.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from bpflow.access import Caller
from bpflow.errors import NotFound
from bpflow.moves.steps import Op, step, step_async, visible
from bpflow.store import Store
from engine.errors import BpflowError
from engine.instance import Instance
from engine.messages import N_
from engine.runtime import Engine

KIND = "comment"  # the history's kind of a comment
MAX_TEXT = 2000  # characters of one comment
SHOWN = 500  # the newest comments a reader gets


class BadComment(BpflowError, ValueError):
    """A comment's text or circle that cannot be kept (HTTP 422)."""


def clean(text: Any) -> str:
    """The text as kept: NFC, without control characters but line ends and tabs,
    stripped; BadComment when empty or over MAX_TEXT characters."""
    if not isinstance(text, str):
        raise BadComment(N_("a comment must be text"))
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in
                   ("Cc", "Cf", "Cs", "Co", "Cn")).strip()
    if not text:
        raise BadComment(N_("a comment needs some text"))
    if len(text) > MAX_TEXT:
        raise BadComment(N_("a comment may have at most %(n)s characters", n=MAX_TEXT))
    return text


def commenting(caller: Caller, text: str, uri: str | None,
               written: list[dict[str, Any]]) -> Op:
    """The step of a comment; `written` gets its event (the last attempt's)."""
    def op(engine: Engine, inst: Instance) -> None:
        if uri is not None and uri not in inst.circles:
            raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
        engine.record(inst, KIND, uri, {"text": text}, caller.username)
        written[:] = [inst.events[-1].to_dict()]
    return op


def comment(store: Store, caller: Caller, iid: str, text: Any,
            uri: str | None = None) -> dict[str, Any]:
    """The caller comments on the instance (or on one of its circles); the comment."""
    written: list[dict[str, Any]] = []
    step(store, caller, iid, commenting(caller, clean(text), uri, written))
    return payload(written[0])


async def comment_async(store: Store, caller: Caller, iid: str, text: Any,
                        uri: str | None = None) -> dict[str, Any]:
    written: list[dict[str, Any]] = []
    await step_async(store, caller, iid, commenting(caller, clean(text), uri, written))
    return payload(written[0])


def comments(store: Store, caller: Caller, iid: str,
             uri: str | None = None) -> list[dict[str, Any]]:
    """The instance's comments, oldest first (the newest SHOWN; only those about circle
    `uri` when given): each `{"seq", "at", "author", "uri", "text"}`."""
    visible(store, caller, iid)
    return [payload(e) for e in store.history(iid, (KIND,))
            if uri is None or e.get("circle") == uri][-SHOWN:]


def payload(event: dict[str, Any]) -> dict[str, Any]:
    """A comment as the API and the pages give it, from its history event."""
    return {"seq": event["seq"], "at": event["at"],
            "author": event["actor"], "uri": event.get("circle"),
            "text": (event.get("data") or {}).get("text", "")}
