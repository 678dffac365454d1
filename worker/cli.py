"""The `sluice` command line: the local stack, the worker, and connectors."""

from __future__ import annotations

import argparse
import json
import sys

from deploy.local.config import StackConfig


def _stack(args: argparse.Namespace) -> int:
    from deploy.local import stack
    from deploy.local.process import StackError

    cfg = StackConfig.from_env()
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

    result = mqadmin(StackConfig.from_env(), *args.args)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description="Sluice data-integration runtime")
    sub = parser.add_subparsers(dest="command", required=True)

    stack_p = sub.add_parser("stack", help="the local stack of real services")
    stack_p.add_argument("action", choices=["up", "down", "status"])
    stack_p.add_argument("--output", choices=["text", "json"], default="text")
    stack_p.set_defaults(func=_stack)

    mq = sub.add_parser("mqadmin", help="RocketMQ's admin tool against the configured name server")
    mq.add_argument("args", nargs=argparse.REMAINDER)
    mq.set_defaults(func=_mqadmin)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
