"""What a share's stages decided, as typed values both sides' stages return (never an exception
for the caller to read the text of): records made, or the first bad record named."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Made:
    """The share's good records (a source's: its messages in send order), or None for none."""

    records: pa.Table | None
    #: the share's tolerated bad records as dead letters (``errors.tolerance=all``), if any
    dead: pa.Table | None = None


@dataclass(frozen=True)
class Bad:
    """Without tolerance: the first record a stage flagged, named with its position and why."""

    message: str
