"""The event feed and webhooks (SPEC §11): the feed read from the history, webhooks and their deliveries."""

from __future__ import annotations


class Feed:
    """(part of `Store`)"""
