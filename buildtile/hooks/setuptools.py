"""setuptools integration: a setuptools project's kernels compiled into its wheel,
without changing its build backend.

setuptools calls :func:`finalize_distribution_options` for every build (entry
point group ``setuptools.finalize_distribution_options``, active once
buildtile is in the project's ``build-system.requires``). It does nothing
unless ``pyproject.toml`` has a ``[tool.buildtile]`` table; then it adds a
``build_buildtile`` step to ``build``, which compiles the kernels and puts
``<package>/_buildtile/`` into the build tree (or, for ``pip install -e``,
next to the sources), exactly as the ``buildtile.build`` backend does. Its
``egg_info`` step (which writes the metadata of every setuptools wheel)
adds the requirement on buildtile-runtime, as the backend does too.

The C ABI shim is built with CMake, which only the ``buildtile.build``
backend drives; with ``c-abi.enabled`` this integration stops with a message
saying so.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, ClassVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from setuptools import Command

from buildtile.hooks.boundary import report_buildtile_errors

COMMAND = "build_buildtile"


def finalize_distribution_options(dist: Any) -> None:
    """Add the kernel compilation to ``build`` of a project that has ``[tool.buildtile]``."""
    if not _has_buildtile_table(Path.cwd() / "pyproject.toml") or COMMAND in dist.cmdclass:
        return
    base = dist.get_command_class("build")
    # a subclass, so the step belongs to this distribution and not to every setuptools build
    # in the process
    dist.cmdclass["build"] = type(
        base.__name__, (base,), {"sub_commands": [*base.sub_commands, (COMMAND, None)]}
    )
    dist.cmdclass[COMMAND] = BuildKernels
    metadata = dist.get_command_class("egg_info")
    dist.cmdclass["egg_info"] = type(metadata.__name__, (metadata,), {"run": _egg_info_with_runtime})


def _egg_info_with_runtime(cmd: Any) -> None:
    """``egg_info.run`` that first adds buildtile-runtime to the requirements.

    Here and not in :func:`finalize_distribution_options`: setuptools applies the
    project's ``dependencies`` after that hook, replacing the list.
    """
    from buildtile.hooks.wheel_metadata import names_runtime, runtime_requirement

    requires = list(cmd.distribution.install_requires or [])
    if not any(names_runtime(r) for r in requires):
        cmd.distribution.install_requires = [*requires, runtime_requirement()]
    super(type(cmd), cmd).run()


class BuildKernels(Command):
    """setuptools ``build`` step: compile the kernels listed in ``[tool.buildtile]``."""

    description = "compile buildtile kernels ahead of time"
    user_options: ClassVar[list] = []

    def initialize_options(self) -> None:
        self.build_lib: str | None = None
        self.editable_mode = False
        self._outputs: list[str] = []

    def finalize_options(self) -> None:
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    @report_buildtile_errors
    def run(self) -> None:
        from buildtile.config import load_project
        from buildtile.errors import ConfigError
        from buildtile.hooks.staging import install_in_place, stage_kernels
        from buildtile.interop.manifest import MANIFEST_DIR

        project = load_project(Path.cwd())
        if project.settings.c_abi.enabled:
            raise ConfigError(
                f"tool.buildtile.c-abi.enabled in {project.pyproject} needs the buildtile.build "
                "backend; the setuptools integration compiles kernels only",
                help='set build-backend = "buildtile.build" in [build-system], '
                "or tool.buildtile.c-abi.enabled = false",
            )
        staged = stage_kernels(project, log=self.announce_progress)
        if self.editable_mode:
            install_in_place(project, staged)
            return
        assert self.build_lib is not None
        target = Path(self.build_lib) / project.package / MANIFEST_DIR
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(staged.artifacts_dir, target)
        self._outputs = [str(p) for p in sorted(target.rglob("*")) if p.is_file()]

    def announce_progress(self, message: str) -> None:
        print(message, flush=True)

    # The compiled files are only known once compiled; before, there is nothing to report.
    def get_outputs(self) -> list[str]:
        return list(self._outputs)

    def get_output_mapping(self) -> dict[str, str]:
        return {}

    def get_source_files(self) -> list[str]:
        return []


def _has_buildtile_table(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False  # not ours to report: setuptools reads the file too
    return "buildtile" in data.get("tool", {})
