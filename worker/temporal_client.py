"""Connecting to Temporal the same way from workers, the CLI and the Python client."""

from __future__ import annotations

import dataclasses

from temporalio.client import Client
from temporalio.converter import DataConverter

from worker.codec import payload_codec
from worker.settings import settings


async def connect(address: str, namespace: str) -> Client:
    converter = DataConverter.default
    codec = payload_codec(settings().payload_key)
    if codec is not None:
        converter = dataclasses.replace(converter, payload_codec=codec)
    return await Client.connect(address, namespace=namespace, data_converter=converter)
