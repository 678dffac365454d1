"""The `sluice` command line: the local stack, the worker, and connectors."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from worker.settings import settings, settings_or_exit

if TYPE_CHECKING:
    from temporalio.runtime import Runtime


EXIT_CODES_HELP = """exit codes:
  0  ok                     4  connector already exists
  1  unexpected error       5  not allowed in the connector's current state
  2  usage / invalid config 6  Temporal unreachable
  3  connector not found    7  the connector did not answer (no worker?)
                            130 interrupted"""


DEBUG_HELP = "on an error, print its traceback too (normally one line)"


def _stack(args: argparse.Namespace) -> int:
    from deploy.local import stack
    from deploy.local.process import StackError

    cfg = settings().stack
    try:
        if args.action == "up":
            statuses = stack.up(cfg)
        elif args.action == "down":
            stack.down(cfg)
            print("stack stopped; state kept in", cfg.state_dir)
            return 0
        else:
            statuses = stack.status(cfg)
    except StackError as exc:
        print(f"sluice stack {args.action}: {exc}", file=sys.stderr)
        return 1
    healthy = all(s.healthy for s in statuses)
    if args.output == "json":
        print(json.dumps({"healthy": healthy, "services": stack.status_as_dicts(statuses)}, indent=2))
    else:
        for s in statuses:
            print(f"{s.name:<18} {'up' if s.healthy else 'DOWN':<5} {s.address}")
        print(f"Temporal UI: {cfg.temporal_ui_url}")
    return 0 if healthy else 1


def _mqadmin(args: argparse.Namespace) -> int:
    from deploy.local.rocketmq import mqadmin

    result = mqadmin(settings().stack, *args.args)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


def _keygen(args: argparse.Namespace) -> int:
    from cryptography.fernet import Fernet

    print(Fernet.generate_key().decode())
    return 0


def _worker(args: argparse.Namespace) -> int:
    from worker.main import main as worker_main

    worker_main()
    return 0


def _rest(args: argparse.Namespace) -> int:
    from worker.rest.server import serve

    return serve(args.host, args.port)


def _parse_config(args: argparse.Namespace) -> dict[str, str]:
    """The config from ``--config-file`` and ``--set``; a malformed one is a UsageError naming it."""
    from worker.errors import UsageError

    config: dict[str, str] = {}
    if args.config_file:
        try:
            with open(args.config_file) as f:
                loaded = json.load(f)
        except OSError as exc:
            raise UsageError(f"cannot read config file {args.config_file}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise UsageError(f"config file {args.config_file} is not valid JSON: {exc}") from exc
        body = loaded.get("config", loaded) if isinstance(loaded, dict) else loaded
        if not isinstance(body, dict):
            raise UsageError(
                f'config file {args.config_file} must hold a JSON object (or {{"config": {{...}}}})'
            )
        config.update({str(k): str(v) for k, v in body.items()})
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}")
        config[key] = value
    return config


def _print_status(status: object) -> None:
    from dataclasses import asdict

    from connectors.secrets import redact

    report = asdict(status)  # type: ignore[call-overload]
    report["config"] = redact(report["config"])
    if isinstance(report.get("task_configs"), list):
        report["task_configs"] = [redact(c) for c in report["task_configs"]]
    print(json.dumps(report, indent=2, default=str))


async def _connector_async(args: argparse.Namespace, runtime: Runtime) -> None:
    """One connector command; errors propagate as worker.errors types (mapped in ``main``)."""
    from connectors.secrets import redact
    from worker.client import SluiceClient

    # Parse the command line before connecting: a usage error needs no Temporal.
    config = _parse_config(args) if args.action in ("create", "reconfigure") else {}
    env = settings()
    client = await SluiceClient.connect(
        env.temporal_address, env.temporal_namespace, env.task_queue, runtime=runtime
    )
    name: str = getattr(args, "name", "")
    if args.action == "list":
        for n in await client.list():
            print(n)
    elif args.action == "create":
        _print_status(await client.create(name, config))
    elif args.action == "reconfigure":
        _print_status(await client.reconfigure(name, config))
    elif args.action == "status":
        _print_status(await client.status(name))
    elif args.action == "config":
        print(json.dumps(redact(await client.config(name)), indent=2))
    elif args.action == "tasks":
        print(json.dumps([redact(c) for c in await client.tasks(name)], indent=2))
    elif args.action == "pause":
        _print_status(await client.pause(name))
    elif args.action == "resume":
        _print_status(await client.resume(name))
    elif args.action == "stop":
        _print_status(await client.stop(name))
    elif args.action == "restart":
        _print_status(await client.restart(name, only_failed=args.failed))
    elif args.action == "delete":
        await client.delete(name, delete_offsets=not args.keep_offsets)
        print(f"connector {name} deleted")


def _connector(args: argparse.Namespace) -> int:
    """Run the command on a Temporal runtime of its own, released before the process exits.

    See ``worker.temporal_client`` for why: the SDK's default runtime is torn down during
    interpreter finalization and then crashes the process (exit 134/139) after a success.
    """
    import asyncio

    from worker.temporal_client import OwnedRuntime

    owned = OwnedRuntime()
    code = _guarded(args, lambda: asyncio.run(_connector_async(args, owned.runtime)))
    if not owned.release():
        # Never seen in tests: something still holds the client, so the runtime's threads would
        # outlive the interpreter. ``entry`` (the console script) then skips finalization.
        _UNRELEASED_RUNTIMES.append(owned)
    return code


# Runtimes a command could not release; only the process's entry point may act on it (a caller of
# ``main`` in-process, such as a test, must never be exited from under it).
_UNRELEASED_RUNTIMES: list[object] = []


def entry() -> None:
    """The ``sluice`` console script: ``main``, then exit — without interpreter finalization if a
    Temporal runtime could not be released (its threads would crash the process while it finalizes)."""
    code = main()
    if _UNRELEASED_RUNTIMES:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _guarded(args: argparse.Namespace, run: Callable[[], object]) -> int:
    """Run a command; every failure becomes one stderr line and an exit code (worker.errors).

    The exception (and its traceback, whose frames reference clients) is dropped on return.
    """
    from worker.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNEXPECTED, SluiceError, one_line

    prog = f"sluice {args.command}" + (f" {args.action}" if getattr(args, "action", None) else "")
    try:
        result = run()
    except SluiceError as exc:
        _report(args, prog, str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _report(args, prog, "interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        _report(args, prog, f"unexpected error: {one_line(exc)} (run `sluice --debug ...` for the traceback)")
        return EXIT_UNEXPECTED
    return result if isinstance(result, int) else EXIT_OK


def _report(args: argparse.Namespace, prog: str, message: str) -> None:
    if getattr(args, "debug", False):
        traceback.print_exc()
    print(f"{prog}: {' '.join(message.split())}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice",
        description="Sluice data-integration runtime",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", "-v", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True)

    stack_p = sub.add_parser("stack", help="the local stack of real services")
    stack_p.add_argument("action", choices=["up", "down", "status"])
    stack_p.add_argument("--output", choices=["text", "json"], default="text")
    stack_p.set_defaults(func=_stack)

    worker_p = sub.add_parser(
        "worker", help="run a Temporal worker (connector workflows and task activities)"
    )
    worker_p.set_defaults(func=_worker)

    rest_p = sub.add_parser("rest", help="serve RocketMQ Connect's and Kafka Connect's REST APIs")
    rest_p.add_argument("--host", help="default SLUICE_REST_HOST (127.0.0.1)")
    rest_p.add_argument("--port", type=int, help="default SLUICE_REST_PORT (8082)")
    rest_p.set_defaults(func=_rest)

    conn = sub.add_parser(
        "connector",
        help="create and manage connectors",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conn_sub = conn.add_subparsers(dest="action", required=True)
    # --debug is accepted after the action too (`sluice connector status x --debug`); SUPPRESS
    # keeps an absent flag from overriding `sluice --debug connector ...`.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", "-v", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    add_action = functools.partial(conn_sub.add_parser, parents=[debug])
    add_action("list")
    for action in ("create", "reconfigure"):
        p = add_action(action)
        p.add_argument("name")
        p.add_argument("--config-file", help='JSON object of config keys (or {"config": {...}})')
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="one config entry; repeatable")
    for action in ("status", "config", "tasks", "pause", "resume", "stop"):
        add_action(action).add_argument("name")
    restart = add_action("restart")
    restart.add_argument("name")
    restart.add_argument("--failed", action="store_true", help="restart only the failed tasks")
    delete = add_action("delete")
    delete.add_argument("name")
    delete.add_argument("--keep-offsets", action="store_true")
    conn.set_defaults(func=_connector)

    keygen = sub.add_parser("keygen", help="print a key for SLUICE_PAYLOAD_KEY (encrypted Temporal payloads)")
    keygen.set_defaults(func=_keygen)

    mq = sub.add_parser("mqadmin", help="RocketMQ's admin tool against the configured name server")
    mq.add_argument("args", nargs=argparse.REMAINDER)
    mq.set_defaults(func=_mqadmin)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see ``worker.errors`` (0 ok, 1 unexpected, 2 usage/config, 3 not found, ...)."""
    args = build_parser().parse_args(argv)
    settings_or_exit()  # a bad SLUICE_* value: one line naming it, before any command runs
    if args.func is _connector:
        return _connector(args)
    return _guarded(args, lambda: args.func(args))


if __name__ == "__main__":
    entry()
