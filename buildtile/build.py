"""PEP 517 build backend: ``build-backend = "buildtile.build"``.

Compiles a project's kernels ahead of time, then has scikit-build-core
package them with the project's Python files (and, with ``c-abi.enabled``,
build the C shim library) into the wheel.

This module stays thin: every hook imports its implementation
(:mod:`buildtile.hooks.pep517`) only when it is called, so importing it is
cheap and has no side effects. Errors cross the hook boundary once: a
buildtile error becomes one clean message on stderr and exit status 1, never
a traceback.
"""

from __future__ import annotations

from buildtile.hooks.boundary import report_buildtile_errors

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


@report_buildtile_errors
def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
    metadata_directory: str | None = None,
) -> str:
    from buildtile.hooks import pep517

    return pep517.build_wheel(wheel_directory, config_settings, metadata_directory)


@report_buildtile_errors
def build_editable(
    wheel_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
    metadata_directory: str | None = None,
) -> str:
    from buildtile.hooks import pep517

    return pep517.build_editable(wheel_directory, config_settings, metadata_directory)


@report_buildtile_errors
def build_sdist(
    sdist_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
) -> str:
    from buildtile.hooks import pep517

    return pep517.build_sdist(sdist_directory, config_settings)


@report_buildtile_errors
def get_requires_for_build_wheel(
    config_settings: dict[str, str | list[str]] | None = None,
) -> list[str]:
    from buildtile.hooks import pep517

    return pep517.get_requires(config_settings, "wheel")


@report_buildtile_errors
def get_requires_for_build_editable(
    config_settings: dict[str, str | list[str]] | None = None,
) -> list[str]:
    from buildtile.hooks import pep517

    return pep517.get_requires(config_settings, "editable")


@report_buildtile_errors
def get_requires_for_build_sdist(
    config_settings: dict[str, str | list[str]] | None = None,
) -> list[str]:
    from buildtile.hooks import pep517

    return pep517.get_requires(config_settings, "sdist")


@report_buildtile_errors
def prepare_metadata_for_build_wheel(
    metadata_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
) -> str:
    from buildtile.hooks import pep517

    return pep517.prepare_metadata(metadata_directory, config_settings, editable=False)


@report_buildtile_errors
def prepare_metadata_for_build_editable(
    metadata_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
) -> str:
    from buildtile.hooks import pep517

    return pep517.prepare_metadata(metadata_directory, config_settings, editable=True)
