"""``[tool.buildtile]`` settings: one typed model and its reader."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from buildtile.errors import ConfigError


@dataclass
class CAbiSettings:
    enabled: bool = False


@dataclass
class BuildtileSettings:
    kernels: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=lambda: ["sm_80", "sm_90"])
    ptx: bool = True
    opt_level: int = 3
    checks: str = "release"
    c_abi: CAbiSettings = field(default_factory=CAbiSettings)


@dataclass
class Project:
    root: Path                 # folder holding pyproject.toml
    pyproject: Path
    dist_name: str             # [project].name
    version: str
    package: str               # top-level import package that carries the kernels
    settings: BuildtileSettings


def load_project(root: str | Path) -> Project:
    root = Path(root).resolve()
    pyproject = root / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{pyproject} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject} is not valid TOML: {exc}") from None
    proj = data.get("project", {})
    raw = data.get("tool", {}).get("buildtile", {})
    settings = read_settings(raw, str(pyproject))
    package = settings.kernels[0].split(".")[0].split("/")[0] if settings.kernels else ""
    return Project(
        root=root,
        pyproject=pyproject,
        dist_name=proj.get("name", root.name),
        version=str(proj.get("version", "0")),
        package=package,
        settings=settings,
    )


def read_settings(raw: dict, where: str) -> BuildtileSettings:
    s = BuildtileSettings()
    for key, value in raw.items():
        if key == "kernels":
            s.kernels = list(value)
        elif key == "targets":
            s.targets = list(value)
        elif key == "ptx":
            s.ptx = bool(value)
        elif key == "opt-level":
            s.opt_level = int(value)
        elif key == "checks":
            s.checks = str(value)
        elif key == "c-abi":
            s.c_abi = CAbiSettings(enabled=bool(value.get("enabled", False)))
        else:
            raise ConfigError(f"unknown key tool.buildtile.{key} in {where}")
    return s
