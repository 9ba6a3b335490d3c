"""Inputs that once gave a Python traceback each get a BT diagnostic instead."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from buildtile.cache import resolve_cache_dir
from buildtile.check import check_file
from buildtile.compiler import compile_project, discover
from buildtile.config import load_project
from buildtile.errors import CompileError, ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "_buildtile"))
    return root


def set_kernels(root: Path, kernels: str, extra: str = "") -> None:
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text().replace('kernels = ["tiny_kernels.ops"]', f"kernels = {kernels}\n{extra}")
    pyproject.write_text(text)


# --------------------------------------------------------------------------- kernel modules


def test_a_kernel_module_that_is_not_utf8_is_a_located_syntax_error(project):
    ops = project / "tiny_kernels" / "ops.py"
    ops.write_bytes(ops.read_bytes() + b"\n# caf\xe9\n")
    lines = ops.read_bytes().count(b"\n")
    with pytest.raises(CompileError) as info:
        discover(load_project(project))
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.code == "BT0001"
    assert "not valid utf-8 text (byte 0xe9" in diagnostic.message
    assert (diagnostic.span.file, diagnostic.span.line, diagnostic.span.col) == ("tiny_kernels/ops.py", lines, 5)


def test_a_coding_comment_is_honoured(project):
    ops = project / "tiny_kernels" / "ops.py"
    ops.write_bytes(b"# -*- coding: latin-1 -*-\n" + ops.read_bytes() + b"\n# caf\xe9\n")
    assert [k.name for k in discover(load_project(project))] == ["vecadd"]


def test_a_coding_comment_naming_no_encoding_is_a_syntax_error(project):
    ops = project / "tiny_kernels" / "ops.py"
    ops.write_bytes(b"# -*- coding: no-such-codec -*-\n" + ops.read_bytes())
    with pytest.raises(CompileError) as info:
        discover(load_project(project))
    assert info.value.diagnostics[0].code == "BT0001" and "no-such-codec" in info.value.diagnostics[0].message


def test_check_of_a_file_that_is_not_utf8_is_a_diagnostic(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_bytes(b"from buildtile import simt\n\xff\xfe\n")
    found, diagnostics = check_file(path)
    assert found == 0 and [d.code for d in diagnostics] == ["BT0001"]
    assert (diagnostics[0].span.line, diagnostics[0].span.col) == (2, 0)


def test_a_linked_folder_leading_out_of_the_project_is_refused(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "more.py").write_text((project / "tiny_kernels" / "ops.py").read_text())
    (project / "tiny_kernels" / "linked").symlink_to(elsewhere, target_is_directory=True)
    set_kernels(project, '["tiny_kernels/**/*.py"]')
    with pytest.raises(ConfigError) as info:
        discover(load_project(project))
    message = str(info.value)
    assert message.startswith("error[BT0010]: tool.buildtile.kernels: `tiny_kernels/**/*.py` finds ")
    assert f"a link to {elsewhere / 'more.py'}" in message and "outside" in message


def test_a_linked_module_named_by_its_dotted_name_is_refused_too(project, tmp_path):
    (tmp_path / "outside.py").write_text("")
    (project / "tiny_kernels" / "outside.py").symlink_to(tmp_path / "outside.py")
    set_kernels(project, '["tiny_kernels.outside"]')
    with pytest.raises(ConfigError, match="is a link to"):
        discover(load_project(project))


def test_a_pyproject_that_is_not_utf8_is_a_config_error(project):
    pyproject = project / "pyproject.toml"
    pyproject.write_bytes(pyproject.read_bytes().replace(b"Test fixture", b"Test f\xefxture"))
    with pytest.raises(ConfigError, match=r"pyproject.toml is not UTF-8 text \(byte 0xef"):
        load_project(project)


# --------------------------------------------------------------------------- the cache folder

BAD_CACHE_DIRS = {
    "a NUL": ("cache\0dir", "contains a NUL character"),
    "an unknown user": ("~nosuchuser-buildtile/cache", "there is no user 'nosuchuser-buildtile'"),
    "a name over 255 bytes": ("cache/" + "x" * 256, "a folder name of 256 bytes"),
    "a name over 255 bytes in UTF-8": ("é" * 128, "a folder name of 256 bytes"),
}


@pytest.mark.parametrize("value, expected", BAD_CACHE_DIRS.values(), ids=BAD_CACHE_DIRS.keys())
def test_a_cache_folder_no_path_can_be_is_refused_with_the_key(project, value, expected):
    with pytest.raises(ConfigError) as info:
        load_project(project, config_settings={"buildtile.cache-dir": value}, env={})
    message = str(info.value)
    assert message.startswith("error[BT0010]: config setting buildtile.cache-dir: ") and expected in message


@pytest.mark.parametrize("value, expected", [v for k, v in BAD_CACHE_DIRS.items() if k != "a NUL"],
                         ids=[k for k in BAD_CACHE_DIRS if k != "a NUL"])
def test_the_same_from_the_environment_and_from_pyproject(project, value, expected):
    with pytest.raises(ConfigError, match="environment variable BUILDTILE_CACHE_DIR: "):
        load_project(project, env={"BUILDTILE_CACHE_DIR": value})
    set_kernels(project, '["tiny_kernels.ops"]', f"cache-dir = {value!r}".replace("'", '"'))
    with pytest.raises(ConfigError, match=f"tool.buildtile.cache-dir in {project / 'pyproject.toml'}: "):
        load_project(project, env={})


@pytest.mark.parametrize("value", ["off", "OFF", " off", "Off ", "\toff\n"])
def test_off_turns_the_cache_off_in_any_case_and_spacing(value):
    assert resolve_cache_dir(value) is None


def test_an_environment_off_builds_without_a_cache_and_makes_no_folder(project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BUILDTILE_CACHE_DIR", " OFF")
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    lines: list[str] = []
    compile_project(load_project(project), tmp_path / "out", log=lines.append)
    compile_project(load_project(project), tmp_path / "out", log=lines.append)
    assert lines and not any(line.endswith("(cached)") for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "proj"]


def test_a_pyproject_off_with_spaces_turns_the_cache_off(project):
    set_kernels(project, '["tiny_kernels.ops"]', 'cache-dir = " Off "')
    assert resolve_cache_dir(load_project(project, env={}).settings.cache_dir) is None


def test_a_cache_folder_under_a_home_is_expanded(project, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = load_project(project, env={"BUILDTILE_CACHE_DIR": "~/kernels"}).settings
    assert resolve_cache_dir(settings.cache_dir) == tmp_path / "home" / "kernels"


# --------------------------------------------------------------------------- the tests themselves


def test_the_suite_keeps_out_of_the_users_home_and_cache(tmp_path_factory):
    from buildtile.cache import default_cache_dir
    from run_dirs import run_root

    session = tmp_path_factory.getbasetemp()
    home = Path(os.path.expanduser("~"))
    assert session in home.parents
    assert session in Path(os.environ["XDG_CACHE_HOME"]).parents
    assert run_root(tmp_path_factory) in Path(os.environ["BUILDTILE_CACHE_DIR"]).parents   # the run's, shared
    assert session in default_cache_dir().parents


def test_a_build_that_names_no_cache_uses_the_sessions(project, tmp_path_factory, monkeypatch):
    from buildtile.cache import default_cache_dir

    monkeypatch.delenv("BUILDTILE_CACHE_DIR")
    monkeypatch.setenv("BUILDTILE_JOBS", "1")
    compile_project(load_project(project), project / "out", log=lambda line: None)
    assert any(default_cache_dir().iterdir())
    assert tmp_path_factory.getbasetemp() in default_cache_dir().parents


def test_a_module_written_as_text_round_trips(project):
    # the decoding above reads what the build wrote before: UTF-8 text, comments and all
    ops = project / "tiny_kernels" / "ops.py"
    ops.write_text(ops.read_text() + textwrap.dedent("""
        # naïve café comment, in UTF-8
        """), encoding="utf-8")
    assert [k.name for k in discover(load_project(project))] == ["vecadd"]
