"""Bookmark parsing is ASCII-only: whatever a caller sends as a bookmark is either the
circle's bookmark or a BookmarkError saying why not, never another exception."""

from __future__ import annotations

import pytest

from engine import bookmarks
from engine.errors import BookmarkError

KEY = b"bookmark-test-key"
GOOD = bookmarks.make(KEY, "inst", "a", 3)
SIG = GOOD.split(".", 1)[1]

REFUSED = {  # token: the refusal
    None: "missing or malformed",
    42: "missing or malformed",
    "": "missing or malformed",
    "3": "missing or malformed",
    f"\u00b2.{SIG}": "malformed",  # ², a digit to str.isdigit, not to int()
    f"\u2460.{SIG}": "malformed",  # ①
    f"\u0663.{SIG}": "malformed",  # Arabic-Indic three, which int() would read as 3
    f"\uff13.{SIG}": "malformed",  # a full-width 3
    f"03.{SIG}": "malformed",
    f"+3.{SIG}": "malformed",
    f" 3.{SIG}": "malformed",
    f"3.{SIG}\n": "malformed",
    f"3.{SIG[:-1]}\u00e9": "malformed",  # hmac.compare_digest refuses non-ASCII text
    "3.\ud800": "malformed",
    f"{'9' * 13}.{SIG}": "malformed",
    f"3.{SIG}.x": "malformed",
    f"3.{SIG[:-2]}xx": "not valid for this circle",
    f"4.{SIG}": "not valid for this circle",
    bookmarks.make(KEY, "inst", "a", 2): "stale",
    bookmarks.make(KEY, "other", "a", 3): "not valid for this circle",
    bookmarks.make(b"another key", "inst", "a", 3): "not valid for this circle",
}


def test_the_circles_bookmark_is_taken():
    bookmarks.verify(KEY, "inst", "a", 3, GOOD)
    assert GOOD.startswith("3.") and GOOD.isascii()


@pytest.mark.parametrize("token", list(REFUSED), ids=repr)
def test_anything_else_is_a_clear_refusal(token):
    with pytest.raises(BookmarkError, match=REFUSED[token]):
        bookmarks.verify(KEY, "inst", "a", 3, token)
