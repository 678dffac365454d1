"""``opensearch-sink``: RocketMQ topics into OpenSearch (or Elasticsearch) indices by ``_bulk`` requests.

Keys of Confluent's Elasticsearch sink (``sluice.connectors.opensearch.config``); the class names of
Confluent's and RocketMQ Connect's Elasticsearch sinks run it (connectors.plugins).

Delivery is at least once with idempotent writes: every document id comes from the record (its key,
or ``topic+queue+offset`` with ``key.ignore``), so a batch re-run after a crash, a retry or a
failover writes the same documents again and the index ends as one run would leave it
(``Delivery.IDEMPOTENT``). Positions commit after the batch's last bulk request was answered.

Lifecycle per batch (``write``):

1. The batch's records become bulk actions in record order (``bulk.build_actions``). Records that
   cannot be a document (no key, a value that is not an object, a tombstone with
   ``behavior.on.null.values=fail``) are skipped and logged with ``drop.invalid.message``, and are
   bad records otherwise — refused before anything is written when ``errors.tolerance=none``.
2. With ``schema.ignore=false`` an index this task has not seen yet is created with a mapping
   from the records' schema when it does not exist (``mappings.index_mapping``).
3. ``batch.size`` actions per request. Each response is classified per item
   (``responses``): 429, 5xx and unanswered requests are sent again after
   ``retry.backoff.ms`` (doubling, with jitter) up to ``max.retries`` times — only the items that
   failed, unless a later write of the same document already landed — then the task fails with
   an error naming the connector and the service, and the runtime re-runs the batch. Items
   OpenSearch refuses (a mapping conflict, a value that does not parse) are bad records: raised
   together as ``RejectedRecordsError`` naming each record's topic, queue and offset, which the
   runtime fails the task with or, with ``errors.tolerance=all``, dead-letters before writing the
   rest again.

A batch that runs as a Spark job is sent by the job's tasks (``StagesOnExecutors``): each runs
``write`` on its share, the records of whole queues (a key's records are in one), and returns the
records OpenSearch refused, which the driver raises together. Ids come from the records, so a
share re-sent after a failure writes the same documents.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from sluice.connectors.api import (
    Delivery,
    Rejected,
    RejectedRecordsError,
    SinkConnector,
    SinkTask,
    TaskStager,
)
from sluice.connectors.config import ConfigDef, ConfigError, FieldError
from sluice.connectors.opensearch import config as cfg
from sluice.connectors.opensearch.bulk import DELETE, Action, Invalid, WriteRules, build_actions, bulk_body
from sluice.connectors.opensearch.responses import Outcome, classify_response, to_retry
from sluice.connectors.spark_schema import own_schema_parts

if TYPE_CHECKING:
    import pyarrow as pa

    from sluice.connectors.model import BatchPlan
    from sluice.connectors.opensearch.client import OpenSearchClient

log = logging.getLogger(__name__)

#: Longest wait between two retries, whatever ``retry.backoff.ms`` doubles to.
MAX_BACKOFF_S = 30.0
#: Refused records named in a task's error (all of them go to the dead-letter topic).
SHOWN_REJECTIONS = 3


class OpenSearchSinkError(RuntimeError):
    """A batch could not be written; names connector and service URL (never credentials).
    Retriable: the runtime re-runs the batch, which rewrites the same documents."""


class OpenSearchAuthError(PermissionError):
    """OpenSearch refused the credentials or the privileges (retried a few times, then a
    configuration error: connectors.errors)."""


class OpenSearchSinkTask(SinkTask):
    delivery: ClassVar[Delivery] = Delivery.IDEMPOTENT

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        c = self.config
        problems = cfg.connector_errors(c, f"connector {self.name!r}")
        if problems:
            raise ConfigError(problems)
        self.urls = cfg.urls(c)
        self.rules = WriteRules(
            key_ignore=bool(c.get("key.ignore", False)),
            write_method=str(c.get("write.method") or "insert"),
            null_values=str(c.get("behavior.on.null.values") or "fail"),
            index_map=cfg.index_map(c),
        )
        self.schema_ignore = bool(c.get("schema.ignore", False))
        self.batch_size = int(c.get("batch.size") or 2000)
        self.max_retries = int(c.get("max.retries", 5))
        self.backoff_s = int(c.get("retry.backoff.ms", 100)) / 1000
        self.drop_invalid = bool(c.get("drop.invalid.message", False))
        self.tolerates = c.get("errors.tolerance") == "all"
        self._known_indices: set[str] = set()
        self._client: OpenSearchClient | None = None

    # ---- wiring -----------------------------------------------------------------------------

    @property
    def client(self) -> OpenSearchClient:
        if self._client is None:
            from sluice.connectors.opensearch.client import OpenSearchClient

            self._client = OpenSearchClient(
                self.urls,
                cfg.credentials(self.config),
                connect_timeout_s=int(self.config.get("connection.timeout.ms") or 5000) / 1000,
                read_timeout_s=int(self.config.get("read.timeout.ms") or 30_000) / 1000,
            )
        return self._client

    def _where(self, plan: BatchPlan) -> str:
        return f"connector {self.name!r} task {self.task_id} batch {plan.batch_id}"

    def _service(self) -> str:
        return self._client.current if self._client is not None else ", ".join(self.urls)

    def _pause(self, retry: int) -> None:
        """Before retry ``retry`` (1-based): the backoff doubled per retry, capped, with jitter."""
        wait = min(self.backoff_s * 2 ** (retry - 1), MAX_BACKOFF_S)
        time.sleep(wait * random.uniform(0.5, 1.0))

    def _auth_error(self, status: int) -> OpenSearchAuthError:
        user = str(self.config.get("connection.username") or "") or (cfg.credentials(self.config) or ("",))[0]
        who = f"user {user!r}" if user else "no user (set connection.username/connection.password)"
        what = "the credentials" if status == 401 else "the privileges"
        return OpenSearchAuthError(
            f"connector {self.name!r}: OpenSearch at {self._service()} refused {what} of {who} "
            f"(HTTP {status})"
        )

    # ---- the batch ---------------------------------------------------------------------------

    def write(self, records: pa.Table, plan: BatchPlan) -> None:
        # Each topic's documents with its own fields (a batch over topics whose schemas differ
        # carries one merged struct), and each new index mapped from its own topic's schema.
        actions: list[Action] = []
        invalid: list[Invalid] = []
        ignored = 0
        value_types: dict[str, pa.DataType] = {}
        for part in own_schema_parts(records):
            part_actions, part_invalid, part_ignored = build_actions(part, self.rules)
            actions += part_actions
            invalid += part_invalid
            ignored += part_ignored
            for action in part_actions:
                value_types.setdefault(action.index, part.column("value").type)
        rejected = [Rejected(i.topic, i.partition, i.offset, i.reason) for i in invalid]
        if invalid and self.drop_invalid:
            shown = "; ".join(f"{_where(i)}: {i.reason}" for i in invalid[:SHOWN_REJECTIONS])
            log.warning("%s: dropped %d invalid record(s) (drop.invalid.message): %s",
                        self._where(plan), len(invalid), shown)  # fmt: skip
            rejected = []
        if rejected and not self.tolerates:
            raise self._rejection(rejected, plan)  # before anything is written
        if ignored:
            log.debug(
                "%s: ignored %d null value(s) (behavior.on.null.values=ignore)", self._where(plan), ignored
            )
        if not self.schema_ignore:
            self._ensure_indices(actions, value_types, plan)
        for start in range(0, len(actions), self.batch_size):
            rejected.extend(self._send(actions[start : start + self.batch_size], plan))
            if rejected and not self.tolerates:
                break  # the task fails on them anyway: write no more of the batch
        if rejected:
            raise self._rejection(rejected, plan)

    def stager(self, plan: BatchPlan) -> TaskStager:
        """Each Spark task of a batch's job sends its own share's ``_bulk`` requests."""
        return TaskStager(type(self), dict(self.config), self.task_id, plan)

    def stage(self, records: pa.Table, plan: BatchPlan, partition: int) -> list[Rejected]:
        """Where a Spark task runs: ``write`` the share; the records OpenSearch refused."""
        try:
            self.write(records, plan)
        except RejectedRecordsError as exc:
            return list(exc.rejected)
        return []

    def write_staged(self, shares: Sequence[list[Rejected]], plan: BatchPlan) -> None:
        """Every share was sent by its task: what remains is to name the records refused."""
        rejected = [r for share in shares for r in share]
        if rejected:
            raise self._rejection(rejected, plan)

    def _rejection(self, rejected: Sequence[Rejected], plan: BatchPlan) -> RejectedRecordsError:
        lines = [f"{_where(r)}: {r.reason}" for r in rejected[:SHOWN_REJECTIONS]]
        more = f" (and {len(rejected) - SHOWN_REJECTIONS} more)" if len(rejected) > SHOWN_REJECTIONS else ""
        return RejectedRecordsError(
            f"connector {self.name!r}: {len(rejected)} record(s) of batch {plan.batch_id} cannot be "
            f"written to OpenSearch: {'; '.join(lines)}{more}",
            rejected,
        )

    def _send(self, actions: Sequence[Action], plan: BatchPlan) -> list[Rejected]:
        """One bulk request and its retries; the records OpenSearch refused."""
        import httpx

        pending = list(actions)
        rejected: list[Rejected] = []
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._pause(attempt)
            try:
                response = self.client.bulk(bulk_body(pending))
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            status = response.status_code
            if status in (401, 403):
                raise self._auth_error(status)
            if status == 429 or status >= 500:
                last = f"HTTP {status}: {response.text[:300]}"
                continue
            if status != 200:
                raise OpenSearchSinkError(
                    f"{self._where(plan)}: OpenSearch at {self._service()} refused the bulk request: "
                    f"HTTP {status}: {response.text[:300]}"
                )
            try:
                results = classify_response(response.json(), len(pending))
            except ValueError as exc:
                last = f"unreadable bulk response: {exc}"
                continue
            for action, result in zip(pending, results, strict=True):
                if result.outcome is Outcome.FATAL:
                    if result.status in (401, 403):
                        raise self._auth_error(result.status)
                    raise ConfigError([FieldError("topic.index.map", (
                        f"connector {self.name!r}: OpenSearch at {self._service()} cannot write index "
                        f"{action.index!r} ({_where(action)}): {result.reason}"))])  # fmt: skip
                if result.outcome is Outcome.REJECTED:
                    text = f"index {action.index!r} id {action.doc_id!r}: {result.reason}"
                    rejected.append(Rejected(action.topic, action.partition, action.offset, text))
            again = to_retry([(a.op, a.index, a.doc_id) for a in pending], results)
            if not again:
                return rejected
            first = results[again[0]]
            last = f"{len(again)} item(s) refused for now, first: HTTP {first.status} {first.reason}"
            pending = [pending[i] for i in again]
        raise OpenSearchSinkError(
            f"connector {self.name!r}: OpenSearch at {self._service()} did not take batch {plan.batch_id} "
            f"after {self.max_retries} retries (max.retries); the batch will be run again: {last}"
        )

    def _ensure_indices(
        self, actions: Sequence[Action], value_types: Mapping[str, pa.DataType], plan: BatchPlan
    ) -> None:
        """Create each new index with a mapping from its records' schema (``schema.ignore=false``);
        an index that exists is left as it is."""
        import httpx

        from sluice.connectors.opensearch.client import index_path
        from sluice.connectors.opensearch.mappings import index_mapping

        for index in sorted({a.index for a in actions if a.op != DELETE} - self._known_indices):
            mapping = index_mapping(value_types[index])
            if mapping is None:
                continue
            path = index_path(index)
            try:
                found = self.client.request("HEAD", path)
                if found.status_code == 404:
                    body = json.dumps({"mappings": mapping}).encode()
                    created = self.client.request("PUT", path, body=body)
                    if (
                        created.status_code not in (200, 201)
                        and "resource_already_exists" not in created.text
                    ):
                        if created.status_code in (401, 403):
                            raise self._auth_error(created.status_code)
                        raise OpenSearchSinkError(
                            f"{self._where(plan)}: OpenSearch at {self._service()} did not create index "
                            f"{index!r}: HTTP {created.status_code}: {created.text[:300]}"
                        )
                elif found.status_code in (401, 403):
                    raise self._auth_error(found.status_code)
                elif found.status_code != 200:
                    raise OpenSearchSinkError(
                        f"{self._where(plan)}: OpenSearch at {self._service()} answered HTTP "
                        f"{found.status_code} about index {index!r}"
                    )
            except httpx.TransportError as exc:
                raise OpenSearchSinkError(
                    f"{self._where(plan)}: OpenSearch at {self._service()} is unreachable: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            self._known_indices.add(index)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _where(r: Rejected | Invalid | Action) -> str:
    topic = f"topic {r.topic!r} " if r.topic else ""
    return f"{topic}queue {r.partition!r} offset {r.offset}"


class OpenSearchSinkConnector(SinkConnector):
    """Copies RocketMQ topics into OpenSearch indices: idempotent bulk writes, ids from the records."""

    plugin_name: ClassVar[str] = "opensearch-sink"
    config_def: ClassVar[ConfigDef] = cfg.FIELDS
    task_class: ClassVar[type[SinkTask]] = OpenSearchSinkTask

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        if not any(e.field == "connection.url" for e in errors):
            name = str(raw_config.get("name") or self.plugin_name)
            errors.extend(cfg.connector_errors(self.parse(raw_config), f"connector {name!r}")
                          if not errors else [])  # fmt: skip
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """``tasks.max`` tasks of one config; the runtime shares the topics' queues out by task id,
        and a key always goes to one queue, so each document is written by one task, in order."""
        return [dict(config) for _ in range(max_tasks)]
