"""The GPU gate (tests/gpu_gate.py): with BUILDTILE_REQUIRE_GPU=1 a GPU test that does not run is a
failure, wherever its skip comes from. Checked by running pytest on a small test tree in a subprocess,
with the gate believing a GPU is there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

CONFTEST = """
import pytest
import gpu_gate
from gpu_gate import (gpu_status, pytest_collection_modifyitems, pytest_make_collect_report,
                      pytest_runtest_makereport, pytest_terminal_summary)

gpu_gate._gpu_status = (True, "a pretend GPU")


@pytest.fixture
def no_cupy():
    pytest.skip("no CuPy")
"""

TESTS_MARKED = """
import pytest
from gpu_gate import not_this_hardware


@pytest.mark.gpu
def test_runs():
    pass


@pytest.mark.gpu
def test_fails():
    assert False


@pytest.mark.gpu
def test_skipped_in_body():
    pytest.skip("PyTorch has no CUDA")


@pytest.mark.gpu
@pytest.mark.skipif(True, reason="no cmake")
def test_skipped_by_marker():
    pass


@pytest.mark.gpu
def test_skipped_by_fixture(no_cupy):
    pass


@pytest.mark.gpu
def test_importorskip_in_body():
    pytest.importorskip("buildtile_no_such_module")


@pytest.mark.gpu
def test_second_gpu():
    not_this_hardware("needs 2 GPUs; this one has 1")


@pytest.mark.gpu
@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False


def test_cpu_only_skip():
    pytest.skip("not a GPU test")
"""

SKIPPED_MODULE = """
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("buildtile_no_such_module")


def test_never_collected():
    pass
"""

CPU_MODULE_SKIPPED = """
import pytest

pytest.importorskip("buildtile_no_such_module")


def test_never_collected():
    pass
"""


def run_tree(tmp_path: Path, require: bool) -> tuple[dict[str, str], str]:
    """``{test or module: "passed" | "failed" | "skipped" | "error"}`` and the output of the run."""
    tree = tmp_path / ("required" if require else "plain")
    (tree / "gpu").mkdir(parents=True)
    (tree / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    (tree / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tree / "test_marked.py").write_text(textwrap.dedent(TESTS_MARKED))
    (tree / "gpu" / "test_in_gpu_folder.py").write_text(SKIPPED_MODULE.replace("pytestmark = pytest.mark.gpu\n", ""))
    (tree / "test_marked_module.py").write_text(SKIPPED_MODULE)
    (tree / "test_cpu_module.py").write_text(CPU_MODULE_SKIPPED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "BUILDTILE_REQUIRE_GPU": "1" if require else "0"}
    xml = tree / "report.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--continue-on-collection-errors",
                           f"--junitxml={xml}", "-q", str(tree)], cwd=tree, env=env, capture_output=True, text=True)
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        name = case.get("name").rsplit(".", 1)[-1]   # a test, or a module's collection ("gpu.test_x")
        outcomes[name] = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(
            kinds[0] if kinds else "", "passed")
    return outcomes, proc.stdout + proc.stderr


def test_with_require_gpu_every_gpu_skip_fails(tmp_path):
    outcomes, output = run_tree(tmp_path, require=True)
    assert {name: outcomes.get(name) for name in (
        "test_runs", "test_fails", "test_skipped_in_body", "test_skipped_by_marker", "test_skipped_by_fixture",
        "test_importorskip_in_body", "test_second_gpu", "test_expected_failure", "test_cpu_only_skip",
    )} == {
        "test_runs": "passed", "test_fails": "failed",
        "test_skipped_in_body": "failed",
        "test_skipped_by_marker": "error", "test_skipped_by_fixture": "error",   # failed in their setup
        "test_importorskip_in_body": "failed",
        "test_second_gpu": "skipped",          # not_this_hardware is the one allowed skip
        "test_expected_failure": "skipped",    # an xfail ran
        "test_cpu_only_skip": "skipped",       # not a GPU test
    }, output
    assert "was skipped (in its setup): no CuPy" in output
    # modules skipped whole at import: a GPU module (by folder or by pytestmark) fails, others skip
    assert (outcomes["test_in_gpu_folder"], outcomes["test_marked_module"], outcomes["test_cpu_module"]) == \
        ("error", "error", "skipped")
    assert "the GPU test module test_in_gpu_folder.py was skipped whole" in output
    assert "the GPU test module test_marked_module.py was skipped whole" in output
    assert "GPU tests: 3 ran, 1 passed, 1 not for this hardware" in output


def test_without_require_gpu_skips_stay_skips(tmp_path):
    outcomes, output = run_tree(tmp_path, require=False)
    assert outcomes["test_runs"] == "passed" and outcomes["test_fails"] == "failed"
    for name in ("test_skipped_in_body", "test_skipped_by_marker", "test_skipped_by_fixture",
                 "test_importorskip_in_body", "test_second_gpu"):
        assert outcomes[name] == "skipped", (name, output)
    assert (outcomes["test_in_gpu_folder"], outcomes["test_marked_module"], outcomes["test_cpu_module"]) == \
        ("skipped", "skipped", "skipped")
    assert "skipped whole" not in output


@pytest.mark.parametrize("source, expected", [
    ("import pytest\npytestmark = pytest.mark.gpu\n", True),
    ("import pytest\npytestmark = [pytest.mark.gpu, pytest.mark.skipif(False, reason='')]\n", True),
    ("import pytest\npytestmark = pytest.mark.slow\n", False),
    ("import pytest\n", False),
])
def test_a_gpu_module_is_known_from_its_source(tmp_path, source, expected):
    from gpu_gate import is_gpu_module

    path = tmp_path / "test_x.py"
    path.write_text(source)
    assert is_gpu_module(path) is expected
