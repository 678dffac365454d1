"""Spark SQL as a transform: a full ``statement`` over a view named ``records``, or ``filter`` /
``select`` expressions.

Temp views are session-wide and several tasks may share a worker's SparkSession, so the view is
registered, the statement analysed (classic Spark analyses eagerly, binding the view's plan) and the
view dropped, all under one process lock.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.records import keep_where
from sluice.connectors.transforms.base import SparkTransform, register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

VIEW = "records"
_view_lock = threading.Lock()


@register("sql", "Sql", "SqlTransform", keyed=False)
class SqlTransform(SparkTransform):
    """Options: ``statement`` (``SELECT ... FROM records``), or ``filter`` (keep rows where true) and/or
    ``select`` (a select list over ``records``, e.g. ``*, upper(value) AS value``... the output must keep
    the record columns)."""

    options_def = ConfigDef(
        (
            ConfigField("statement", str, "", doc="SELECT over the view 'records'"),
            ConfigField("filter", str, "", doc="boolean expression; rows where it is not true are dropped"),
            ConfigField("select", str, "", doc="select list over 'records'"),
        )
    )

    def check(self) -> list[str]:
        statement, filt, select = (self.options[k].strip() for k in ("statement", "filter", "select"))
        if statement and (filt or select):
            return ["option 'statement' cannot be combined with 'filter'/'select'"]
        if not (statement or filt or select):
            return ["set option 'statement', or 'filter' and/or 'select'"]
        return []

    def _query(self, df: DataFrame, statement: str) -> DataFrame:
        spark = df.sparkSession
        with _view_lock:
            df.createOrReplaceTempView(VIEW)
            try:
                result = spark.sql(statement)
                result.schema  # noqa: B018 - force analysis while the view exists
            except Exception as exc:
                raise ValueError(f"{self.where}: Spark SQL failed: {exc}") from exc
            finally:
                spark.catalog.dropTempView(VIEW)
        return _last_of_each_name(result)

    def apply_frame(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        statement = self.options["statement"].strip()
        if statement:
            return self._query(df, statement)
        if self.options["filter"].strip():
            try:
                df = keep_where(df, F.expr(self.options["filter"]))
                df.schema  # noqa: B018
            except Exception as exc:
                raise ValueError(f"{self.where}: bad 'filter' expression: {exc}") from exc
        if self.options["select"].strip():
            df = self._query(df, f"SELECT {self.options['select']} FROM {VIEW}")
        return df


def _last_of_each_name(df: DataFrame) -> DataFrame:
    """``df`` with one column per name: a later column replaces an earlier one of its name, in the
    earlier one's place (``select: "*, upper(value) AS value"`` rewrites the value, as it reads)."""
    names = df.columns
    if len(set(names)) == len(names):
        return df
    from pyspark.sql import functions as F

    last = {name: i for i, name in enumerate(names)}
    renamed = df.toDF(*[f"_c{i}" for i in range(len(names))])
    firsts = dict.fromkeys(names)
    return renamed.select(*[F.col(f"_c{last[name]}").alias(name) for name in firsts])
