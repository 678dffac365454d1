"""Config providers ${env:..} and ${file:..:..}: resolved values, and errors naming field and provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.connectors.secrets import SecretResolutionError, parse_properties, redact, resolve_secrets


def test_env_and_file_references_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    props = tmp_path / "secrets.properties"
    props.write_text("# comment\ndb.password = s3cr=t\nuser: admin\n", encoding="utf-8")
    monkeypatch.setenv("SLUICE_TEST_TOKEN", "tok-123")
    config = {
        "plain": "value",
        "token": "${env:SLUICE_TEST_TOKEN}",
        "password": f"${{file:{props}:db.password}}",
        "url": f"postgresql://${{file:{props}:user}}:${{env:SLUICE_TEST_TOKEN}}@db/x",
        "number": 5,
    }
    assert resolve_secrets(config) == {
        "plain": "value",
        "token": "tok-123",
        "password": "s3cr=t",
        "url": "postgresql://admin:tok-123@db/x",
        "number": 5,
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "${env:SLUICE_SURELY_UNSET_VAR}",
            "config field 'pw': provider 'env': environment variable 'SLUICE_SURELY_UNSET_VAR' is not set",
        ),
        ("${vault:secret/db}", "config field 'pw': unknown config provider 'vault' (known: env, file)"),
        (
            "${file:/nonexistent/sluice.props:pw}",
            "config field 'pw': provider 'file': cannot read /nonexistent/sluice.props: "
            "No such file or directory",
        ),
        ("${file:nokey}", "config field 'pw': provider 'file' needs ${file:/path/to/file.properties:key}"),
    ],
    ids=["env-unset", "unknown-provider", "file-missing", "file-no-key"],
)
def test_unresolvable_reference_names_field_and_provider(value: str, message: str) -> None:
    with pytest.raises(SecretResolutionError) as info:
        resolve_secrets({"pw": value})
    assert str(info.value) == message


def test_missing_key_in_file_does_not_leak_other_values(tmp_path: Path) -> None:
    props = tmp_path / "p.properties"
    props.write_text("other=topsecret\n", encoding="utf-8")
    with pytest.raises(SecretResolutionError) as info:
        resolve_secrets({"pw": f"${{file:{props}:missing}}"})
    assert str(info.value) == f"config field 'pw': provider 'file': key 'missing' not found in {props}"
    assert "topsecret" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1\nb : 2\n! c\n#x=y\n\nflag\n", {"a": "1", "b": "2", "flag": ""}),
        ("url=jdbc:pg://h:5432/db\n", {"url": "jdbc:pg://h:5432/db"}),
    ],
)
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_redact_masks_declared_and_secret_looking_keys() -> None:
    config = {"user": "u", "conn": "x", "db.password": "p", "auth.token": "t", "empty.secret": "", "n": 1}
    assert redact(config, {"conn"}) == {
        "user": "u",
        "conn": "********",
        "db.password": "********",
        "auth.token": "********",
        "empty.secret": "",
        "n": 1,
    }


def test_validation_defers_provider_references_to_the_task() -> None:
    """A ${env:…} value cannot be checked where the config is validated (the client, the
    workflow's validate activity); the task checks the resolved value when it parses its config."""
    from sluice.connectors.config import ConfigDef, ConfigError, ConfigField

    def url_like(value: str) -> str | None:
        return None if "://" in value else "not a URL"

    fields = ConfigDef(
        (ConfigField("connection.url", str, secret=True, validator=url_like), ConfigField("retries", int, 3))
    )
    assert (
        fields.validate({"connection.url": "${env:DB_URL}", "retries": "${file:/etc/x.properties:n}"}) == []
    )
    with pytest.raises(ConfigError, match="not a URL"):
        fields.parse({"connection.url": "plain-text"})
