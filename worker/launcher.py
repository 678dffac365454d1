"""The ``sluice`` console script: the CLI, or one line saying it needs the worker extras.

The script is installed with every wheel, but the CLI (Typer, Rich, pydantic settings …) comes
with ``pip install 'sluice[worker]'``; a light install gets this sentence instead of a traceback.
"""

from __future__ import annotations

import sys

_OURS = {"sluice"}


def entry() -> None:
    try:
        from sluice.worker.cli import entry as cli_entry  # here: a light install lacks the CLI's packages
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if not missing or missing in _OURS:
            raise
        print(
            f"sluice: the command line needs the worker extras ({missing} is not installed): "
            "pip install 'sluice[worker]'",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    cli_entry()
