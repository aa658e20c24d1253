"""Helpers for state-handler tests."""

from __future__ import annotations

from typing import Any


def run(result: Any) -> list[Any]:
    """Drive a handler's result to the end (generators yield events); the events."""
    if hasattr(result, "__next__"):
        out = []
        for item in result:
            out.extend(item if isinstance(item, list) else [item] if item else [])
        return out
    return result if isinstance(result, list) else [result] if result else []
