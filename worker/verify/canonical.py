"""SQL that turns a column into one canonical text, the same in MariaDB and PostgreSQL for the same value.

The checksums are computed inside each database, so the normalisation ``sluice.worker.demo.
table_equality`` does in Python has to happen in SQL: both databases must print *byte-identical*
text for equal values, or every segment would differ. The text a column becomes is chosen by its
**kind** as read on the *source* side (``Kind``); each side's SQL for that kind is then chosen by
the column's *own* type on that side, so a source ``DECIMAL(10,2)`` compared with a target
``integer`` or ``numeric`` still prints ``10.5`` / ``10`` on both.

Canonical texts by kind:

- ``INTEGER`` and ``DECIMAL`` (exact numbers; PostgreSQL booleans and MariaDB ``BIT``/``BOOL`` are
  integers 0/1): plain decimal notation, no exponent, no trailing fractional zeros, no trailing
  ``.`` (``10.50`` -> ``10.5``, ``7.00`` -> ``7``). The two kinds print the same way, so an integer
  and a decimal holding the same value are equal. Nothing is rounded: a lost digit is a difference.
- ``FLOAT`` / ``DOUBLE`` (binary floating point): the value rounded to 6 / 15 significant digits
  (what ``FLT_DIG`` / ``DBL_DIG`` promise survives a decimal round trip, and what PostgreSQL's own
  float-to-numeric cast keeps), printed as a decimal without trailing zeros. Two floats that agree
  in those digits are equal; a value that sits exactly on a rounding tie of the last digit may
  round differently in the two engines (they round from different intermediate forms) and show as
  a difference. Values below 1e-30 in magnitude print as 0 in MariaDB (its DECIMAL has 30
  fractional digits). PostgreSQL's NaN and +/-Infinity print as ``NaN``/``Infinity``/``-Infinity``
  (MariaDB cannot hold them).
- ``INSTANT`` (DATETIME, TIMESTAMP, timestamptz): ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC: both
  sessions run at UTC (MariaDB ``time_zone = '+00:00'``, PostgreSQL ``TimeZone = UTC``), so a
  ``TIMESTAMP``/``timestamptz`` prints its UTC instant and a naive ``DATETIME``/``timestamp`` what
  it holds.
- ``DATE``: ``YYYY-MM-DD``; ``TIME``: ``HH:MM:SS.ffffff``.
- ``BINARY``: lower-case hex of the bytes.
- ``TEXT``: the characters as stored, in UTF-8 (MariaDB converts to ``utf8mb4`` first). Also what
  any type not named here becomes (its own text form, e.g. a UUID or an enum label).
- ``JSON``: the document's text as each database prints it. PostgreSQL's ``jsonb`` rewrites
  documents (key order, spacing, number forms), MariaDB keeps the text it was given: a ``jsonb``
  copy of MariaDB JSON is only equal when the text was already in ``jsonb``'s form. No JSON
  semantic comparison is attempted in SQL.

A NULL never equals any text: a value is marked ``=`` + text, a NULL is ``~`` (``marked``). A row's
text joins its marked columns with the ASCII unit separator (0x1F), which is taken not to appear
inside values (if it does, two rows could in principle join to the same text; the row-level compare
that follows a differing checksum compares column by column and is not affected).

Every function here is pure: it returns SQL text with identifiers quoted for its dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from sluice.connectors.jdbc.ddl import quote
from sluice.connectors.jdbc.urls import Dialect


class Kind(StrEnum):
    """How a column's values compare: decides the canonical text (module docstring)."""

    INTEGER = "integer"
    DECIMAL = "decimal"
    FLOAT = "float"  # single precision: 6 significant digits
    DOUBLE = "double"  # double precision: 15 significant digits
    INSTANT = "instant"
    DATE = "date"
    TIME = "time"
    BINARY = "binary"
    TEXT = "text"
    JSON = "json"


@dataclass(frozen=True)
class Column:
    """One column of one side, as its information_schema describes it."""

    name: str
    data_type: str  # information_schema.columns.data_type, lower case
    scale: int | None = None  # numeric_scale: decimals only
    nullable: bool = True
    charset: str | None = None  # character_set_name: MariaDB text columns only


#: Field separator of a row's canonical text (see the module docstring).
SEPARATOR: Final = "\x1f"
NULL_MARK: Final = "~"
VALUE_MARK: Final = "="

