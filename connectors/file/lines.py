"""Lines of a byte range of a text file: their byte offsets, their text, and the ones that do not decode.

Why a line that does not decode is a flagged record and not an exception: one bad line must not
block the lines around it. Under ``errors.tolerance=none`` the flag fails the task naming the
line's byte offset; under ``all`` the line goes to the dead-letter topic with its exact bytes
(connectors.records' ``_sluice_raw``) and the rest of the batch flows.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate


@dataclass(frozen=True)
class Lines:
    """``offsets[i]`` is where line ``i`` starts in the file; a line that does not decode has text
    None, its reason in ``errors[i]`` and its bytes in ``raw[i]`` (``errors``/``raw`` are None when
    every line decoded)."""

    offsets: list[int]
    texts: list[str | None]
    errors: list[str | None] | None = None
    raw: list[bytes | None] | None = None


def split_lines(data: bytes, start: int, encoding: str) -> Lines:
    """The lines of ``data`` read at byte ``start`` (a range ending after a newline, see snap_end);
    a trailing ``\\r`` is dropped with the newline."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the range ended with a newline, as planned ranges do
    offsets = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=start))
    if not lines:
        return Lines([], [])
    try:  # the common case: everything decodes, one pass, no per-line bookkeeping
        return Lines(offsets, [line.removesuffix(b"\r").decode(encoding) for line in lines])
    except UnicodeDecodeError:
        pass
    texts: list[str | None] = []
    errors: list[str | None] = []
    raw: list[bytes | None] = []
    for line in lines:
        body = line.removesuffix(b"\r")
        try:
            texts.append(body.decode(encoding))
            errors.append(None)
            raw.append(None)
        except UnicodeDecodeError as exc:
            texts.append(None)
            errors.append(f"line is not {encoding}: {exc.reason} at byte {exc.start} of the line")
            raw.append(body)
    return Lines(offsets, texts, errors, raw)
