"""HTTP to OpenSearch for the sink: one pooled ``httpx`` client, the service URLs tried in turn.

Credentials go in the client's basic auth, never in a URL, so no request line, error or log
message can carry them; messages name a node by its URL without user information.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final
from urllib.parse import quote

import httpx

NDJSON: Final = "application/x-ndjson"


class OpenSearchClient:
    def __init__(
        self,
        urls: Sequence[str],
        auth: tuple[str, str] | None,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
    ) -> None:
        if not urls:
            raise ValueError("no OpenSearch URL")
        self.urls = list(urls)
        self._next = itertools.cycle(range(len(self.urls)))
        self.current = self.urls[0]
        self._http = httpx.Client(
            auth=httpx.BasicAuth(*auth) if auth else None,
            timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
            follow_redirects=False,
        )

    def request(
        self, method: str, path: str, *, body: bytes | None = None, content_type: str = "application/json"
    ) -> httpx.Response:
        """One request to the next URL in turn (each call moves on, so a node that is down is
        left for the others on the retry). Transport errors (refused, timed out) propagate."""
        self.current = self.urls[next(self._next)]
        headers = {"Content-Type": content_type} if body is not None else {}
        return self._http.request(method, f"{self.current}{path}", content=body, headers=headers)

    def bulk(self, body: bytes) -> httpx.Response:
        return self.request("POST", "/_bulk", body=body, content_type=NDJSON)

    def close(self) -> None:
        self._http.close()


def index_path(index: str) -> str:
    return "/" + quote(index, safe="")
