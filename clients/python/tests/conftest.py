"""Fixtures: ``h``, the harness of one test (everything it starts is stopped at its end, and
the bridges' logs are added to the report of a failed test), and ``mode``, the broker the
devices use: the bridge's embedded one, or a Mosquitto the bridge joined (BROKER_URL)."""
from __future__ import annotations

from typing import Iterator

import pytest

from harness import Harness


@pytest.fixture
def h(request: pytest.FixtureRequest) -> Iterator[Harness]:
    harness = Harness()
    request.node.harness = harness
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture(params=["embedded", "external"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    harness = getattr(item, "harness", None)
    if report.when == "call" and report.failed and harness is not None:
        report.sections.append(("bridge logs", harness.logs()))
