"""A running pipeline's configs turned into what `sluice verify` compares (``pipelines.plan_pipeline``).

The configs come from the connectors' workflows as stored: their secrets sealed (``${sealed:…}``)
or referenced (``${env:…}``, ``${file:…}``). They are resolved here, in the caller's process, with
the caller's sealing key and environment, as a task activity resolves them; nothing resolved is
printed or stored. The source database's tables and columns are read from its catalog, named as
its connector names them (``table`` for the JDBC source in its URL's database, ``db.table`` for
MySQL's CDC, ``schema.table`` for PostgreSQL's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sluice.connectors.config import ConfigError
from sluice.connectors.secrets import SecretResolutionError, resolve_secrets
from sluice.worker.verify.model import VerifyError
from sluice.worker.verify.pipelines import (
    PipelinePlan,
    PipelineSide,
    copied_tables,
    plan_pipeline,
    source_url,
)

Provider = Callable[[str, str], str]
_MYSQL_SYSTEM: Final = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
_PG_SYSTEM: Final = frozenset({"pg_catalog", "information_schema"})


def _side(config: Mapping[str, Any], providers: Mapping[str, Provider]) -> PipelineSide:
    from sluice.connectors.plugins import PluginNotFoundError, load_connector_class
    from sluice.connectors.transforms import build_chain

    name = str(config.get("name") or "")
    try:
        resolved = _resolved(config, providers)
        cls = load_connector_class(str(config.get("connector.class") or ""))
        parsed = cls().parse({**resolved, "name": name})
        return PipelineSide(cls.plugin_name, parsed, build_chain(parsed))
    except (SecretResolutionError, PluginNotFoundError) as exc:
        raise VerifyError(f"connector {name!r}: {exc}") from None
    except ConfigError as exc:
        raise VerifyError(f"connector {name!r}: {'; '.join(e.message for e in exc.errors)}") from None


def catalog(side: PipelineSide) -> dict[str, list[str]]:
    """The source database's tables that ``side``'s connector copies, with their columns, named as
    the connector names them (the columns of only those: a shared server may hold thousands)."""
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.exc import SQLAlchemyError

    from sluice.connectors.jdbc.urls import engine_url

    url = engine_url(source_url(side))
    engine = create_engine(url)
    try:
        seen = inspect(engine)
        names: dict[str, tuple[str | None, str]]
        if side.plugin == "jdbc-source":
            names = {t: (None, t) for t in seen.get_table_names()}
        else:
            system = _MYSQL_SYSTEM if side.plugin == "mysql-cdc" else _PG_SYSTEM
            names = {
                f"{schema}.{t}": (schema, t)
                for schema in seen.get_schema_names()
                if schema not in system and not schema.startswith("pg_")
                for t in seen.get_table_names(schema=schema)
            }
        copied = [t for t in copied_tables(side, list(names)) if t in names]
        return {t: [c["name"] for c in seen.get_columns(names[t][1], schema=names[t][0])] for t in copied}
    except SQLAlchemyError as exc:
        where = f"{url.host}:{url.port}/{url.database or ''}"
        first = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise VerifyError(
            f"source database {where} (connector {side.config.get('name')!r}): {first}"
        ) from None
    finally:
        engine.dispose()


@dataclass(frozen=True)
class Pipeline:
    """A pipeline as `sluice verify` compares it: the plan, and the source side's config with its
    secrets resolved (``live`` reads the source's position with it)."""

    plan: PipelinePlan
    source_config: dict[str, Any]
    #: the source connector's name and the sink's (None: a direct pipeline, both in one)
    names: tuple[str, str | None]


def pipeline_from_configs(
    source: Mapping[str, Any], sink: Mapping[str, Any] | None, providers: Mapping[str, Provider]
) -> Pipeline:
    """A source connector and its sink, or one direct pipeline (``sink`` None)."""
    from sluice.connectors.direct import direct_sides, is_direct
    from sluice.connectors.transforms import Transform, build_chain

    between: list[Transform] = []
    direct = sink is None
    names = (str(source.get("name") or ""), None if sink is None else str(sink.get("name") or ""))
    if sink is None:
        if not is_direct(source):
            raise VerifyError(
                f"connector {source.get('name')!r} is not a direct pipeline: name the sink connector "
                "that reads its topics too (sluice verify SOURCE SINK)"
            )
        sides = direct_sides(source)
        name = str(source.get("name") or "")
        source, sink = {**sides.source, "name": name}, {**sides.sink, "name": name}
        between = build_chain(sides.chain)  # the pipeline's own, between the sides' (connectors.direct)
    source_side, sink_side = _side(source, providers), _side(sink, providers)
    plan = plan_pipeline(source_side, sink_side, catalog(source_side), between, direct=direct)
    return Pipeline(plan, _resolved(source, providers), names)


def _resolved(config: Mapping[str, Any], providers: Mapping[str, Provider]) -> dict[str, Any]:
    try:
        return resolve_secrets(config, providers)
    except SecretResolutionError as exc:
        raise VerifyError(f"connector {config.get('name')!r}: {exc}") from None
