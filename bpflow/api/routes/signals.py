"""(SPEC §11)"""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/api", tags=["signals"])
