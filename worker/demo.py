"""`make demo`: the main job on the local stack (replaced by the full pipeline demo below)."""

from __future__ import annotations

import sys

from deploy.local import stack
from deploy.local.config import StackConfig


def main() -> int:
    cfg = StackConfig.from_env()
    statuses = stack.status(cfg)
    for s in statuses:
        print(f"{s.name:<18} {'up' if s.healthy else 'DOWN':<5} {s.address}")
    print(f"Temporal UI: {cfg.temporal_ui_url}")
    return 0 if all(s.healthy for s in statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
