"""``[tool.buildtile]``: what a project may write, and one clear message for each mistake."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from buildtile.config import BuildtileSettings, json_schema, load_project, model_keys, read_settings
from buildtile.errors import ConfigError

PROJECT_HEADER = """\
[project]
name = "my-kernels"
version = "1.2.3"

"""


def write_project(root: Path, tool_table: str, *, package: str = "my_kernels", src: bool = False) -> Path:
    package_dir = root / ("src" if src else "") / package
    (package_dir / "tiles").mkdir(parents=True)
    (package_dir / "__init__.py").write_text("")
    (package_dir / "ops.py").write_text("")
    (root / "pyproject.toml").write_text(PROJECT_HEADER + textwrap.dedent(tool_table))
    return root


def config_error(root: Path, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_project(root, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------- valid projects


def test_full_table_reads_every_setting(tmp_path):
    write_project(tmp_path, """\
        [tool.buildtile]
        kernels = ["my_kernels.ops", "my_kernels/tiles/*.py"]
        targets = ["sm_80", "sm_90a"]
        ptx = false
        opt-level = 1
        checks = "debug"
        [tool.buildtile.c-abi]
        enabled = true
        """)
    project = load_project(tmp_path)
    assert project.root == tmp_path.resolve()
    assert project.pyproject == tmp_path.resolve() / "pyproject.toml"
    assert (project.dist_name, project.version, project.package) == ("my-kernels", "1.2.3", "my_kernels")
    assert project.package_dir == tmp_path.resolve() / "my_kernels"
    s = project.settings
    assert s.kernels == ["my_kernels.ops", "my_kernels/tiles/*.py"]
    assert s.targets == ["sm_80", "sm_90a"]
    assert (s.ptx, s.opt_level, s.checks, s.c_abi.enabled) == (False, 1, "debug", True)


def test_defaults_apply_when_only_kernels_are_listed(tmp_path):
    write_project(tmp_path, """\
        [tool.buildtile]
        kernels = ["my_kernels.ops"]
        """)
    s = load_project(tmp_path).settings
    default = BuildtileSettings()
    assert (s.targets, s.ptx, s.opt_level, s.checks, s.c_abi.enabled) == (
        default.targets, default.ptx, default.opt_level, default.checks, default.c_abi.enabled,
    )


@pytest.mark.parametrize("entry", ["my_kernels.ops", "src/my_kernels/tiles/*.py", "my_kernels/tiles/*.py"])
def test_src_layout_package_is_found(tmp_path, entry):
    write_project(tmp_path, f"""\
        [tool.buildtile]
        kernels = ["{entry}"]
        """, src=True)
    project = load_project(tmp_path)
    assert project.package == "my_kernels"
    assert project.package_dir == tmp_path.resolve() / "src" / "my_kernels"


def test_glob_entry_names_its_top_level_package(tmp_path):
    write_project(tmp_path, """\
        [tool.buildtile]
        kernels = ["my_kernels/tiles/*.py"]
        """)
    assert load_project(tmp_path).package == "my_kernels"


def test_config_settings_and_environment_override_the_table(tmp_path):
    write_project(tmp_path, """\
        [tool.buildtile]
        kernels = ["my_kernels.ops"]
        targets = ["sm_80"]
        checks = "release"
        """)
    project = load_project(
        tmp_path,
        config_settings={"buildtile.targets": "sm_90,sm_90a", "buildtile.c-abi.enabled": "true",
                         "cmake.build-type": "Debug"},
        env={"BUILDTILE_CHECKS": "debug", "BUILDTILE_OPT_LEVEL": "0"},
    )
    s = project.settings
    assert (s.targets, s.c_abi.enabled, s.checks, s.opt_level) == (["sm_90", "sm_90a"], True, "debug", 0)


def test_environment_wins_over_config_settings(tmp_path):
    write_project(tmp_path, """\
        [tool.buildtile]
        kernels = ["my_kernels.ops"]
        """)
    project = load_project(tmp_path, config_settings={"buildtile.opt-level": "1"}, env={"BUILDTILE_OPT_LEVEL": "2"})
    assert project.settings.opt_level == 2


def test_schema_describes_every_key_of_the_model():
    schema = json_schema()
    assert set(schema["properties"]) == {"kernels", "targets", "ptx", "opt-level", "checks", "c-abi",
                                         "torch", "jax", "jobs", "cache-dir", "tile", "cache-remote", "cache-mode",
                                         "executor", "executor-strict"}
    assert set(schema["properties"]["c-abi"]["properties"]) == {"enabled"}
    assert set(schema["properties"]["tile"]["properties"]) == {"specialize"}
    assert set(schema["properties"]["torch"]["properties"]) == {"ops"}
    assert set(schema["properties"]["jax"]["properties"]) == {"ffi"}
    assert schema["additionalProperties"] is False
    assert {".".join(k) for k in model_keys()} == {
        "kernels", "targets", "ptx", "opt-level", "checks", "c-abi.enabled", "torch.ops", "jax.ffi",
        "jobs", "cache-dir", "tile.specialize", "cache-remote", "cache-mode", "executor", "executor-strict"}


# --------------------------------------------------------------------------- mistakes


BAD_TABLES = {
    "unknown key": ("misspelt = 1", "unknown key tool.buildtile.misspelt"),
    "snake_case key": ("opt_level = 2", "did you mean `opt-level`"),
    "unknown c-abi key": ("[tool.buildtile.c-abi]\nenable = true", "unknown key tool.buildtile.c-abi.enable"),
    "targets not a list": ('targets = "sm_80"', "tool.buildtile.targets"),
    "target not a string": ("targets = [80]", "tool.buildtile.targets"),
    "target misspelt": ('targets = ["sm80"]', "'sm80' is not a GPU target"),
    "target compute capability": ('targets = ["compute_80"]', "'compute_80' is not a GPU target"),
    "target too old": ('targets = ["sm_60"]', "'sm_60' is older than sm_75"),
    "no targets": ("targets = []", "tool.buildtile.targets"),
    "target twice": ('targets = ["sm_80", "sm_80"]', "sm_80 more than once"),
    "ptx not a bool": ('ptx = "yes"', "tool.buildtile.ptx"),
    "opt-level too high": ("opt-level = 4", "tool.buildtile.opt-level"),
    "opt-level negative": ("opt-level = -1", "tool.buildtile.opt-level"),
    "opt-level a bool": ("opt-level = true", "tool.buildtile.opt-level"),
    "opt-level a string": ('opt-level = "3"', "tool.buildtile.opt-level"),
    "checks unknown": ('checks = "paranoid"', 'must be "release" or "debug"'),
    "checks not a string": ("checks = 1", "tool.buildtile.checks"),
    "c-abi not a table": ("c-abi = true", "tool.buildtile.c-abi"),
    "c-abi enabled not a bool": ('[tool.buildtile.c-abi]\nenabled = "on"', "tool.buildtile.c-abi.enabled"),
}


@pytest.mark.parametrize("line, expected", BAD_TABLES.values(), ids=BAD_TABLES.keys())
def test_each_mistake_names_the_key_and_the_file(tmp_path, line, expected):
    write_project(tmp_path, f'[tool.buildtile]\nkernels = ["my_kernels.ops"]\n{line}\n')
    message = config_error(tmp_path)
    assert message.startswith("error[BT0010]:")
    assert expected in message
    assert "tool.buildtile." in message
    assert str(tmp_path.resolve() / "pyproject.toml") in message


BAD_KERNELS = {
    "empty list": ("kernels = []", "must list at least one"),
    "missing": ("ptx = true", "tool.buildtile.kernels is missing"),
    "not a list": ('kernels = "my_kernels.ops"', "expected a list of strings"),
    "not a module name": ('kernels = ["my-kernels.ops"]', "neither a dotted module name"),
    "absolute path": ('kernels = ["/abs/my_kernels/ops.py"]', "relative to the project folder"),
    "parent folder": ('kernels = ["../my_kernels/ops.py"]', "relative to the project folder"),
    "outside a package": ('kernels = ["*.py"]', "not inside a package"),
    "several packages": ('kernels = ["my_kernels.ops", "other.ops"]', "several top-level packages"),
}


@pytest.mark.parametrize("table, expected", BAD_KERNELS.values(), ids=BAD_KERNELS.keys())
def test_bad_kernels_entry_names_the_key_and_the_file(tmp_path, table, expected):
    write_project(tmp_path, f"[tool.buildtile]\n{table}\n")
    message = config_error(tmp_path)
    assert expected in message
    assert "tool.buildtile.kernels" in message
    assert str(tmp_path.resolve() / "pyproject.toml") in message


def test_top_level_module_is_not_a_package(tmp_path):
    write_project(tmp_path, '[tool.buildtile]\nkernels = ["single"]\n')
    (tmp_path / "single.py").write_text("")
    assert "top-level module" in config_error(tmp_path)


def test_missing_table_says_what_to_add(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PROJECT_HEADER)
    message = config_error(tmp_path)
    assert "no [tool.buildtile] table" in message and "pyproject.toml" in message


def test_table_of_the_wrong_type(tmp_path):
    (tmp_path / "pyproject.toml").write_text('tool.buildtile = "x"\n' + PROJECT_HEADER)
    assert "tool.buildtile in" in config_error(tmp_path)


def test_missing_pyproject(tmp_path):
    assert "pyproject.toml does not exist" in config_error(tmp_path)


def test_invalid_toml_names_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.buildtile\n")
    assert "pyproject.toml is not valid TOML" in config_error(tmp_path)


def test_bad_config_setting_names_the_setting(tmp_path):
    write_project(tmp_path, '[tool.buildtile]\nkernels = ["my_kernels.ops"]\n')
    message = config_error(tmp_path, config_settings={"buildtile.targets": "sm_50"})
    assert "config setting buildtile.targets" in message and "'sm_50' is older than sm_75" in message


def test_unknown_config_setting_suggests_the_right_one(tmp_path):
    write_project(tmp_path, '[tool.buildtile]\nkernels = ["my_kernels.ops"]\n')
    message = config_error(tmp_path, config_settings={"buildtile.target": "sm_90"})
    assert "unknown config setting buildtile.target" in message
    assert "did you mean `buildtile.targets`" in message


def test_bad_environment_variable_names_the_variable(tmp_path):
    write_project(tmp_path, '[tool.buildtile]\nkernels = ["my_kernels.ops"]\n')
    message = config_error(tmp_path, env={"BUILDTILE_PTX": "maybe"})
    assert "environment variable BUILDTILE_PTX" in message


def test_jobs_and_cache_dir_come_from_the_environment(tmp_path):
    settings = read_settings({"kernels": ["pkg.ops"]}, "pyproject.toml",
                             env={"BUILDTILE_JOBS": "3", "BUILDTILE_CACHE_DIR": str(tmp_path)})
    assert (settings.jobs, settings.cache_dir) == (3, str(tmp_path))


def test_negative_jobs_names_the_key():
    with pytest.raises(ConfigError, match="jobs"):
        read_settings({"kernels": ["pkg.ops"], "jobs": -1}, "pyproject.toml")
