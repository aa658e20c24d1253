"""Moving running instances from one template version to another (SPEC §11)."""

from __future__ import annotations


class Migrating:
    """(part of `Store`)"""