_MARIADB_KINDS: Final = {
    **dict.fromkeys(
        ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit", "bool", "boolean"),
        Kind.INTEGER,
    ),
    **dict.fromkeys(("decimal", "numeric", "dec", "fixed"), Kind.DECIMAL),
    "float": Kind.FLOAT,
    **dict.fromkeys(("double", "double precision", "real"), Kind.DOUBLE),
    **dict.fromkeys(("datetime", "timestamp"), Kind.INSTANT),
    "date": Kind.DATE,
    "time": Kind.TIME,
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), Kind.BINARY),
    "json": Kind.JSON,
}
_PG_KINDS: Final = {
    **dict.fromkeys(("smallint", "integer", "bigint", "boolean"), Kind.INTEGER),
    "numeric": Kind.DECIMAL,
    "real": Kind.FLOAT,
    "double precision": Kind.DOUBLE,
    **dict.fromkeys(("timestamp without time zone", "timestamp with time zone"), Kind.INSTANT),
    "date": Kind.DATE,
    "time without time zone": Kind.TIME,
    "bytea": Kind.BINARY,
    **dict.fromkeys(("json", "jsonb"), Kind.JSON),
}
#: Types whose values are character strings (compared by code point in ranges: checksums.key_sql).
MARIADB_TEXT_TYPES: Final = frozenset(
    ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json")
)
PG_TEXT_TYPES: Final = frozenset(("text", "character varying", "character", "name"))
_SIGNIFICANT: Final = {Kind.FLOAT: 6, Kind.DOUBLE: 15}


def kind_of(dialect: Dialect, data_type: str) -> Kind:
    """The kind a column of ``data_type`` (information_schema's name) compares as."""
    kinds = _MARIADB_KINDS if dialect is Dialect.MYSQL else _PG_KINDS
    return kinds.get(data_type.lower(), Kind.TEXT)


def table_sql(dialect: Dialect, table: str) -> str:
    """A table name, ``schema.table`` or ``table``, quoted part by part."""
    return ".".join(quote(dialect, part) for part in table.split(".", 1))


def is_text_type(dialect: Dialect, data_type: str) -> bool:
    return data_type.lower() in (MARIADB_TEXT_TYPES if dialect is Dialect.MYSQL else PG_TEXT_TYPES)


def value_sql(dialect: Dialect, column: Column, kind: Kind, *, in_text: bool = False) -> str:
    """SQL for ``column``'s canonical text under ``kind`` (NULL stays NULL: see ``marked``).

    ``in_text``: the expression is an argument of a text concatenation (``row_sql``). MariaDB's
    CONCAT prints a number or a date/time itself, as CAST(... AS CHAR) would, at half the cost of
    the CAST: the outer CAST is left out. Same text either way; the CAST is there when the value is
    fetched, so that the driver returns text.
    """
    c = quote(dialect, column.name)
    if dialect is Dialect.MYSQL:
        expr, is_text = _mariadb_value(c, column, kind)
        return expr if is_text or in_text else f"CAST({expr} AS CHAR)"
    return _pg_value(c, column, kind)


def marked(dialect: Dialect, value: str) -> str:
    """``value`` (a canonical text expression) marked so that NULL differs from every text."""
    if dialect is Dialect.MYSQL:
        return f"COALESCE(CONCAT('{VALUE_MARK}', {value}), '{NULL_MARK}')"
    return f"COALESCE('{VALUE_MARK}' || {value}, '{NULL_MARK}')"


def row_sql(dialect: Dialect, marked_values: list[str]) -> str:
    """The row's canonical text: its marked column texts joined by ``SEPARATOR``."""
    func = "CONCAT_WS" if dialect is Dialect.MYSQL else "concat_ws"
    return f"{func}('{SEPARATOR}', {', '.join(marked_values)})"


def unmark(text: str) -> str | None:
    """The canonical value a marked text stands for (None: NULL)."""
    return None if text == NULL_MARK else text[len(VALUE_MARK) :]


# --- MariaDB -------------------------------------------------------------------------------------

_MARIADB_TRIM: Final = "TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {}))"


def _mariadb_text(c: str, column: Column) -> str:
    # utf8mb4_bin: every text column gets the same explicit collation, so CONCAT_WS never meets an
    # "illegal mix of collations" between columns declared with different ones. A column in another
    # character set is converted first (the hash is of UTF-8 bytes on both sides).
    if (column.charset or "").lower() == "utf8mb4":
        return f"{c} COLLATE utf8mb4_bin"
    return f"CONVERT({c} USING utf8mb4) COLLATE utf8mb4_bin"


def _mariadb_round(c: str, digits: int) -> str:
    """``c`` rounded to ``digits`` significant digits, as a trimmed decimal (the float rule). The
    outer DECIMAL(65,30) keeps a '.' in the text for the trim whatever scale ROUND returned."""
    rounded = (
        f"CAST(ROUND(CAST({c} AS DECIMAL(65,30)), {digits - 1} - FLOOR(LOG10(ABS({c})))) AS DECIMAL(65,30))"
    )
    return f"CASE WHEN {c} = 0 THEN '0' ELSE {_MARIADB_TRIM.format(f'CAST({rounded} AS CHAR)')} END"


