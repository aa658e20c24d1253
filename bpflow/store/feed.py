"""The event feed (read from the history), webhooks and their deliveries (SPEC §11)."""

from __future__ import annotations


class Feed:
    """(part of `Store`)"""
