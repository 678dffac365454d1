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
point in the ``sluice.transforms`` group. Each transform works on whole columns, so a chain is one
Spark plan; rows a transform cannot handle are flagged in ``_sluice_error`` (connectors.records)
rather than dropped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from connectors.config import ConfigDef, ConfigError, FieldError, split_list

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Transform(ABC):
    """One step of a chain. Lifecycle: 1. construct (``target`` "value" or "key"); 2. ``configure``;
    3. ``apply`` per batch (pure: same input, same output)."""

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

    @abstractmethod
    def apply(self, df: DataFrame) -> DataFrame:
        """The transformed records."""


TransformFactory = Callable[[], Transform]

_REGISTRY: dict[str, TransformFactory] = {}
_KAFKA_PACKAGES = ("org.apache.kafka.connect.transforms.", "org.apache.rocketmq.connect.transforms.")


def register(*names: str, keyed: bool = True) -> Callable[[type[Transform]], type[Transform]]:
    """Class decorator: register names; a Kafka-style ``Name`` also gets ``Name$Value`` and, if
    ``keyed``, ``Name$Key``. A name ending in ``$Key`` builds the key variant."""

    def decorate(cls: type[Transform]) -> type[Transform]:
        for name in names:
            _REGISTRY[name] = partial(cls, "key" if name.endswith("$Key") else "value")
            if "$" not in name and name[:1].isupper():
                _REGISTRY[f"{name}$Value"] = partial(cls, "value")
                if keyed:
                    _REGISTRY[f"{name}$Key"] = partial(cls, "key")
        return cls

    return decorate


def _load_builtins() -> None:
    # Importing registers; kept lazy so importing this package stays cheap.
    from connectors.transforms import fields, filter, route, sql  # noqa: F401


def known_transforms() -> list[str]:
    _load_builtins()
    from connectors.plugins import transform_entry_points

    return sorted({*_REGISTRY, *transform_entry_points()})


def create_transform(type_name: str) -> Transform:
    """A new, unconfigured transform for a registered name; unknown names list the known ones."""
    _load_builtins()
    name = type_name.strip()
    for prefix in _KAFKA_PACKAGES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if name in _REGISTRY:
        return _REGISTRY[name]()
    from connectors.plugins import load_transform_class

    found = load_transform_class(type_name, known=sorted(_REGISTRY))
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


def apply_chain(chain: list[Transform], df: DataFrame) -> DataFrame:
    """Apply each transform in order, checking record columns survive each step."""
    from connectors.records import check_record_columns

    for transform in chain:
        df = transform.apply(df)
        check_record_columns(df, transform.where)
    return df
