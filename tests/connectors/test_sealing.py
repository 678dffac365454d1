"""Literal secrets are sealed before a config reaches Temporal, and only a worker with the key opens them."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from sluice.connectors.sealing import Sealer, needs_sealing, seal_config
from sluice.connectors.secrets import SecretResolutionError, resolve_secrets


@pytest.mark.parametrize(
    ("key", "value", "declared", "sealed"),
    [
        ("connection.password", "pw", (), True),  # a secret-looking key
        ("database.password", "pw", (), True),
        ("connection.url", "jdbc:mysql://h/db?user=u&password=pw", (), True),  # a URL carrying one
        ("connection.url", "postgresql://u:pw@h/db", (), True),
        ("connection.url", "jdbc:mysql://h:3306/db", (), False),
        ("connection.url", "jdbc:mysql://h:3306/db", ("connection.url",), True),  # declared secret
        ("connection.password", "${env:DB_PASSWORD}", (), False),  # a reference stays as written
        ("connection.password", "", (), False),
        ("topic", "orders", (), False),
    ],
)
def test_what_is_sealed(key: str, value: str, declared: tuple[str, ...], sealed: bool) -> None:
    assert needs_sealing(key, value, declared) is sealed


def test_sealed_config_resolves_to_the_original_only_with_the_key() -> None:
    sealer = Sealer(Fernet.generate_key())
    config = {"connection.password": "hunter2", "topic": "t", "connection.user": "app"}
    sealed = seal_config(config, sealer)
    assert "hunter2" not in repr(sealed)
    assert sealed["connection.password"].startswith("${sealed:")
    assert sealed["topic"] == "t" and sealed["connection.user"] == "app"
    assert resolve_secrets(sealed, {"sealed": sealer.unseal}) == config
    other = Sealer(Fernet.generate_key())
    with pytest.raises(SecretResolutionError, match="'connection.password'.*SLUICE_SECRETS_KEY"):
        resolve_secrets(sealed, {"sealed": other.unseal})
    with pytest.raises(SecretResolutionError, match="unknown config provider 'sealed'"):
        resolve_secrets(sealed)
