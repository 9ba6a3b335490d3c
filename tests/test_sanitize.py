"""``buildtile sanitize`` on the CPU: a stand-in compute-sanitizer on PATH records the command
line it gets, writes the report a real one writes to ``--log-file``, runs the program and
exits as the real one does (``--error-exitcode`` when its tool found errors)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from buildtile import sanitize as sanitize_module
from buildtile.cli import main

FAKE = """\
#!{python}
import json, os, subprocess, sys
argv = sys.argv[1:]
options, i = {{}}, 0
while i < len(argv) and argv[i].startswith("--"):
    if "=" in argv[i]:
        key, value = argv[i].split("=", 1); i += 1
    else:
        key, value = argv[i], argv[i + 1]; i += 2
    options.setdefault(key, []).append(value)
command = argv[i:]
with open(os.environ["FAKE_SANITIZER_RECORD"], "w") as f:
    json.dump({{"argv": argv, "options": options, "command": command}}, f)
errors = int(os.environ.get("FAKE_SANITIZER_ERRORS", "0"))
status = subprocess.call(command)
with open(options["--log-file"][0], "w") as log:
    if errors:
        log.write("========= Invalid __global__ read of size 4 bytes\\n")
    if options["--tool"][0] == "racecheck":   # racecheck's own summary counts hazards
        log.write(f"========= RACECHECK SUMMARY: {{errors}} hazard{{'' if errors == 1 else 's'}} displayed "
                  f"({{errors}} error{{'' if errors == 1 else 's'}}, 0 warnings)\\n")
    else:
        log.write(f"========= ERROR SUMMARY: {{errors}} error{{'' if errors == 1 else 's'}}\\n")
sys.exit(int(options["--error-exitcode"][0]) if errors else status)
"""


@pytest.fixture
def fake_sanitizer(tmp_path, monkeypatch):
    """(record path, folder on PATH) of a stand-in compute-sanitizer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "compute-sanitizer"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "record.json"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_SANITIZER_RECORD", str(record))
    return record


def program(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def recorded(record: Path) -> dict:
    return json.loads(record.read_text())


@pytest.mark.parametrize("tool", sanitize_module.TOOLS)
def test_the_tool_and_the_settings_reach_the_sanitizer_and_the_program_its_arguments(fake_sanitizer, tool,
                                                                                      capfd):
    argv = program("import sys; print(sys.argv[1:])") + ["a b", "--tool", "-x"]
    assert main(["sanitize", "--tool", tool, "--", *argv]) == 0
    seen = recorded(fake_sanitizer)
    assert seen["command"] == argv
    options = seen["options"]
    assert options["--tool"] == [tool]
    assert options["--error-exitcode"] == [str(sanitize_module.ERROR_EXITCODE)]
    assert int(options["--launch-timeout"][0]) >= 60 and options["--target-processes"] == ["all"]
    assert ("--check-api-memory-access" in options) == (tool == "memcheck")
    assert ("--racecheck-report" in options) == (tool == "racecheck")
    out, err = capfd.readouterr()
    assert out == "['a b', '--tool', '-x']\n"
    assert err.splitlines()[-1] == f"buildtile sanitize: {tool}: 0 errors"


def test_the_default_tool_is_memcheck_and_extra_options_are_passed_on(fake_sanitizer):
    assert main(["sanitize", "--sanitizer-option=--leak-check=full", "--", *program("pass")]) == 0
    options = recorded(fake_sanitizer)["options"]
    assert options["--tool"] == ["memcheck"] and options["--leak-check"] == ["full"]


def test_errors_found_exit_1_with_the_report_and_the_count(fake_sanitizer, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_SANITIZER_ERRORS", "3")
    assert main(["sanitize", "--tool", "initcheck", "--", *program("pass")]) == 1
    err = capsys.readouterr().err
    assert "Invalid __global__ read" in err
    assert err.splitlines()[-1] == "buildtile sanitize: initcheck: 3 errors"


@pytest.mark.parametrize("errors", [0, 2])
def test_racecheck_reports_are_counted_from_its_own_summary(fake_sanitizer, monkeypatch, capsys, errors):
    monkeypatch.setenv("FAKE_SANITIZER_ERRORS", str(errors))
    assert main(["sanitize", "--tool", "racecheck", "--", *program("pass")]) == (1 if errors else 0)
    assert capsys.readouterr().err.splitlines()[-1] == f"buildtile sanitize: racecheck: {errors} errors"


def test_a_failing_program_without_errors_keeps_its_status(fake_sanitizer, capsys):
    assert main(["sanitize", "--", *program("raise SystemExit(3)")]) == 3
    assert capsys.readouterr().err.splitlines()[-1] == "buildtile sanitize: memcheck: 0 errors, program exited with 3"


def test_a_program_that_exits_with_the_error_status_itself_is_not_counted_as_errors(fake_sanitizer):
    code = f"raise SystemExit({sanitize_module.ERROR_EXITCODE})"
    assert main(["sanitize", "--", *program(code)]) == sanitize_module.ERROR_EXITCODE


def test_no_sanitizer_anywhere_is_bt0024_naming_where_it_looked(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sanitize_module, "_candidate_dirs", lambda: [tmp_path / "cuda" / "bin"])
    assert main(["sanitize", "--", *program("pass")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[BT0024]: compute-sanitizer not found (looked in PATH, ")
    assert str(tmp_path / "cuda" / "bin") in err and "--sanitizer PATH" in err


def test_cuda_home_is_searched_when_path_has_none(tmp_path, monkeypatch):
    cuda_bin = tmp_path / "cuda" / "bin"
    cuda_bin.mkdir(parents=True)
    (cuda_bin / "compute-sanitizer").write_text("#!/bin/sh\n")
    (cuda_bin / "compute-sanitizer").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert sanitize_module.find_sanitizer() == cuda_bin / "compute-sanitizer"


def test_a_sanitizer_path_that_is_not_executable_is_bt0024(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["sanitize", "--sanitizer", str(missing), "--", *program("pass")]) == 1
    assert capsys.readouterr().err.startswith(f"error[BT0024]: --sanitizer {missing}: no executable file there")


def test_no_program_is_bt0010(fake_sanitizer, capsys):
    assert main(["sanitize", "--tool", "racecheck", "--"]) == 1
    assert capsys.readouterr().err.startswith("error[BT0010]: no program to run")


def test_a_sanitizer_that_writes_no_report_is_a_failure(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "compute-sanitizer"
    broken.write_text("#!/bin/sh\nexit 0\n")
    broken.chmod(0o755)
    assert main(["sanitize", "--sanitizer", str(broken), "--", *program("pass")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "buildtile sanitize: memcheck: no report (the sanitizer exited with 0)"


def test_the_run_script_sanitizes_the_examples_under_every_tool():
    script = (Path(__file__).parent / "gpu" / "run.sh").read_text()
    for tool in sanitize_module.TOOLS:
        assert tool in script
    assert 'for tool in memcheck racecheck synccheck initcheck' in script
    assert '-m buildtile sanitize --tool "$tool" -- "$python" tests/gpu/sanitize_examples.py' in script
    assert (Path(__file__).parent / "gpu" / "sanitize_examples.py").is_file()
