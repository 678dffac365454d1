"""The stack warns before RocketMQ's broker refuses messages on a nearly full disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.deploy.local.stack import disk_used_share, disk_warning

GB = 2**30


@pytest.mark.parametrize(
    ("used", "free", "share"),
    [
        (75, 16, 75 / 91),  # this machine: df counts 30 % of a 252 GB disk used, the broker 82 %
        (0, 10, 0.0),
        (10, 0, 1.0),
        (0, 0, 0.0),
    ],
)
def test_disk_used_share_counts_as_the_broker_does(used: int, free: int, share: float) -> None:
    assert disk_used_share(used, free) == pytest.approx(share)


@pytest.mark.parametrize(("used_gb", "free_gb", "warned"), [(75, 16, False), (80, 12, True), (90, 2, True)])
def test_a_nearly_full_disk_is_named_with_the_brokers_limit(used_gb: int, free_gb: int, warned: bool) -> None:
    warning = disk_warning(Path("/srv/sluice/.sluice"), used_gb * GB, free_gb * GB)
    if not warned:
        assert warning is None
    else:
        assert warning is not None
        assert "/srv/sluice/.sluice" in warning and "refuses new messages at 90%" in warning
