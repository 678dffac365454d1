"""An optional encrypting payload codec, so connector configs (passwords) are ciphertext in history.

Enabled when ``SLUICE_PAYLOAD_KEY`` holds a Fernet key (``sluice keygen`` prints one). Workers and
clients must share the key; the Temporal UI then shows encrypted payloads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/sluice-fernet"


class FernetCodec(PayloadCodec):
    def __init__(self, key: bytes) -> None:
        from cryptography.fernet import Fernet

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


def codec_from_env() -> FernetCodec | None:
    key = os.environ.get("SLUICE_PAYLOAD_KEY")
    return FernetCodec(key.encode()) if key else None
