"""The documentation site builds with warnings as errors, and its generated pages cover the code."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from buildtile import config

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "docs" / "hooks.py"


def load_hooks():
    spec = importlib.util.spec_from_file_location("buildtile_docs_hooks", HOOKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_site(site: Path, *, prelude: str = "") -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of this repository into ``site``, after running ``prelude``."""
    script = (
        f"{prelude}\n"
        "from mkdocs.__main__ import cli\n"
        f"cli(['build', '--strict', '-f', {str(ROOT / 'mkdocs.yml')!r}, '-d', {str(site)!r}])\n"
    )
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)


def code_table():
    try:
        from buildtile.codes import CODES
    except ImportError:
        pytest.skip("buildtile.codes, the error code table, is not in this tree")
    return CODES


def override_for(setting) -> tuple[str, object]:
    """A text override of a key and the value it must give, unlike the default."""
    if setting.keys == ("kernels",):
        return "pkg.a;pkg.b", ["pkg.a", "pkg.b"]
    if setting.keys == ("targets",):
        return "sm_86,sm_90a", ["sm_86", "sm_90a"]
    if setting.keys == ("executor",):
        return "dask://scheduler:8786", "dask://scheduler:8786"
    if setting.type_ is bool:
        return ("0", False) if setting.default else ("1", True)
    if setting.type_ is int:
        return "2", 2
    if setting.type_ is dict:
        return '{"rows": {"shape": ["n"], "n": [128]}}', {"rows": {"shape": ["n"], "n": [128]}}
    if "enum" in setting.schema:
        return setting.schema["enum"][-1], setting.schema["enum"][-1]
    return "off", "off"


def test_configuration_page_documents_every_key():
    hooks = load_hooks()
    page = hooks.render_configuration()
    defaults = config.BuildtileSettings()
    for keys in config.model_keys():
        dotted = ".".join(keys)
        assert f"## `{dotted}`" in page
        assert f"-Cbuildtile.{dotted}=" in page
        assert f"`{hooks.env_name(keys)}=" in page
    assert f'targets = ["{defaults.targets[0]}", "{defaults.targets[1]}"]' in page
    assert f"opt-level = {defaults.opt_level}" in page


def test_documented_environment_variables_override_their_keys():
    hooks = load_hooks()
    for setting in hooks.setting_docs():
        text, expected = override_for(setting)
        assert expected != setting.default
        settings = config.read_settings({"kernels": ["pkg.ops"]}, "test", env={hooks.env_name(setting.keys): text})
        value = settings
        for key in setting.keys:
            value = getattr(value, key.replace("-", "_"))
        assert value == expected, setting.keys


def test_site_builds_strict_with_every_key_and_code(tmp_path):
    codes = code_table()
    result = build_site(tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    configuration = (tmp_path / "site" / "configuration" / "index.html").read_text(encoding="utf-8")
    for keys in config.model_keys():
        assert ".".join(keys) in configuration
    errors = (tmp_path / "site" / "errors" / "index.html").read_text(encoding="utf-8")
    assert codes, "the error code table is empty"
    for code in codes:
        assert f'id="{code.lower()}"' in errors, code


def test_site_build_fails_loudly_without_the_code_table(tmp_path):
    # a None entry in sys.modules makes `import buildtile.codes` raise ImportError
    result = build_site(tmp_path / "site", prelude="import sys; sys.modules['buildtile.codes'] = None")
    assert result.returncode != 0
    assert "buildtile.codes" in result.stdout + result.stderr
    assert not (tmp_path / "site" / "errors" / "index.html").exists()
