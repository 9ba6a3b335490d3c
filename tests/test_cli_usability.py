"""The `buildtile` command behaves as people expect of one: --version, -v/-q, colour only on a
terminal (NO_COLOR, FORCE_COLOR), plain-text help, and a message, never a traceback, for a bad
path, a glob that matched nothing or a closed pipe."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from buildtile import __version__
from buildtile.cli import EXIT_BROKEN_PIPE, main, use_color
from buildtile.diagnostics import Diagnostic, Span, render

ROOT = Path(__file__).parent.parent
BAD_KERNEL = "tests/ui/fail/disjoint_shifted_index.py"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
COMMANDS = ("check", "build", "new", "inspect", "doctor", "explain")


def buildtile(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python -m buildtile ARGS` in a fresh interpreter, against this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    return subprocess.run([sys.executable, "-m", "buildtile", *args], capture_output=True, text=True,
                          env=env, check=False, **kwargs)


# --------------------------------------------------------------------------- version and help


def test_version_names_buildtile_and_its_version():
    run = buildtile("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"buildtile {__version__}"


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_plain_text(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"] if command else ["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: buildtile")
    assert "``" not in out and not re.search(r":\w+:`", out)     # no reST markup
    if command is None:
        assert all(name in out for name in COMMANDS)


# --------------------------------------------------------------------------- -v / -q


def test_quiet_check_prints_nothing_when_clean(capsys):
    assert main(["-q", "check", str(ROOT / "example_project")]) == 0
    assert capsys.readouterr().out == ""
    # -q after the command too; a small project (checking the example project is seconds of work)
    assert main(["check", "-q", str(ROOT / "tests" / "fixtures" / "vecadd_project")]) == 0
    assert capsys.readouterr().out == ""
    assert main(["check", str(ROOT / "tests" / "fixtures" / "vecadd_project")]) == 0
    assert capsys.readouterr().out != ""   # what -q kept quiet


def test_verbose_check_lists_each_kernel_checked(capsys):
    assert main(["check", "-v", str(ROOT / "example_project")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  example_kernels.ops.vecadd  [simt]  example_kernels/ops.py:11" in out
    assert any(line.startswith("  example_kernels.tiles.add  [tile]") for line in out)
    from buildtile.compiler import discover
    from buildtile.config import load_project

    kernels = len(discover(load_project(ROOT / "example_project")))
    assert len([line for line in out if line.startswith("  ")]) == kernels
    assert out[-1] == f"checked {kernels} kernels: no errors"


def test_quiet_check_still_reports_errors(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["-q", "check", BAD_KERNEL]) == 1
    assert capsys.readouterr().err.startswith("error[BT0499]")


@pytest.fixture
def small_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "vecadd_project", project,
                    ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    return project


def test_build_quiet_prints_nothing_and_verbose_a_line_per_job(small_project, capsys):
    assert main(["build", "-q", str(small_project)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["build", "-v", str(small_project)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("]")[0] for line in out if line.startswith("[")] == ["[1/2", "[2/2"]
    assert out[-1].startswith("compiled 1 kernels for sm_80, sm_90")
    assert main(["build", str(small_project)]) == 0
    assert "compiled 1 kernels" in capsys.readouterr().out


# --------------------------------------------------------------------------- colour


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("env, tty, expected", [
    ({}, True, True),
    ({}, False, False),
    ({"NO_COLOR": "1"}, True, False),
    ({"FORCE_COLOR": "1"}, False, True),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
    ({"TERM": "dumb"}, True, False),
])
def test_colour_on_a_terminal_unless_no_color_or_forced(monkeypatch, env, tty, expected):
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert use_color(FakeTerminal() if tty else io.StringIO()) is expected


def test_a_coloured_diagnostic_is_the_plain_one_with_rustc_colours():
    diag = Diagnostic("BT0499", "index is not this thread's own", Span("k.py", 10, 4, 9, "    c[i + 1] = a[i]"),
                      label="arithmetic on the index", help="write at `c[i]`", notes=("a note",))
    plain, coloured = render(diag), render(diag, color=True)
    assert "\x1b[" not in plain
    assert ANSI.sub("", coloured) == plain
    assert coloured.startswith("\x1b[1;31merror[BT0499]\x1b[0m")                  # bold red severity
    assert "\x1b[1;31m^^^^^ arithmetic on the index\x1b[0m" in coloured           # carets in the same colour
    assert "\x1b[1;34m-->\x1b[0m" in coloured and "\x1b[1;36mhelp\x1b[0m" in coloured
    warning = render(Diagnostic("BT0001", "w", None, severity="warning"), color=True)
    assert warning.startswith("\x1b[1;33mwarning[BT0001]")


def test_the_command_colours_when_forced_and_not_in_a_pipe():
    forced = buildtile("check", BAD_KERNEL, cwd=ROOT, env={"FORCE_COLOR": "1"})
    piped = buildtile("check", BAD_KERNEL, cwd=ROOT, env={"NO_COLOR": "", "FORCE_COLOR": ""})
    assert forced.returncode == piped.returncode == 1
    assert "\x1b[1;31merror[BT0499]" in forced.stderr
    assert "\x1b[" not in piped.stderr
    assert ANSI.sub("", forced.stderr) == piped.stderr


# --------------------------------------------------------------------------- bad input, no traceback


@pytest.mark.parametrize("args, message", [
    (["check", "{missing}"], "does not exist"),
    (["build", "{missing}"], "does not exist"),
    (["build", "{file}"], "is not a folder"),
    (["check", "{file}"], "is neither a project folder nor a Python file"),
    (["inspect", "{missing}"], "is not a wheel, a package folder or an importable package"),
    (["inspect", "no_such_package.sub.module"], "is not a wheel, a package folder or an importable package"),
    (["inspect", "{tmp}/dist/*.whl"], "no file matches"),
    (["inspect", "--stage", "ptx", "k", "{missing}"], "does not exist"),
    (["new", "proj", "--dir", "{file}"], "Not a directory"),
    (["new", "proj", "--dir", "{missing}/deeper/than/that"], ""),
])
def test_a_bad_path_is_one_clean_error(tmp_path, args, message):
    (tmp_path / "plain.txt").write_text("not a project")
    where = {"missing": str(tmp_path / "missing"), "file": str(tmp_path / "plain.txt"), "tmp": str(tmp_path)}
    run = buildtile(*(a.format(**where) for a in args), cwd=tmp_path)
    assert "Traceback" not in run.stderr
    if args[0] == "new" and not message:
        # parents are made as needed: this one works
        assert run.returncode == 0, run.stderr
        return
    assert run.returncode == 1, run.stdout
    assert re.match(r"error\[BT\d{4}\]: ", run.stderr) and message in run.stderr, run.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_a_folder_without_write_permission_is_a_clean_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    run = buildtile("new", "proj", "--dir", str(locked))
    assert run.returncode == 1 and "Permission denied" in run.stderr and "Traceback" not in run.stderr


def test_a_closed_pipe_is_silent_and_exits_as_git_does():
    proc = subprocess.Popen([sys.executable, "-m", "buildtile", "explain", "BT0499"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.stdout.close()          # the reader is gone before anything is written (`| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait() == EXIT_BROKEN_PIPE == 141
    assert err == ""


def test_a_pipe_that_closes_after_one_line_is_silent(tmp_path):
    run = subprocess.run(f"set -o pipefail; {sys.executable} -m buildtile inspect --help | head -1",
                         shell=True, executable="/bin/bash", capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert run.stdout.startswith("usage: buildtile inspect")
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr


# --------------------------------------------------------------------------- new


def test_new_prints_a_pip_command_that_names_a_path_and_writes_gitignore(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "myproj"]) == 0
    out = capsys.readouterr().out
    (command,) = [line.strip() for line in out.splitlines() if "pip install" in line]
    target = command.split("#")[0].split()[-1]
    assert target == "./myproj" and (tmp_path / target / "pyproject.toml").is_file()   # a path, not a name
    ignored = (tmp_path / "myproj" / ".gitignore").read_text().split()
    for pattern in ("build/", "*.egg-info/", "__pycache__/", "_buildtile/"):
        assert pattern in ignored


def test_new_with_an_absolute_dir_prints_the_absolute_path(tmp_path, capsys):
    assert main(["new", "other", "--dir", str(tmp_path)]) == 0
    assert f"pip install --no-build-isolation {tmp_path / 'other'}" in capsys.readouterr().out


def test_the_gitignore_keeps_a_build_out_of_git(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git")
    assert main(["new", "tracked", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "tracked"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for made in ("build/buildtile/x", "src/tracked/_buildtile/manifest.json", "src/tracked/__pycache__/a.pyc",
                 "tracked.egg-info/PKG-INFO"):
        (root / made).parent.mkdir(parents=True, exist_ok=True)
        (root / made).write_text("")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                            capture_output=True, text=True, check=True).stdout
    assert "_buildtile" not in status and "build/" not in status and "egg-info" not in status
    assert "pyproject.toml" in status
