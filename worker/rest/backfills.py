"""``/sluice/connectors/{name}/backfills``: `sluice connector backfill` over HTTP (a Sluice call, in
neither peer's API; worker.backfills does the work, the REST server's process checks the request
against the source with its sealing key and environment, as `sluice verify` does).

- ``POST`` ``{"tables": ["shop.orders"], "where": "created_at >= '2024-05-01'"}``, or ``"from"``
  and/or ``"to"`` (with ``"column"``) instead of ``"where"``; no ``"tables"``: every table the
  connector reads. 201 ``{"backfills": [request, …]}``: one request per distinct condition.
- ``GET``: ``{"backfills": [request + "progress": [{table, state, rows, last_key}], …]}``, oldest
  first.
- ``DELETE`` (every request) or ``DELETE …/{id}``: ``{"cancelled": [id, …]}``, the ids cancelled now.

A request that cannot be made (a table the connector does not read, a condition its source refuses,
a connector that cannot backfill) is a 400 naming it; a connector or request not found, a 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request

from sluice.worker.rest.common import KafkaError, check_name, error_responses
from sluice.worker.rest.deps import client_of, json_body, json_request_body, reader, string_list, writer
from sluice.worker.rest.errors import RestError

router = APIRouter(tags=["sluice"], responses=error_responses(KafkaError, 400, 401, 404, 413, 500, 503))

PATH = "/sluice/connectors/{name}/backfills"
_VALUE = {"type": ["string", "number"]}
#: the body, as OpenAPI describes it: tables, and a condition or a range of a column
BACKFILL_BODY = json_request_body(
    {
        "type": "object",
        "properties": {
            "tables": {"type": "array", "items": {"type": "string"}},
            "where": {"type": "string"},
            "column": {"type": "string"},
            "from": _VALUE,
            "to": _VALUE,
        },
    }
)
#: request ids are the store's BIGINT: a larger number is simply not found, never a database error
RequestId = Annotated[int, Path(ge=1, le=2**63 - 1)]


def _value(body: dict[str, Any], key: str) -> str | None:
    """A range end as text (a JSON number too: ``{"from": 1000}``); absent or null: None."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RestError(400, f"field {key!r} must be a string or a number")
    return str(value)


@router.post(PATH, dependencies=[Depends(writer)], status_code=201, openapi_extra=BACKFILL_BODY)
async def request_backfill(name: str, request: Request) -> dict[str, Any]:
    from sluice.worker.backfills import request_json

    body = await json_body(request)
    if not isinstance(body, dict):
        raise RestError(400, "the body must be a JSON object")
    where, column = body.get("where"), body.get("column") or ""
    if not (where is None or isinstance(where, str)) or not isinstance(column, str):
        raise RestError(400, "fields 'where' and 'column' must be strings")
    created = await client_of(request).backfill(
        check_name(name), string_list(body, "tables"), where=where, column=column,
        low=_value(body, "from"), high=_value(body, "to"),
    )  # fmt: skip
    return {"backfills": [request_json(r) for r in created]}


@router.get(PATH, dependencies=[Depends(reader)])
async def backfills(name: str, request: Request) -> dict[str, Any]:
    statuses = await client_of(request).backfills(check_name(name))
    return {"backfills": [s.to_json() for s in statuses]}


@router.delete(PATH, dependencies=[Depends(writer)])
async def cancel_backfills(name: str, request: Request) -> dict[str, Any]:
    return {"cancelled": await client_of(request).cancel_backfill(check_name(name))}


@router.delete(PATH + "/{id}", dependencies=[Depends(writer)])
async def cancel_backfill(name: str, id: RequestId, request: Request) -> dict[str, Any]:
    return {"cancelled": await client_of(request).cancel_backfill(check_name(name), id)}
