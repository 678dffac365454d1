"""An optional encrypting payload codec, so connector configs (passwords) are ciphertext in history.

Enabled when ``SLUICE_PAYLOAD_KEY`` holds a Fernet key (``sluice keygen`` prints one; the settings,
worker.settings, check its form at start). Workers and clients must share the key; the Temporal UI
then shows encrypted payloads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

if TYPE_CHECKING:  # the light client (worker/client.py) imports this module without pydantic
    from pydantic import SecretStr

ENCODING = b"binary/sluice-fernet"


class FernetCodec(PayloadCodec):
    def __init__(self, key: bytes) -> None:
        from cryptography.fernet import Fernet  # cryptography (~7 ms): the light client imports this module

        self._fernet = Fernet(key)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": ENCODING}, data=self._fernet.encrypt(p.SerializeToString()))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != ENCODING:
                out.append(p)
                continue
            decoded = Payload()
            decoded.ParseFromString(self._fernet.decrypt(p.data))
            out.append(decoded)
        return out


def payload_codec(key: SecretStr | None) -> FernetCodec | None:
    """The codec for the configured key (``settings().payload_key``), or None: payloads stay plain."""
    return FernetCodec(key.get_secret_value().encode()) if key is not None else None
