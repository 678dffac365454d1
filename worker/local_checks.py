"""The client's checks answered in-process, with the plugins installed (CLI, REST server, demos).

Validation here needs no worker, so ``sluice connector create`` rejects a bad config at once even
when none is running; the light client asks a worker instead (worker/client_checks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.activities.offsets import OffsetsFormatError, parse_offsets
from sluice.activities.validation import secret_fields, validate_config
from sluice.worker.errors import ConnectorOffsetsError
from sluice.workflows.types import ValidationResult


class LocalChecks:
    async def secret_fields(self, config: Mapping[str, str]) -> frozenset[str]:
        return secret_fields(config)

    async def validate(
        self, name: str, plain: Mapping[str, str], sealed: Mapping[str, str]
    ) -> ValidationResult:
        """The plain config: in this process it never reaches Temporal (``${env:…}`` resolve here)."""
        return validate_config(name, plain)

    def check_offsets(self, name: str, offsets: list[dict[str, Any]]) -> None:
        try:
            parse_offsets(name, offsets)
        except OffsetsFormatError as exc:
            raise ConnectorOffsetsError(name, str(exc)) from None
