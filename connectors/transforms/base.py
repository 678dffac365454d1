"""The base of every transform and the registry of built-in names.

Apart from the package so the built-in transform modules (fields, filter, route, sql) and the
package itself import it, not each other: the package imports the built-ins to register them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, runtime_checkable

from sluice.connectors.config import ConfigDef, ConfigError, FieldError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType


@dataclass(frozen=True)
class RecordShape:
    """A record as a pipeline's transforms leave it, for ``sluice verify`` to pair each target
    column with the source column it came from: its topic, and each value field with its source
    column (None: made by a transform, such as an inserted field: nothing in the source to compare)."""

    topic: str
    fields: tuple[tuple[str, str | None], ...]

    def renamed(self, names: Mapping[str, str | None]) -> RecordShape:
        """Fields renamed by ``names`` (a name mapped to None is dropped)."""
        out = []
        for name, origin in self.fields:
            new = names.get(name, name)
            if new is not None:
                out.append((new, origin))
        return replace(self, fields=tuple(out))

    def added(self, *names: str) -> RecordShape:
        """``names`` appended (or replacing a field of the same name) with no source column."""
        kept = tuple((n, o) for n, o in self.fields if n not in names)
        return replace(self, fields=kept + tuple((n, None) for n in names))


class NotFollowable(ValueError):
    """A transform whose effect on a record cannot be followed back to the source's columns."""


class Transform(ABC):  # noqa: B024 - the two kinds below declare how a transform runs
    """One step of a chain. Lifecycle: 1. construct (``target`` "value" or "key"); 2. ``configure``;
    3. applied per batch (pure: same input, same output).

    A transform is one of two kinds: an :class:`ArrowTransform` (every built-in but SQL: a stage
    over the batch's records in Arrow, run wherever the batch runs), or a :class:`SparkTransform`
    (Spark SQL, Spark by nature: it runs in the batch's Spark job)."""

    options_def: ClassVar[ConfigDef] = ConfigDef(())
    #: which options may come from a predicate (only Filter takes predicates)
    accepts_predicate: ClassVar[bool] = False

    def __init__(self, target: str = "value") -> None:
        self.target = target
        self.alias = ""
        self.options: dict[str, Any] = {}

    @property
    def where(self) -> str:
        return f"transform {self.alias!r} ({type(self).__name__}${self.target.capitalize()})"

    def configure(self, alias: str, options: Mapping[str, Any]) -> Transform:
        """Validate and keep ``options``; raises ConfigError naming the transform and option."""
        self.alias = alias
        self.options = self.options_def.with_owner(f"transform {alias!r}").parse(options)
        problems = self.check()
        if problems:
            raise ConfigError(
                [FieldError(f"transforms.{alias}", f"transform {alias!r}: {p}") for p in problems]
            )
        return self

    def check(self) -> list[str]:
        """Cross-option checks after parsing; return messages (without the alias)."""
        return []

    def reshape(self, shape: RecordShape) -> RecordShape:
        """What this transform makes of a record's topic and value fields (``RecordShape``). A
        transform on the record key leaves them as they are; one that changes values in a way no
        column-by-column compare can follow (a filter, an extracted or hoisted field, SQL) raises
        NotFollowable naming itself, and those that can override this."""
        if self.target == "key":
            return shape
        raise NotFollowable(
            f"{self.where}: its effect on a record cannot be followed back to the source's columns "
            f"(follows: {', '.join(FOLLOWABLE)})"
        )


class ArrowTransform(Transform):
    """A transform over a batch's records in Arrow (connectors.record_tables): records it cannot
    handle are flagged (``record_tables.flag``), never dropped; its output schema depends only on
    its input schema, so a Spark job can declare it before any row is seen."""

    @abstractmethod
    def apply(self, records: pa.Table) -> pa.Table:
        """The transformed records."""


class SparkTransform(Transform):
    """A transform that is Spark by nature (Spark SQL): it runs on the batch's records as a
    DataFrame, in the batch's Spark job (activities.spark_binding)."""

    @abstractmethod
    def apply_frame(self, records: DataFrame) -> DataFrame:
        """The transformed records."""


@runtime_checkable
class PrunesValue(Protocol):
    """Optional ability: the transform reads only part of the record value it is given.

    When the first transform of a chain has it, the converter decodes only that part of each
    value (Debezium's ``ExtractNewRecordState`` reads an event's ``after`` and ``op``, not its
    ``before`` nor ``source``: two thirds of a change event's payload need not be parsed)."""

    def value_read(self, value_type: DataType) -> DataType:
        """The part of ``value_type`` that ``apply`` reads: the same type with fewer struct fields,
        or ``value_type`` itself when all of it is read."""
        ...


#: the built-ins that override ``Transform.reshape`` (named in NotFollowable's message)
FOLLOWABLE: Final = (
    "InsertField", "ReplaceField", "MaskField", "Cast", "Flatten", "ValueToKey", "RegexRouter",
    "TopicRename", "ExtractNewRecordState",
)  # fmt: skip

TransformFactory = Callable[[], Transform]

#: built-in transforms by every name they answer to (filled by :func:`register`)
REGISTRY: Final[dict[str, TransformFactory]] = {}


def register(*names: str, keyed: bool = True) -> Callable[[type[Transform]], type[Transform]]:
    """Class decorator: register names; a Kafka-style ``Name`` also gets ``Name$Value`` and, if
    ``keyed``, ``Name$Key``. A name ending in ``$Key`` builds the key variant."""

    def decorate(cls: type[Transform]) -> type[Transform]:
        for name in names:
            REGISTRY[name] = partial(cls, "key" if name.endswith("$Key") else "value")
            if "$" not in name and name[:1].isupper():
                REGISTRY[f"{name}$Value"] = partial(cls, "value")
                if keyed:
                    REGISTRY[f"{name}$Key"] = partial(cls, "key")
        return cls

    return decorate
