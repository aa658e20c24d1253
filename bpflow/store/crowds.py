"""Crowds (SPEC §11): one instance per user started in one set-based write; batch counts."""

from __future__ import annotations


class Crowds:
    """(part of `Store`)"""
