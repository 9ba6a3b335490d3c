"""The error index (buildtile/codes.py) against the code base and the tests.

Rules, each a test below:

1. Every code the code base can raise -- in Python, in the C shim templates
   (``error[BTxxxx]`` texts and the ``BT_ERR_*`` statuses of abi.h, which
   print as ``error[BT%04d]``) and in the C++ header -- has an entry.
2. Every entry has a case that produces its code:
   - a code caught by the kernel checks (its stages include "kernel check")
     has a must-fail kernel under tests/ui whose ``# expect:`` header names it;
   - any other code (configuration, build, package, launch, runtime) cannot
     come from a kernel file, so it has an entry in HOST_CASES below: the test
     that produces it through the real code path (a config file, a manifest,
     a launch, the C shim...). Those tests run with the rest of the suite;
     here each entry must name an existing test that mentions its code.
3. The examples of a kernel-check code are honest: the erroneous one
   produces the code, the corrected one checks clean.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pluggy
import pytest

from buildtile import hookimpl, hookspecs, types
from buildtile.check import check_file
from buildtile.cli import main
from buildtile.codes import CODES, KERNEL_CHECK, STAGES
from buildtile.errors import BuildtileError, CompileError, ToolchainError
from buildtile.explain import explain, normalize
from buildtile.plugins import backends
from buildtile.toolchain import libdevice
from buildtile.toolchain.ptx import llvm_to_ptx
from ui_corpus import ROOT, UI, expected

PACKAGE = ROOT / "buildtile"
#: the index itself and its renderer name every code; they are what is checked, not sources
INDEX = {PACKAGE / "codes.py", PACKAGE / "explain.py"}
C_SOURCES = ("interop/templates/*", "include/buildtile/*")

#: code -> the test (file::function) that produces it through the real code path
HOST_CASES = {
    "BT0010": "tests/test_config.py::test_each_mistake_names_the_key_and_the_file",
    "BT0011": "tests/test_codes.py::test_bt0011_a_misspelt_target_is_refused_before_llvm",
    "BT0020": "tests/test_codes.py::test_bt0020_ir_that_llvm_rejects_is_a_toolchain_error",
    "BT0021": "tests/test_codes.py::test_bt0021_math_without_libdevice_says_what_to_install",
    "BT0022": "tests/test_toolchain_ptxas.py::"
              "test_a_warp_specialised_kernel_without_ptxas_is_bt0022_naming_the_package",
    "BT0024": "tests/test_sanitize.py::test_no_sanitizer_anywhere_is_bt0024_naming_where_it_looked",
    "BT0025": "tests/test_toolchain_ptxas.py::"
              "test_a_wgmma_kernel_without_ptxas_falls_back_to_nvjitlink_whose_serialisation_is_bt0025",
    "BT0026": "tests/test_toolchain_ptxas.py::test_a_setmaxnreg_kernel_forced_through_nvjitlink_is_bt0026",
    "BT0027": "tests/test_toolchain_perf_warnings.py::test_a_performance_loss_without_a_code_of_its_own_is_bt0027",
    "BT0030": "tests/test_codes.py::test_bt0030_a_plugin_registering_a_non_backend_is_refused",
    "BT0040": "tests/test_executors.py::test_strict_mode_makes_an_unreachable_scheduler_bt0040",
    "BT0100": "tests/test_codes.py::test_bt0100_a_failed_check_without_diagnostics",
    "BT0382": "tests/test_tile_runtime_moves.py::test_every_use_of_a_moved_tensor_is_bt0382",
    "BT0502": "tests/test_runtime_arguments.py::test_interleaved_views_count_as_overlapping",
    "BT0800": "tests/test_emulate_checks.py::test_bt0800_a_read_past_the_end_names_the_array_and_the_thread",
    "BT0801": "tests/test_emulate_checks.py::test_bt0801_two_threads_writing_one_element_are_reported",
    "BT0802": "tests/test_emulate_checks.py::test_bt0802_a_barrier_after_half_the_block_returned",
    "BT0803": "tests/test_emulate_checks.py::test_bt0803_reading_shared_memory_no_thread_wrote",
    "BT0804": "tests/test_emulate_checks.py::test_bt0804_a_misaligned_vector_access",
    "BT0805": "tests/test_emulate_checks.py::test_bt0805_inline_ptx_the_emulator_does_not_model",
    "BT0806": "tests/test_emulate_checks.py::test_bt0806_copies_left_in_flight",
    "BT0807": "tests/test_emulate_hopper.py::test_bt0807_a_wgmma_without_its_fence",
    "BT0601": "tests/test_runtime_bounds.py::test_out_of_range_read_is_raised_at_synchronize_naming_kernel_and_line",
    "BT0610": "tests/test_runtime_launch.py::test_gpu_without_any_usable_image_names_the_targets",
    "BT0620": "tests/test_runtime_launch.py::test_missing_manifest_tells_the_user_to_build",
    "BT0621": "tests/test_runtime_launch.py::test_unknown_parameter_kind_in_the_manifest_is_a_manifest_error",
    "BT0622": "tests/test_runtime_launch.py::test_manifest_of_another_abi_version_is_refused",
    "BT0623": "tests/test_runtime_launch.py::test_damaged_image_is_refused",
    "BT0700": "tests/test_runtime_driver.py::test_launch_without_a_driver_is_a_cuda_error_not_a_traceback",
    "BT0701": "tests/test_c_abi.py::test_a_missing_driver_is_a_status_and_a_message_not_a_crash",
}

#: what an example may use without importing it (the examples show kernels, not imports)
PRELUDE = ("import math\n\nfrom buildtile import simt, tile\n"
           f"from buildtile.types import {', '.join(types.__all__)}\n\n\n")


def codes_raised_by_the_code_base() -> dict[str, set[str]]:
    """Each code mentioned by a source of the package -> the files that mention it."""
    found: dict[str, set[str]] = {}
    files = [p for p in PACKAGE.rglob("*.py") if p not in INDEX]
    files += [p for pattern in C_SOURCES for p in PACKAGE.glob(pattern) if p.is_file()]
    for path in files:
        text = path.read_text()
        codes = set(re.findall(r"\bBT\d{4}\b", text))
        codes |= {f"BT{int(n):04d}" for n in re.findall(r"\bBT_ERR_\w+\s*=\s*(\d+)", text)}
        for code in codes:
            found.setdefault(code, set()).add(str(path.relative_to(ROOT)))
    return found


def ui_cases() -> dict[str, list[str]]:
    """Each code some must-fail kernel under tests/ui expects -> those files."""
    cases: dict[str, list[str]] = {}
    for path in sorted(UI.rglob("*.py")):
        if path.read_text().startswith("# expect:"):
            for code, _, _ in expected(path):
                cases.setdefault(code, []).append(str(path.relative_to(ROOT)))
    return cases


def test_the_scan_sees_python_c_and_cpp_sources():
    found = codes_raised_by_the_code_base()
    assert "buildtile/backends/simt/ownership.py" in found["BT0499"]
    assert "buildtile/include/buildtile/abi.h" in found["BT0701"]          # only as BT_ERR_NO_DRIVER = 701
    assert "buildtile/interop/templates/CMakeLists.txt.in" in found["BT0010"]
    assert "buildtile/include/buildtile/buildtile.hpp" in found["BT0382"]


def test_every_code_the_code_base_raises_has_an_entry():
    missing = {code: sorted(files) for code, files in codes_raised_by_the_code_base().items() if code not in CODES}
    assert missing == {}, "add these codes to buildtile/codes.py"


def test_every_entry_is_a_code_the_code_base_raises():
    assert set(CODES) - set(codes_raised_by_the_code_base()) == set()


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_entry_has_a_case_that_produces_it(code):
    entry, ui = CODES[code], ui_cases()
    assert entry.stages and set(entry.stages) <= set(STAGES)
    if KERNEL_CHECK in entry.stages:
        assert code in ui, f"{code} is a kernel-check code with no must-fail kernel under tests/ui"
    else:
        assert code not in ui, f"{code} is produced by a kernel: list {KERNEL_CHECK!r} in its stages"
        assert code in HOST_CASES, f"{code} needs a test in HOST_CASES that produces it"


@pytest.mark.parametrize("code", sorted(HOST_CASES))
def test_a_host_case_names_a_test_that_produces_its_code(code):
    assert code in CODES and KERNEL_CHECK not in CODES[code].stages
    file, name = HOST_CASES[code].split("::")
    source = (ROOT / file).read_text()
    test = next((n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert test is not None, f"{HOST_CASES[code]} does not exist"
    text = ast.get_source_segment(source, test)
    assert code in text or re.search(rf"\b{int(code[2:])}\b", text), f"{HOST_CASES[code]} never checks {code}"


KERNEL_ENTRIES = sorted(code for code, entry in CODES.items() if KERNEL_CHECK in entry.stages)


def _check_example(tmp_path: Path, source: str) -> tuple[int, list]:
    path = tmp_path / "example.py"
    path.write_text(PRELUDE + source + "\n")
    return check_file(path, tmp_path)


@pytest.mark.parametrize("code", KERNEL_ENTRIES)
def test_the_erroneous_example_produces_its_code(code, tmp_path):
    _, diags = _check_example(tmp_path, CODES[code].wrong)
    assert code in [d.code for d in diags], [d.render() for d in diags]


@pytest.mark.parametrize("code", KERNEL_ENTRIES)
def test_the_corrected_example_checks_clean(code, tmp_path):
    found, diags = _check_example(tmp_path, CODES[code].right)
    assert found >= 1 and diags == [], [d.render() for d in diags]


# ------------------------------------------------------------------ host cases without another home

def test_bt0011_a_misspelt_target_is_refused_before_llvm():
    with pytest.raises(ToolchainError) as info:
        llvm_to_ptx("", "compute_80")
    assert info.value.code == "BT0011" and "`compute_80` is not a GPU target" in str(info.value)


def test_bt0020_ir_that_llvm_rejects_is_a_toolchain_error():
    with pytest.raises(ToolchainError) as info:
        llvm_to_ptx("define void @k( {", "sm_80")
    assert info.value.code == "BT0020" and str(info.value).startswith("error[BT0020]: LLVM rejected")


def test_bt0021_math_without_libdevice_says_what_to_install(monkeypatch):
    monkeypatch.setattr(libdevice, "candidate_paths", lambda: [])
    libdevice.libdevice_bitcode.cache_clear()
    try:
        with pytest.raises(ToolchainError) as info:
            libdevice.libdevice_bitcode()
    finally:
        libdevice.libdevice_bitcode.cache_clear()
    assert info.value.code == "BT0021" and "nvidia-nvvm" in str(info.value)


class _RegistersAClass:
    @hookimpl
    def buildtile_register_backends(self, register):
        register(object)


def test_bt0030_a_plugin_registering_a_non_backend_is_refused():
    pm = pluggy.PluginManager("buildtile")
    pm.add_hookspecs(hookspecs)
    pm.register(_RegistersAClass())
    with pytest.raises(BuildtileError) as info:
        backends(pm)
    assert info.value.code == "BT0030"


def test_bt0100_a_failed_check_without_diagnostics():
    # a failed check names its first diagnostic's code; BT0100 is left for one that has none
    assert CompileError([]).code == "BT0100"


# ------------------------------------------------------------------ buildtile explain

def test_explain_prints_the_entry(capsys):
    assert main(["explain", "BT0499"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"BT0499: {CODES['BT0499'].title}\n")
    assert CODES["BT0499"].explanation.splitlines()[0] in out
    assert "Erroneous example:\n\n    @simt.kernel(block=256)" in out and "Corrected:" in out


@pytest.mark.parametrize("spelling", ["bt0499", "0499", "499"])
def test_explain_reads_a_code_however_it_is_spelt(spelling):
    assert normalize(spelling) == "BT0499"
    assert explain(spelling) == explain("BT0499")


@pytest.mark.parametrize("text, words", [("BT9999", "BT9999 is not a buildtile error code"),
                                         ("nonsense", "`nonsense` is not an error code")])
def test_explain_of_an_unknown_code_says_so_and_exits_2(text, words, capsys):
    assert main(["explain", text]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and words in captured.err


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_entry_reads_well_in_a_terminal(code):
    text, status = explain(code)
    assert status == 0
    for line in text.splitlines():
        assert len(line) <= 80 and "\t" not in line and line == line.rstrip(), repr(line)