def _mariadb_value(c: str, column: Column, kind: Kind) -> tuple[str, bool]:
    """The canonical value's SQL, and whether it is text already (else a number or a date/time
    whose printed form is the canonical text)."""
    own_type = column.data_type.lower()
    own = kind_of(Dialect.MYSQL, own_type)
    if kind in (Kind.INTEGER, Kind.DECIMAL):
        if own is Kind.INTEGER:
            return (f"CAST({c} AS UNSIGNED)" if own_type == "bit" else c), False
        if own is Kind.DECIMAL:  # TRIM reads the decimal as text itself
            return (_MARIADB_TRIM.format(c), True) if (column.scale or 0) > 0 else (c, False)
        if own in _SIGNIFICANT:
            return _mariadb_round(c, _SIGNIFICANT[own]), True
    elif kind in _SIGNIFICANT:
        if own in (Kind.INTEGER, Kind.DECIMAL, Kind.FLOAT, Kind.DOUBLE):
            return _mariadb_round(c, _SIGNIFICANT[kind]), True
    elif kind is Kind.INSTANT:
        if own in (Kind.INSTANT, Kind.DATE):
            return f"CAST({c} AS DATETIME(6))", False
    elif kind is Kind.DATE:
        if own in (Kind.INSTANT, Kind.DATE):
            return f"DATE_FORMAT({c}, '%Y-%m-%d')", True
    elif kind is Kind.TIME:
        if own in (Kind.TIME, Kind.INSTANT):
            return f"TIME_FORMAT({c}, '%H:%i:%s.%f')", True
    elif kind is Kind.BINARY:
        return (f"LOWER(HEX({c}))" if own is Kind.BINARY else f"LOWER(HEX(CONVERT({c} USING utf8mb4)))"), True
    # TEXT, JSON, and any kind the column's own type can't be read as: its text.
    if own is Kind.BINARY or own_type in MARIADB_TEXT_TYPES:
        return _mariadb_text(c, column), True
    return c, False


# --- PostgreSQL ----------------------------------------------------------------------------------

_PG_SPECIAL = "('NaN', 'Infinity', '-Infinity')"


def _pg_round(c: str, digits: int) -> str:
    """``c`` rounded to ``digits`` significant digits, as a trimmed decimal (the float rule)."""
    n = f"{c}::numeric"
    return (
        f"CASE WHEN {c} = 0 THEN '0' WHEN {c}::text IN {_PG_SPECIAL} THEN {c}::text "
        f"ELSE trim_scale(round({n}, {digits - 1} - floor(log(abs({n})))::int))::text END"
    )


def _pg_value(c: str, column: Column, kind: Kind) -> str:
    own_type = column.data_type.lower()
    own = kind_of(Dialect.POSTGRESQL, own_type)
    if kind in (Kind.INTEGER, Kind.DECIMAL):
        if own is Kind.INTEGER:
            return f"{c}::int::text" if own_type == "boolean" else f"{c}::text"
        if own is Kind.DECIMAL:
            return f"trim_scale({c})::text"
        if own in _SIGNIFICANT:  # PostgreSQL's own cast keeps 6 (real) / 15 (double) digits
            return (
                f"CASE WHEN {c}::text IN {_PG_SPECIAL} THEN {c}::text ELSE trim_scale({c}::numeric)::text END"
            )
    elif kind in _SIGNIFICANT:
        if own in (Kind.INTEGER, Kind.DECIMAL, Kind.FLOAT, Kind.DOUBLE) and own_type != "boolean":
            return _pg_round(c, _SIGNIFICANT[kind])
    elif kind is Kind.INSTANT:
        if own is Kind.INSTANT:
            return f"to_char({c}, 'YYYY-MM-DD HH24:MI:SS.US')"
        if own is Kind.DATE:
            return f"to_char({c}::timestamp, 'YYYY-MM-DD HH24:MI:SS.US')"
    elif kind is Kind.DATE:
        if own is Kind.INSTANT:
            return f"to_char({c}, 'YYYY-MM-DD')"
        if own is Kind.DATE:
            return f"to_char({c}::timestamp, 'YYYY-MM-DD')"
    elif kind is Kind.TIME:
        if own is Kind.TIME:
            return f"to_char({c}::interval, 'HH24:MI:SS.US')"
        if own is Kind.INSTANT:
            return f"to_char({c}, 'HH24:MI:SS.US')"
    elif kind is Kind.BINARY:
        return (
            f"encode({c}, 'hex')" if own is Kind.BINARY else f"encode(convert_to({c}::text, 'UTF8'), 'hex')"
        )
    if own is Kind.BINARY:
        return f"convert_from({c}, 'UTF8')"
    return f"{c}::text"
