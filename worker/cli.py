"""The `sluice` command line: the local stack, the worker, and connectors."""

from __future__ import annotations

import argparse
import json
import sys

from worker.settings import settings, settings_or_exit


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


def _parse_config(args: argparse.Namespace) -> dict[str, str]:
    config: dict[str, str] = {}
    if args.config_file:
        with open(args.config_file) as f:
            loaded = json.load(f)
        config.update({k: str(v) for k, v in loaded.get("config", loaded).items()})
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"sluice connector: --set takes key=value, got {item!r}")
        config[key] = value
    return config


async def _connector_async(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from connectors.secrets import redact
    from worker.client import ConnectorConfigError, SluiceClient
    env = settings()
    client = await SluiceClient.connect(env.temporal_address, env.temporal_namespace, env.task_queue)
    name = getattr(args, "name", None)
    try:
        if args.action == "list":
            for n in await client.list():
                print(n)
            return 0
        assert name is not None
        if args.action == "create":
            status = await client.create(name, _parse_config(args))
        elif args.action == "reconfigure":
            status = await client.reconfigure(name, _parse_config(args))
        elif args.action == "status":
            status = await client.status(name)
        elif args.action == "pause":
            status = await client.pause(name)
        elif args.action == "resume":
            status = await client.resume(name)
        elif args.action == "stop":
            status = await client.stop(name)
        elif args.action == "restart":
            status = await client.restart(name, only_failed=args.failed)
        elif args.action == "delete":
            await client.delete(name, delete_offsets=not args.keep_offsets)
            print(f"connector {name} deleted")
            return 0
        else:
            raise SystemExit(f"unknown action {args.action}")
    except ConnectorConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    report = asdict(status)
    report["config"] = redact(report["config"])
    print(json.dumps(report, indent=2, default=str))
    return 0


def _connector(args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(_connector_async(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description="Sluice data-integration runtime")
    sub = parser.add_subparsers(dest="command", required=True)

    stack_p = sub.add_parser("stack", help="the local stack of real services")
    stack_p.add_argument("action", choices=["up", "down", "status"])
    stack_p.add_argument("--output", choices=["text", "json"], default="text")
    stack_p.set_defaults(func=_stack)

    worker_p = sub.add_parser(
        "worker", help="run a Temporal worker (connector workflows and task activities)"
    )
    worker_p.set_defaults(func=_worker)

    conn = sub.add_parser("connector", help="create and manage connectors")
    conn_sub = conn.add_subparsers(dest="action", required=True)
    conn_sub.add_parser("list")
    for action in ("create", "reconfigure"):
        p = conn_sub.add_parser(action)
        p.add_argument("name")
        p.add_argument("--config-file", help='JSON object of config keys (or {"config": {...}})')
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="one config entry; repeatable")
    for action in ("status", "pause", "resume", "stop"):
        conn_sub.add_parser(action).add_argument("name")
    restart = conn_sub.add_parser("restart")
    restart.add_argument("name")
    restart.add_argument("--failed", action="store_true", help="restart only the failed tasks")
    delete = conn_sub.add_parser("delete")
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
    args = build_parser().parse_args(argv)
    settings_or_exit()  # a bad SLUICE_* value: one line naming it, before any command runs
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
