"""Sealed secrets: literal passwords in a user's config become ``${sealed:…}`` before Temporal sees them.

Kafka Connect's and RocketMQ Connect's users keep ``connection.password=…`` in their files. The
config is a workflow input, so a literal secret would sit in Temporal's history in plaintext. Every
surface that starts or reconfigures a connector (``sluice.worker.client.SluiceClient``: the CLI, the REST
API, Python callers) therefore seals, with a Fernet key shared by clients and workers, each value
that is secret — a field the connector declares secret, a key that looks secret (``password``,
``token`` …), or a URL that carries a password — into a ``${sealed:<token>}`` reference. Like
``${env:…}`` references it is resolved only inside task activities (connectors.secrets), and status
shows it redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from sluice.connectors.secrets import SecretResolutionError, has_reference, is_secret_key

PROVIDER: Final = "sealed"
# A URL with a password in it: scheme://user:password@host or ?password= / &password=.
_URL_WITH_PASSWORD: Final = re.compile(r"://[^/@\s:]+:[^/@\s]+@|[?&;]password=", re.I)


class Sealer:
    """Seals and unseals secret values with one Fernet key (``SLUICE_SECRETS_KEY`` or the local key)."""

    def __init__(self, key: bytes) -> None:
        from cryptography.fernet import Fernet  # cryptography (~7 ms): the light client imports this module

        self._fernet = Fernet(key)

    def seal(self, value: str) -> str:
        return "${" + PROVIDER + ":" + self._fernet.encrypt(value.encode()).decode() + "}"

    def unseal(self, field: str, token: str) -> str:
        """The config provider for ``${sealed:token}`` (connectors.secrets.resolve_secrets)."""
        from cryptography.fernet import InvalidToken  # cryptography: see __init__

        try:
            return self._fernet.decrypt(token.strip().encode()).decode()
        except (InvalidToken, ValueError):
            raise SecretResolutionError(
                f"config field {field!r}: provider 'sealed': the value was sealed with another key; "
                "give clients and workers the same SLUICE_SECRETS_KEY"
            ) from None


def needs_sealing(key: str, value: Any, secret_fields: Iterable[str] = ()) -> bool:
    """Whether ``key=value`` holds a literal secret (references are left as they are)."""
    if not isinstance(value, str) or not value or has_reference(value):
        return False
    return key in set(secret_fields) or is_secret_key(key) or bool(_URL_WITH_PASSWORD.search(value))


def seal_config(
    config: Mapping[str, Any], sealer: Sealer, secret_fields: Iterable[str] = ()
) -> dict[str, Any]:
    """A copy of ``config`` with every literal secret value sealed (see :func:`needs_sealing`)."""
    secret = frozenset(secret_fields)
    return {k: sealer.seal(v) if needs_sealing(k, v, secret) else v for k, v in config.items()}
