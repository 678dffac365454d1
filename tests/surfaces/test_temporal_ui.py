"""The Temporal UI shows each connector at a glance: a real file pipeline, then headless Chromium
(Debian's `chromium`, driven by Playwright; no browser download) finds the source in the workflow
list by its search attributes, and its page shows the summary, the ConnectorState attribute and
current details with per-task state, last batch, records/s and lag — and follows a pause."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.workflows.types import ConnectorState
from tests.runtime.helpers import wait_for

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")


def _ensure_chromium() -> None:
    """Debian's chromium package, installed here when missing (only package registries are
    reachable, so Playwright's own browser download is never used)."""
    if CHROMIUM.exists():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("Debian's chromium is not installed and apt-get cannot run as root here")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
        capture_output=True, text=True, timeout=1200, env=env,
    )  # fmt: skip
    assert done.returncode == 0 and CHROMIUM.exists(), (
        f"apt-get install chromium failed: {done.stderr[-2000:]}"
    )


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    _ensure_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        await launched.close()


async def _open_list(page: Page, ui: str, query: str, workflow_id: str) -> str:
    """The workflow list filtered by ``query``; the text of the connector's row."""
    await page.goto(f"{ui}/namespaces/default/workflows?query={urllib.parse.quote(query)}")
    row = page.locator("table tr").filter(has_text=workflow_id).first
    await row.wait_for(timeout=10_000)
    return await row.inner_text()


async def _open_connector(page: Page, workflow_id: str) -> None:
    await page.locator(f"a[href*='/workflows/{workflow_id}/']").filter(has_text=workflow_id).first.click()
    await page.get_by_text("User Metadata", exact=True).first.wait_for(timeout=30_000)


async def _user_metadata(page: Page, which: str) -> str:
    """The UI's User Metadata tab renders each Markdown text in its own iframe: ``summary`` (the
    static summary a client gave at start) or ``current-details`` (``set_current_details``)."""
    await page.get_by_text("User Metadata", exact=True).first.click()
    body = page.frame_locator(f"#user-metadata-{which}").locator("body")
    await body.wait_for(timeout=30_000)
    return await body.inner_text()


async def _main_text(page: Page) -> str:
    return await page.locator("main").first.inner_text()


async def _find_by_attributes(page: Page, ui: str, query: str, workflow_id: str, tries: int = 6) -> str:
    """Visibility is eventually consistent: reload the list until the row appears."""
    for attempt in range(tries):
        try:
            return await _open_list(page, ui, query, workflow_id)
        except Exception:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


async def test_ui_finds_the_connector_by_search_attribute_and_shows_state_and_details(
    tmp_path: Path, start_worker, sluice: SluiceClient, stack_config: StackConfig, topic_name: str, browser
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line {i}\n" for i in range(2000)))
    start_worker()
    name = f"ui-{uuid.uuid4().hex[:8]}"
    common = {"poll.interval.ms": "200", "task.heartbeat.timeout.s": "5"}
    await sluice.create(
        name, {"connector.class": "file-source", "file": str(src), "topic": topic_name, **common}
    )
    await sluice.create(
        f"{name}-out", {"connector.class": "file-sink", "file": str(dst), "topics": topic_name, **common}
    )
    await wait_for(lambda: dst.exists() and dst.read_text() == src.read_text(), 600, "the data to arrive")

    async def reported() -> bool:
        task = (await sluice.status(name)).tasks[0]
        return task.metrics is not None and task.metrics.last_batch >= 0 and task.metrics.lag == 0

    await wait_for(reported, 120, "the source task's metrics report (last batch, lag 0)")
    workflow_id = f"sluice-connector-{name}"
    ui = stack_config.temporal_ui_url
    page = await browser.new_page(viewport={"width": 1600, "height": 1200})

    row = await _find_by_attributes(
        page,
        ui,
        f"ConnectorName='{name}' AND ConnectorState='RUNNING' AND ConnectorKind='source'",
        workflow_id,
    )
    assert "Running" in row or "RUNNING" in row, row
    await _open_connector(page, workflow_id)
    details = await _user_metadata(page, "current-details")
    summary = await _user_metadata(page, "summary")
    assert f"source connector {name} (file-source)" in summary, summary
    assert f"{name} (source: file-source) — RUNNING" in details, details
    assert "task 0: RUNNING" in details, details
    assert "last batch" in details and "records/s" in details and "lag 0 bytes" in details, details
    await page.get_by_text("Search Attributes", exact=True).first.click()
    await page.get_by_text('"ConnectorState"').first.wait_for(timeout=30_000)
    attributes = await _main_text(page)
    assert '"ConnectorState": "RUNNING"' in attributes, attributes
    assert f'"ConnectorName": "{name}"' in attributes, attributes

    # A pause shows up in the list's search attribute and in the details.
    paused = await sluice.pause(name)
    assert paused.state == ConnectorState.PAUSED
    await _find_by_attributes(page, ui, f"ConnectorName='{name}' AND ConnectorState='PAUSED'", workflow_id)
    await _open_connector(page, workflow_id)
    details = await _user_metadata(page, "current-details")
    assert f"{name} (source: file-source) — PAUSED" in details, details
    assert "task 0: PAUSED" in details, details
    await page.close()
    await sluice.delete(name)
    await sluice.delete(f"{name}-out")
