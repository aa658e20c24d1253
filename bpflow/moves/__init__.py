"""Every move on an instance, in one home: routes (`bpflow/api/routes/`), page states
(`bpflow_app/pages/`) and the worker only call these.

- `flow`: start (idempotent with a key), complete and fail a circle (a form or
  confirmation through the box layer), reset and its preview, suspend, resume and abort
  (`control`), and the worker's expiry.
- `tasks`: people's work on a circle: claim, unclaim, transfer,
  delegate, withdraw.
- `comments`: comments on an instance (history events of kind `comment`).
- `returns`: work returned to an earlier step (SPEC §15), and where it may go back to.
- `steps`: how a move runs: the caller must see the instance, then the move's op (which
  asks `bpflow.access` inside) is one durable step, on a thread or on an event loop.

Moves on approval mail (decide, send back, transfer, delegate) are the mailbox's (`bpflow.mailbox`).
"""

from bpflow.moves.comments import MAX_TEXT as COMMENT_MAX
from bpflow.moves.comments import BadComment, comment, comment_async, comments
from bpflow.moves.flow import (
    complete,
    complete_async,
    control,
    control_async,
    expire,
    fail,
    fail_async,
    levels_of,
    reset,
    reset_async,
    reset_preview,
    start,
    start_async,
    submit,
)
from bpflow.moves.steps import visible, visible_async
from bpflow.moves.tasks import (
    circle_words,
    claim,
    claim_async,
    delegate,
    delegate_async,
    delegates,
    engine_task,
    transfer,
    transfer_async,
    transferees,
    unclaim,
    unclaim_async,
    withdraw,
    withdraw_async,
)

__all__ = [
    "COMMENT_MAX", "BadComment", "comment", "comment_async", "comments",
    "circle_words", "claim", "claim_async", "complete", "complete_async", "control",
    "control_async", "delegate", "delegate_async", "delegates", "engine_task", "expire",
    "fail", "fail_async", "levels_of", "reset", "reset_async", "reset_preview", "start",
    "start_async", "submit", "transfer", "transfer_async", "transferees", "unclaim",
    "unclaim_async", "visible", "visible_async", "withdraw", "withdraw_async",
]
