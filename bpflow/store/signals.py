"""Signals (SPEC §11): delivering a signal to the circles of this tenant that wait for it."""

from __future__ import annotations


class Signals:
    """(part of `Store`)"""
