"""Connecting to Temporal the same way from workers, the CLI and the Python client."""

from __future__ import annotations

import dataclasses

from temporalio.client import Client
from temporalio.converter import DataConverter

from worker.codec import codec_from_env


async def connect(address: str, namespace: str) -> Client:
    converter = DataConverter.default
    codec = codec_from_env()
    if codec is not None:
        converter = dataclasses.replace(converter, payload_codec=codec)
    return await Client.connect(address, namespace=namespace, data_converter=converter)
