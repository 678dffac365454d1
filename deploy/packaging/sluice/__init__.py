"""The ``sluice`` package: ``from sluice import Client`` (the light client), ``sluice.<folder>`` (the rest).

pyproject.toml maps the repository's folders under this package (``sluice.worker`` is ``worker/``,
``sluice.connectors`` is ``connectors/`` …), in the editable install and the wheel alike, so code,
tests and installed users import one name. The light client's public names are defined in
:mod:`sluice.worker.api`; they are looked up lazily here so that importing any ``sluice.…`` module
(the worker, the workflow sandbox, the CLI) does not import the client as a side effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.worker.api import *  # noqa: F403  (the names mypy and editors see)


def __getattr__(name: str) -> Any:
    from sluice.worker import api  # on first use: importing sluice.<folder> must not import the client

    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'sluice' has no attribute {name!r}")


def __dir__() -> list[str]:
    from sluice.worker import api  # see __getattr__

    return sorted([*globals(), *api.__all__])
