"""Fault settings shared by the dummy source and sink."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from sluice.connectors.config import ConfigField

FAULT_FIELDS = (
    ConfigField("fail.at.offset", int, -1, doc="raise when a batch reaches this record offset (-1: never)"),
    ConfigField(
        "fail.once.marker", str, "", doc="fail once, creating this marker file; succeed while it exists"
    ),
    ConfigField("slow.ms", int, 0, doc="sleep this long per batch"),
    ConfigField("open.slow.ms", int, 0, doc="sleep this long when a task opens (a slow database or log)"),
    ConfigField("fail.on.close", bool, False, doc="raise from close() (the runtime must log it and go on)"),
)


class InjectedFault(RuntimeError):
    """A failure the test asked for (so tests can tell it from a real bug)."""


def sleep_if_slow(config: Mapping[str, Any]) -> None:
    if int(config.get("slow.ms") or 0) > 0:
        time.sleep(int(config["slow.ms"]) / 1000)


def sleep_on_open(config: Mapping[str, Any]) -> None:
    if int(config.get("open.slow.ms") or 0) > 0:
        time.sleep(int(config["open.slow.ms"]) / 1000)


def fail_once(config: Mapping[str, Any], where: str) -> bool:
    """True (after creating the marker) the first time; the caller then fails."""
    marker = str(config.get("fail.once.marker") or "")
    if not marker or os.path.exists(marker):
        return False
    with open(marker, "w", encoding="utf-8") as fh:
        fh.write(f"{where}\n")
    return True
