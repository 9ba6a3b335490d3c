"""The pytest plugin that decides what a GPU test run means (the test configuration imports it).

- ``@pytest.mark.gpu`` tests are skipped, with the reason, when no CUDA GPU and driver can be used.
- With ``BUILDTILE_REQUIRE_GPU=1`` (on a GPU runner) nothing GPU may pass as skipped: no usable GPU is
  an error, and a GPU test that does not run is a failure wherever its skip comes from (a marker, a
  fixture, the test body, or a module skipped whole at import, e.g. by ``pytest.importorskip``).
  The one exception is :func:`not_this_hardware`, for a test that cannot apply to this machine
  (a second GPU, another architecture); those are counted apart.
- A run that saw GPU tests ends with one line counting them, which ``tests/gpu/run.sh`` reads.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

#: the reason prefix of a skip that :func:`not_this_hardware` raised
HARDWARE_SKIP = "not for this hardware: "
#: the first words of the summary line
SUMMARY = "GPU tests:"

_gpu_status: tuple[bool, str] | None = None
_counts = {"ran": 0, "passed": 0, "hardware": 0}


def gpu_status() -> tuple[bool, str]:
    """``(usable, description or reason)``, computed once per session."""
    global _gpu_status
    if _gpu_status is None:
        try:
            from buildtile.runtime import cuda_available

            _gpu_status = cuda_available()
        except Exception as exc:  # the check itself must never break collection
            _gpu_status = (False, f"{type(exc).__name__}: {exc}")
    return _gpu_status


def gpu_required() -> bool:
    return os.environ.get("BUILDTILE_REQUIRE_GPU", "") not in ("", "0")


def not_this_hardware(reason: str) -> None:
    """Skip a GPU test that cannot apply to this machine; allowed even with BUILDTILE_REQUIRE_GPU."""
    pytest.skip(HARDWARE_SKIP + reason)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def is_gpu_module(path: Path) -> bool:
    """A test module of GPU tests: one under a ``gpu`` folder, or one whose ``pytestmark`` names ``gpu``
    (read from its source, since a module skipped at import has no markers to ask)."""
    if "gpu" in path.parent.parts[-1:]:
        return True
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            if any(isinstance(n, ast.Attribute) and n.attr == "gpu" for n in ast.walk(node.value)):
                return True
    return False


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    usable, reason = gpu_status()
    if usable:
        return
    if gpu_required():
        raise pytest.UsageError(f"BUILDTILE_REQUIRE_GPU is set, but no CUDA GPU can be used: {reason}")
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({reason})")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if (report.skipped and gpu_required() and isinstance(collector, pytest.Module)
            and is_gpu_module(Path(collector.path))):
        report.outcome = "failed"
        report.longrepr = (f"BUILDTILE_REQUIRE_GPU is set, but the GPU test module {collector.path.name} was "
                           f"skipped whole: {_skip_reason(report)}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if item.get_closest_marker("gpu") is None:
        return report
    if report.when == "call" and (not report.skipped or hasattr(report, "wasxfail")):
        _counts["ran"] += 1
        _counts["passed"] += report.passed
    if not report.skipped or hasattr(report, "wasxfail"):   # an expected failure did run
        return report
    if _skip_reason(report).startswith(HARDWARE_SKIP):
        _counts["hardware"] += 1
    elif gpu_required():
        report.outcome = "failed"
        report.longrepr = (f"BUILDTILE_REQUIRE_GPU is set, but this GPU test was skipped "
                           f"(in its {report.when}): {_skip_reason(report)}")
    return report


def pytest_terminal_summary(terminalreporter):
    if any(_counts.values()):
        terminalreporter.write_line(f"{SUMMARY} {_counts['ran']} ran, {_counts['passed']} passed, "
                                    f"{_counts['hardware']} not for this hardware")
