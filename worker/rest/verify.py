"""``POST /sluice/verify``: `sluice verify` over HTTP (a Sluice call, in neither peer's API).

The body names a pipeline (``{"connector": "src", "sink_connector": "sink"}``, or one direct
pipeline) or two databases and their tables (``{"source": URL, "target": URL, "tables":
["orders", "items=items_copy"], "key": ["id"]}``); ``"live": false`` compares a running pipeline
once, without checking differences again after it caught up (worker.verify.live). The answer is
the CLI's ``--output json``: per table the ``missing``, ``extra`` and ``different`` keys, and
``equal``. A compare that cannot be made is a 400 naming the database, table or transform; a
connector not found, a 404.
The databases are compared by the REST server's process, with its sealing key and environment.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request

from sluice.worker.rest.common import KafkaError, error_responses
from sluice.worker.rest.deps import client_of, json_body, json_request_body, reader, string_list
from sluice.worker.rest.errors import RestError

router = APIRouter(tags=["sluice"], responses=error_responses(KafkaError, 400, 401, 404, 413, 500, 503))

_KEYS = {"type": "array", "items": {"type": "string"}}
#: the body, as OpenAPI describes it: a pipeline, or two databases and their tables
VERIFY_BODY = json_request_body(
    {
        "type": "object",
        "properties": {
            "connector": {"type": "string"},
            "sink_connector": {"type": "string"},
            "live": {"type": "boolean"},
            "source": {"type": "string"},
            "target": {"type": "string"},
            "tables": _KEYS,
            "key": _KEYS,
        },
    }
)


@router.post("/sluice/verify", dependencies=[Depends(reader)], openapi_extra=VERIFY_BODY)
async def verify(request: Request) -> dict[str, Any]:
    from sluice.worker.verify.engine import verify as compare
    from sluice.worker.verify.model import VerifyError
    from sluice.worker.verify.pipelines import table_pairs

    body = await json_body(request)
    if not isinstance(body, dict):
        raise RestError(400, "the body must be a JSON object")
    connector, sink = str(body.get("connector") or ""), str(body.get("sink_connector") or "")
    source, target, tables = (
        str(body.get("source") or ""),
        str(body.get("target") or ""),
        string_list(body, "tables"),
    )
    if bool(connector) == bool(source or target or tables):
        raise RestError(400, "give 'connector' (and 'sink_connector'), or 'source', 'target' and 'tables'")
    try:
        unread: tuple[str, ...] = ()
        if connector:
            client = client_of(request)
            pipeline = await client.verify_pipeline(connector, sink or None)
            report = await client.verify_planned(pipeline, live=body.get("live", True) is not False)
            unread = pipeline.plan.unread
        elif not (source and target and tables):
            raise RestError(400, "'source', 'target' and at least one of 'tables' are all needed")
        else:
            report = await asyncio.to_thread(
                compare, source, target, table_pairs(tables, string_list(body, "key"))
            )
    except VerifyError as exc:
        raise RestError(400, str(exc)) from None
    return {**report.to_json(), "not_written_by_the_sink": list(unread)}
