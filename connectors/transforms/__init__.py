"""Single message transforms as DataFrame -> DataFrame steps, configured the Kafka Connect way.

Config shape (Kafka's)::

    transforms=addSource,onlyOrders
    transforms.addSource.type=InsertField$Value
    transforms.addSource.static.field=source
    transforms.addSource.static.value=erp
    transforms.onlyOrders.type=Filter
    transforms.onlyOrders.predicate=isNotOrders
    predicates=isNotOrders
    predicates.isNotOrders.type=TopicNameMatches
    predicates.isNotOrders.pattern=orders.*
    transforms.onlyOrders.negate=true

Types are looked up by short name (``insert-field``), Kafka-style name (``InsertField$Value``), full
Kafka class name (``org.apache.kafka.connect.transforms.InsertField$Value``) or a third-party entry
point in the ``sluice.transforms`` group. Each transform is a stage over a batch's records in Arrow
(``ArrowTransform``: ``apply_chain`` runs them, wherever the batch runs) or, for Spark SQL, a stage
that runs in the batch's Spark job (``SparkTransform``: activities.spark_binding runs a chain that
holds one). Records a transform cannot handle are flagged in ``_sluice_error``
(connectors.record_tables) rather than dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.config import ConfigError, FieldError, split_list
from sluice.connectors.discovery import (
    PluginNotFoundError,
    import_path,
    looks_like_path,
    transform_entry_points,
)
from sluice.connectors.envelopes import Narrow
from sluice.connectors.record_tables import check_record_table

# The built-in transforms register themselves on import (cheap: they import pyspark only when used).
from sluice.connectors.transforms import extract_new_record_state, fields, filter, route, sql  # noqa: F401
from sluice.connectors.transforms.base import (
    REGISTRY,
    ArrowTransform,
    NotFollowable,
    PrunesValue,
    RecordShape,
    SparkTransform,
    Transform,
    TransformFactory,
    register,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ArrowTransform",
    "NotFollowable",
    "PrunesValue",
    "RecordShape",
    "SparkTransform",
    "Transform",
    "TransformFactory",
    "apply_chain",
    "arrow_head",
    "build_chain",
    "chain_errors",
    "create_transform",
    "known_transforms",
    "load_transform_class",
    "register",
    "runs_in_arrow",
    "transform_options",
    "value_read",
]

_KAFKA_PACKAGES: Final = ("org.apache.kafka.connect.transforms.", "org.apache.rocketmq.connect.transforms.")


def known_transforms() -> list[str]:
    return sorted({*REGISTRY, *transform_entry_points()})


def load_transform_class(
    name: str, known: Iterable[str] = (), extra: Iterable[EntryPoint] | None = None
) -> type[Transform]:
    """A third-party transform class by entry point name or dotted path (built-ins are in the registry).

    A ``$Key``/``$Value`` suffix selects the variant and is not part of the entry point name.
    """
    key = name.strip()
    base = key.partition("$")[0]
    eps = transform_entry_points(extra)
    try:
        if key in eps:
            cls = eps[key].load()
        elif base in eps:
            cls = eps[base].load()
        elif looks_like_path(base):
            cls = import_path(base)
        else:
            listed = sorted({*known, *eps})
            raise PluginNotFoundError(f"unknown transform type {key!r}; known: {', '.join(listed)}")
    except (ImportError, AttributeError) as exc:
        raise PluginNotFoundError(f"transform {key!r} cannot be loaded: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Transform)):
        raise PluginNotFoundError(f"transform {key!r} resolves to {cls!r}, which is not a Transform subclass")
    return cls


def create_transform(type_name: str) -> Transform:
    """A new, unconfigured transform for a registered name; unknown names list the known ones."""
    name = type_name.strip()
    for prefix in _KAFKA_PACKAGES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if name in REGISTRY:
        return REGISTRY[name]()
    found = load_transform_class(type_name, known=sorted(REGISTRY))
    base, _, variant = name.partition("$")
    return found("key" if variant == "Key" else "value")


def transform_options(config: Mapping[str, Any], alias: str) -> dict[str, Any]:
    """``transforms.<alias>.*`` options (no ``type``); a named predicate is inlined as ``predicate.*``."""
    prefix = f"transforms.{alias}."
    options = {
        k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix) and k != f"{prefix}type"
    }
    predicate = options.get("predicate")
    if isinstance(predicate, str) and predicate.strip():
        name = predicate.strip()
        declared = _list(config.get("predicates", ""))
        pprefix = f"predicates.{name}."
        if name not in declared or f"{pprefix}type" not in config:
            raise ConfigError(
                [
                    FieldError(
                        f"transforms.{alias}.predicate",
                        f"transform {alias!r}: predicate {name!r} is not declared in 'predicates' "
                        f"with a 'predicates.{name}.type'",
                    )
                ]
            )
        del options["predicate"]
        options.update(
            {f"predicate.{k[len(pprefix) :]}": v for k, v in config.items() if k.startswith(pprefix)}
        )
    return options


def _list(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return split_list(str(value or ""))


def build_chain(config: Mapping[str, Any]) -> list[Transform]:
    """The configured transforms in order; raises ConfigError listing every bad alias/option."""
    chain: list[Transform] = []
    errors: list[FieldError] = []
    for alias in _list(config.get("transforms", "")):
        type_key = f"transforms.{alias}.type"
        type_name = str(config.get(type_key) or "").strip()
        if not type_name:
            errors.append(FieldError(type_key, f"transform {alias!r}: {type_key!r} is required"))
            continue
        try:
            transform = create_transform(type_name)
            options = transform_options(config, alias)
            if any(k.startswith("predicate.") for k in options) and not transform.accepts_predicate:
                raise ConfigError(
                    [
                        FieldError(
                            f"transforms.{alias}.predicate",
                            f"transform {alias!r}: predicates are only supported on Filter",
                        )
                    ]
                )
            chain.append(transform.configure(alias, options))
        except ConfigError as exc:
            errors.extend(exc.errors)
        except (LookupError, ValueError) as exc:
            errors.append(FieldError(type_key, f"transform {alias!r}: {exc}"))
    if errors:
        raise ConfigError(errors)
    return chain


def chain_errors(config: Mapping[str, Any], owner: str = "") -> list[FieldError]:
    """The problems ``build_chain`` would raise, prefixed with ``owner`` (for Connector.validate)."""
    try:
        build_chain(config)
    except ConfigError as exc:
        return [FieldError(e.field, f"{owner}: {e.message}" if owner else e.message) for e in exc.errors]
    return []


def value_read(chain: Sequence[Transform]) -> Narrow | None:
    """What of a record value the chain reads: its first transform's ``PrunesValue``, or None
    (all of it; the chain is empty, or starts with a transform that reads the value whole)."""
    first = chain[0] if chain else None
    return first.value_read if isinstance(first, PrunesValue) else None


def runs_in_arrow(chain: Sequence[Transform]) -> bool:
    """Whether every transform of the chain is an Arrow stage (no Spark SQL in it)."""
    return all(isinstance(t, ArrowTransform) for t in chain)


def arrow_head(chain: Sequence[Transform]) -> list[Transform]:
    """The chain's Arrow stages before its first Spark SQL transform: a sink's stages run these,
    and the rest, from the Spark SQL transform on, over a DataFrame of their records
    (activities.spark_binding.chain_frame)."""
    head: list[Transform] = []
    for transform in chain:
        if not isinstance(transform, ArrowTransform):
            break
        head.append(transform)
    return head


def apply_chain(chain: Sequence[Transform], records: pa.Table) -> pa.Table:
    """Each transform in order over a batch's records in Arrow, checking after each that the record
    columns survived. Every transform must be an Arrow stage (``runs_in_arrow``): a chain with
    Spark SQL runs in the batch's Spark job (activities.spark_binding.chain_frame)."""
    for transform in chain:
        if not isinstance(transform, ArrowTransform):
            raise TypeError(f"{transform.where} runs in Spark, not on an Arrow batch")
        records = transform.apply(records)
        check_record_table(records, transform.where)
    return records


def reshape_chain(chain: Sequence[Transform], shape: RecordShape) -> RecordShape:
    """``shape`` as each transform of the chain leaves it, in order (``Transform.reshape``);
    raises NotFollowable naming the first transform that cannot be followed."""
    for transform in chain:
        shape = transform.reshape(shape)
    return shape
