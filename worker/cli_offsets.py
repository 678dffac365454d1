"""`sluice connector offsets get|alter|reset NAME`: a connector's committed positions, Kafka's way.

Offsets are in Kafka Connect's shape, ``[{"partition": {...}, "offset": {...}}]`` (its
``GET|PATCH|DELETE /connectors/{name}/offsets``), so a file written for Kafka's REST API is also
what ``alter`` reads. Altering and resetting are refused unless the connector is STOPPED (exit 5),
as in Kafka: a running task would overwrite them with its next commit.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sluice.worker import cli_render as render
from sluice.worker.cli_common import DebugOpt, Output, OutputOpt, begin, call
from sluice.worker.errors import UsageError

if TYPE_CHECKING:
    from sluice.worker.client import SluiceClient

app = typer.Typer(
    help="A connector's committed offsets: get, alter or reset (alter/reset need a STOPPED connector).",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

NameArg = Annotated[str, typer.Argument(help="the connector's name", metavar="NAME", show_default=False)]


def _show(name: str, offsets: list[dict[str, Any]], output: Output) -> None:
    if output == Output.JSON:
        render.print_json({"offsets": offsets})
    else:
        render.console().print(render.offsets_table(name, offsets))


@app.command()
def get(ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False) -> None:
    """The committed offset of each partition."""
    begin(ctx, debug)
    _show(name, call(lambda c: c.offsets(name)), output)


def read_offsets(path: str | None, partition: str | None, offset: str | None) -> list[dict[str, Any]]:
    """Offsets from a file (``{"offsets": [...]}`` or the bare list, JSON or YAML) or one pair."""
    if path and (partition or offset):
        raise UsageError("give either --file or --partition/--offset, not both")
    if partition is not None or offset is not None:
        if partition is None or offset is None:
            raise UsageError("--partition and --offset go together")
        return [{"partition": _json_arg("--partition", partition), "offset": _json_arg("--offset", offset)}]
    if not path:
        raise UsageError("give the offsets with --file FILE or --partition JSON --offset JSON")
    import yaml  # yaml (~10 ms): the CLI imports this module at start; only a file needs it

    try:
        with open(path) as f:
            loaded = yaml.safe_load(f)  # JSON is YAML
    except OSError as exc:
        raise UsageError(f"cannot read offsets file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(
            f"offsets file {path} is not valid JSON or YAML: {' '.join(str(exc).split())}"
        ) from exc
    entries = loaded.get("offsets") if isinstance(loaded, dict) else loaded
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("partition"), dict) and "offset" in e for e in entries
    ):
        raise UsageError(
            f'offsets file {path} must hold {{"offsets": [{{"partition": {{...}}, "offset": {{...}}}}, ...]}}'
        )
    return entries


def _json_arg(option: str, text: str) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f'{option} takes JSON, e.g. \'{{"filename": "/data/in.txt"}}\': {exc}') from exc
    if option == "--partition" and not isinstance(value, dict):
        raise UsageError(f"--partition takes a JSON object, got {text}")
    return value


@app.command()
def alter(
    ctx: typer.Context,
    name: NameArg,
    file: Annotated[
        str | None,
        typer.Option("--file", "-f", help='{"offsets": [{"partition":…, "offset":…}]} (JSON/YAML)'),
    ] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="one partition, as JSON")] = None,
    offset: Annotated[
        str | None, typer.Option("--offset", help="its new offset, as JSON (null removes it)")
    ] = None,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Set partitions' offsets (the connector must be STOPPED); prints the offsets after."""
    begin(ctx, debug)
    entries = read_offsets(file, partition, offset)

    async def run(client: SluiceClient) -> list[dict[str, Any]]:
        await client.alter_offsets(name, entries)
        return list(await client.offsets(name))

    _show(name, call(run), output)


@app.command()
def reset(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """Forget every committed offset (the connector must be STOPPED): it starts over when resumed."""
    begin(ctx, debug)

    async def run(client: SluiceClient) -> list[dict[str, Any]]:
        await client.reset_offsets(name)
        return list(await client.offsets(name))

    _show(name, call(run), output)
