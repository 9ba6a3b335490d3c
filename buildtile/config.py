"""``[tool.buildtile]`` settings: one typed model and its reader.

The dataclasses below are the single source of truth: the TOML keys, their
types, the checks on their values and the JSON schema all come from them.
Values are read from three places, highest priority first:

- ``BUILDTILE_<KEY>`` environment variables (``BUILDTILE_TARGETS=sm_90``,
  ``BUILDTILE_C_ABI_ENABLED=0``),
- ``buildtile.<key>`` PEP 517 config settings
  (``pip wheel . -Cbuildtile.targets=sm_80,sm_90``),
- the ``[tool.buildtile]`` table of ``pyproject.toml``.

Lists given as text are separated by ``,`` or ``;``. Every problem is one
:class:`~buildtile.errors.ConfigError` naming the key and where it was set.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from buildtile.cache import cache_dir_problem
from buildtile.cache_tiers import CACHE_MODES, READ_WRITE, cache_mode_problem, cache_remote_problem
from buildtile.executors import executor_problem
from buildtile.errors import ConfigError
from buildtile.interop.abi import DTYPES as ABI_DTYPES
from buildtile.toolchain.targets import SUPPORTED_TARGETS, TARGET_SPELLING

TABLE = "tool.buildtile"
CONFIG_SETTINGS_PREFIX = "buildtile."
ENV_PREFIX = "BUILDTILE_"

CHECK_MODES = ("release", "debug")
OPT_LEVELS = range(4)
_OLDEST_ARCH = int(TARGET_SPELLING.fullmatch(SUPPORTED_TARGETS[0]).group(1))
#: the folder that holds the import packages in a "src layout" (where discovery looks too)
SOURCE_DIRS = ("src",)

_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_GLOB_CHARS = "*?["
#: a path entry of ``kernels`` as the JSON schema sees it: relative, ``/``-separated, no ``..``
#: (what :func:`_check_kernels` refuses in other words; the tests hold the two together)
_PATH_ENTRY_PATTERN = r"^(?!/)(?!.*\\)(?!(.*/)?\.\.(/|$))(?=.*(/|\.py$|[*?\[])).*$"
#: the JSON schema draft the schema is written in (validate-pyproject's)
JSON_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"
#: the schema's ``$id``: validate-pyproject refers to each tool's schema by it
SCHEMA_ID = "urn:buildtile:tool-buildtile-schema"

Check = Callable[[Any], "str | None"]  # returns what is wrong with a value, or None


# --------------------------------------------------------------------------- checks


def _check_targets(targets: list[str]) -> str | None:
    if not targets:
        return "must list at least one target, e.g. [\"sm_80\"]"
    for target in targets:
        # the message's help lists the supported targets (the field's documentation)
        if target in SUPPORTED_TARGETS:
            continue
        match = TARGET_SPELLING.fullmatch(target)
        if match is None:
            return f"{target!r} is not a GPU target; targets look like \"sm_80\" or \"sm_90a\""
        if int(match.group(1)) < _OLDEST_ARCH:
            return f"{target!r} is older than {SUPPORTED_TARGETS[0]}, the oldest supported target"
        return f"{target!r} is not a GPU target buildtile can build for"
    duplicates = sorted({t for t in targets if targets.count(t) > 1})
    if duplicates:
        return f"lists {', '.join(duplicates)} more than once"
    return None


def _check_kernels(kernels: list[str]) -> str | None:
    if not kernels:
        return "must list at least one kernel module (\"pkg.ops\") or glob (\"pkg/tiles/*.py\")"
    for entry in kernels:
        if _is_path_entry(entry):
            path = PurePosixPath(entry)
            if "\\" in entry or path.is_absolute() or ".." in path.parts:
                return (
                    f"{entry!r} must be a path relative to the project folder, "
                    "with '/' separators and no '..'"
                )
        elif not _MODULE_NAME.fullmatch(entry):
            return f"{entry!r} is neither a dotted module name nor a relative path or glob"
    return None


def _check_opt_level(level: int) -> str | None:
    if level not in OPT_LEVELS:
        return f"must be 0, 1, 2 or 3, got {level}"
    return None


def _check_checks(mode: str) -> str | None:
    if mode not in CHECK_MODES:
        return f"must be \"release\" or \"debug\", got {mode!r}"
    return None


def _check_jobs(jobs: int) -> str | None:
    if jobs < 0:
        return f"must be 0 (one per CPU core) or a positive number, got {jobs}"
    return None


#: the keys of a ``[tool.buildtile.tile.specialize.<name>]`` table that are not value lists
SHAPE_KEY = "shape"
PYPROJECT_MAX_ELEMENTS_KEY = "max-elements"


def product_table_problem(raw: object) -> str | None:
    """What is wrong with one ``[tool.buildtile.tile.specialize.<name>]`` table, or None.

    ``shape`` lists the tile shape of every tile.Out parameter in terms of the
    other keys (or a table of such lists per parameter), ``max-elements`` drops
    larger tiles, every other key is a non-empty list of tile extents or of
    dtype names. Whether a kernel can use it is checked when it is compiled.
    """
    if not isinstance(raw, dict):
        return "expected a table of value lists"
    for key, value in raw.items():
        if key == SHAPE_KEY:
            shapes = value.values() if isinstance(value, dict) else [value]
            for shape in shapes:
                if not (isinstance(shape, list) and shape and all(
                        isinstance(e, str) or (isinstance(e, int) and not isinstance(e, bool) and e >= 1)
                        for e in shape)):
                    return (f"`{SHAPE_KEY}` is a list of names and positive integers (one per axis), or a table "
                            "of them per tile.Out parameter")
            continue
        if key == PYPROJECT_MAX_ELEMENTS_KEY:
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                return f"`{key}` is a positive integer (combinations with larger tiles are dropped)"
            continue
        if not (isinstance(value, list) and value):
            return f"`{key}` is a non-empty list of tile extents or dtype names"
        if all(isinstance(v, str) for v in value):
            unknown = [v for v in value if v not in ABI_DTYPES]
            if unknown:
                return f"`{key}`: {unknown[0]!r} is not a dtype ({', '.join(ABI_DTYPES)})"
        elif not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value):
            return f"`{key}` is a list of positive tile extents or of dtype names, not a mix"
        if len(set(value)) != len(value):
            return f"`{key}` lists a value twice"
    return None


def _check_tile_specialize(table: dict) -> str | None:
    for name, raw in table.items():
        if not _MODULE_NAME.fullmatch(name) or "." in name:
            return f"{name!r} is not a name a kernel can give as `specialize=\"{name}\"`"
        problem = product_table_problem(raw)
        if problem:
            return f"`{name}`: {problem}"
    return None


def _meta(key: str, doc: str, check: Check | None = None) -> dict:
    """What the reader and the schema need of a field: TOML key, documentation, value check."""
    return {"key": key, "doc": doc, "check": check}


# --------------------------------------------------------------------------- model


@dataclass
class CAbiSettings:
    enabled: bool = field(default=False, metadata=_meta(
        "enabled",
        "Build a shared library with extern \"C\" launchers, headers and a CMake package "
        "config into the wheel, for C and C++ hosts.",
    ))


@dataclass
class TileSettings:
    specialize: dict = field(default_factory=dict, metadata=_meta(
        "specialize",
        "Named products of value lists that tile kernels name with `specialize=\"<name>\"`: "
        "`shape` gives the tile shape in terms of the other keys (e.g. [\"rows\", \"cols\"]), each other "
        "key lists tile extents or dtype names, `max-elements` drops larger tiles.",
        _check_tile_specialize,
    ))


@dataclass
class TorchSettings:
    ops: bool = field(default=False, metadata=_meta(
        "ops",
        "Register every kernel of the package as a torch.library custom op "
        "(torch.ops.<package>.<kernel>) when the package is imported and torch is installed.",
    ))


@dataclass
class JaxSettings:
    ffi: bool = field(default=False, metadata=_meta(
        "ffi",
        "Ship an XLA FFI handler per kernel (over the C ABI, which it needs) so the kernels can be "
        "called inside jax.jit.",
    ))


@dataclass
class BuildtileSettings:
    kernels: list[str] = field(default_factory=list, metadata=_meta(
        "kernels",
        "Modules (\"pkg.ops\") or globs relative to the project (\"pkg/tiles/*.py\") whose "
        "kernels are compiled. They are parsed, never imported.",
        _check_kernels,
    ))
    targets: list[str] = field(default_factory=lambda: ["sm_80", "sm_90"], metadata=_meta(
        "targets",
        "GPU architectures to compile a cubin for, any of " + ", ".join(SUPPORTED_TARGETS) + " (an \"a\" "
        "suffix such as sm_90a enables architecture-specific instructions).",
        _check_targets,
    ))
    ptx: bool = field(default=True, metadata=_meta(
        "ptx", "Also ship the PTX of the lowest target, so newer GPUs can JIT-compile it.",
    ))
    opt_level: int = field(default=3, metadata=_meta(
        "opt-level", "LLVM optimisation level, 0 to 3.", _check_opt_level,
    ))
    checks: str = field(default="release", metadata=_meta(
        "checks",
        "\"release\", or \"debug\" for bounds-checked reads reported as BoundsError.",
        _check_checks,
    ))
    c_abi: CAbiSettings = field(default_factory=CAbiSettings, metadata=_meta(
        "c-abi", "The C ABI shim library.",
    ))
    tile: TileSettings = field(default_factory=TileSettings, metadata=_meta(
        "tile", "Tile kernels: specializations declared once for many kernels.",
    ))
    torch: TorchSettings = field(default_factory=TorchSettings, metadata=_meta(
        "torch", "PyTorch integration: kernels as torch.library custom ops.",
    ))
    jax: JaxSettings = field(default_factory=JaxSettings, metadata=_meta(
        "jax", "JAX integration: kernels as XLA FFI custom calls inside jax.jit.",
    ))
    jobs: int = field(default=0, metadata=_meta(
        "jobs", "Kernels x targets compiled at once; 0 means one per CPU core.", _check_jobs,
    ))
    cache_dir: str = field(default="", metadata=_meta(
        "cache-dir",
        "Where compiled kernels are cached by content; empty means the user cache "
        "($XDG_CACHE_HOME/buildtile or ~/.cache/buildtile). \"off\" disables the cache.",
        cache_dir_problem,
    ))
    cache_remote: str = field(default="", metadata=_meta(
        "cache-remote",
        "A cache shared by a team, behind the local one: a folder several machines use at once "
        "(a network file system), or an fsspec URL (s3://bucket/prefix, gs://..., http://...). "
        "Empty means none.",
        cache_remote_problem,
    ))
    cache_mode: str = field(default=READ_WRITE, metadata=_meta(
        "cache-mode",
        "\"read-write\", or \"read-only\": take kernels from cache-remote but never publish to it "
        "(CI jobs that consume what others built).",
        cache_mode_problem,
    ))
    executor: str = field(default="local", metadata=_meta(
        "executor",
        "Where compile jobs run: \"local\" (a process pool on this machine) or a Dask distributed "
        "scheduler, \"dask://HOST:PORT\" (needs buildtile[dask]).",
        executor_problem,
    ))
    executor_strict: bool = field(default=False, metadata=_meta(
        "executor-strict",
        "Fail the build (BT0040) when the executor's cluster cannot be used, instead of warning and "
        "compiling on this machine.",
    ))


def compile_options(settings: BuildtileSettings):
    """The options every kernel of a project is analysed and compiled with."""
    from buildtile.backend import CompileOptions

    return CompileOptions(opt_level=settings.opt_level, checks=settings.checks,
                          tile_specialize=json.dumps(settings.tile.specialize, sort_keys=True)
                          if settings.tile.specialize else "", targets=tuple(sorted(settings.targets)))


#: keys a project must set (there is no sensible default for what to compile)
REQUIRED_KEYS = ("kernels",)


@dataclass
class Project:
    root: Path                 # folder holding pyproject.toml
    pyproject: Path
    dist_name: str             # [project].name
    version: str
    package: str               # top-level import package that carries the kernels
    settings: BuildtileSettings
    source_root: Path | None = None   # folder holding `package`: root, or root/src in a src layout

    def __post_init__(self) -> None:
        if self.source_root is None:
            self.source_root = self.root

    @property
    def package_dir(self) -> Path:
        """The import package's folder in the source tree."""
        assert self.source_root is not None
        return self.source_root / self.package


# --------------------------------------------------------------------------- loading


def load_project(
    root: str | Path,
    config_settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Project:
    """Read and check ``root/pyproject.toml``.

    ``config_settings`` are the PEP 517 config settings (only the ``buildtile.*``
    keys are read); ``env`` defaults to ``os.environ``.
    """
    root = Path(root).resolve()
    pyproject = root / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{pyproject} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{pyproject} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                          help="TOML files are UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{pyproject} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject} is not valid TOML: {exc}") from None

    tool = data.get("tool", {})
    if "buildtile" not in tool:
        raise ConfigError(
            f"{pyproject} has no [{TABLE}] table",
            help='add one that lists the kernel modules, e.g. kernels = ["my_package.ops"]',
        )
    settings = read_settings(
        tool["buildtile"],
        str(pyproject),
        config_settings=_buildtile_config_settings(config_settings or {}),
        env=os.environ if env is None else env,
    )
    package, source_root = locate_package(root, settings.kernels, str(pyproject))

    project_table = data.get("project", {})
    return Project(
        root=root,
        pyproject=pyproject,
        dist_name=str(project_table.get("name", root.name)),
        version=str(project_table.get("version", "0")),
        package=package,
        settings=settings,
        source_root=source_root,
    )


def read_settings(
    raw: Any,
    where: str,
    *,
    config_settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> BuildtileSettings:
    """Build the settings from a ``[tool.buildtile]`` table found in ``where``.

    ``config_settings`` are keyed without the ``buildtile.`` prefix
    (``{"targets": "sm_90"}``); ``env`` is read for ``BUILDTILE_*`` names.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{TABLE} in {where}: expected a table, got {_type_name(raw)}")
    reader = _Reader(where, config_settings or {}, env or {})
    reader.reject_unknown_keys(raw, BuildtileSettings, ())
    reader.reject_unknown_config_settings()
    settings = reader.build(raw, BuildtileSettings, ())
    for key in REQUIRED_KEYS:
        if key not in raw and not reader.overridden((key,)):
            raise ConfigError(
                f"{TABLE}.{key} is missing in {where}",
                help=f"{TABLE}.{key}: {_doc(BuildtileSettings, key)}",
            )
    return settings


def locate_package(root: Path, kernels: list[str], where: str) -> tuple[str, Path]:
    """The top-level import package the kernel entries live in, and its parent folder.

    Entries are looked up as discovery does: in the project folder first, then in
    ``src/``; a path may also name the source folder itself (``src/pkg/*.py``).
    All entries must share one package: its ``_buildtile`` folder holds the manifest.
    """
    found: dict[str, Path] = {}
    for entry in kernels:
        if _is_path_entry(entry):
            parts = PurePosixPath(entry).parts
            if len(parts) > 1 and parts[0] in SOURCE_DIRS and (root / parts[0] / parts[1]).is_dir():
                parts = parts[1:]
            if len(parts) < 2 or any(c in parts[0] for c in _GLOB_CHARS):
                raise ConfigError(
                    f"{TABLE}.kernels in {where}: {entry!r} is not inside a package",
                    help="kernel modules live in an import package: list \"my_package/ops.py\"",
                )
            package = parts[0]
        else:
            package = entry.split(".")[0]
        source_root = _source_root(root, package)
        if not (source_root / package).is_dir() and (source_root / f"{package}.py").is_file():
            raise ConfigError(
                f"{TABLE}.kernels in {where}: {entry!r} is a top-level module, not inside a package",
                help="move it into an import package (a folder with __init__.py)",
            )
        found.setdefault(package, source_root)
    if len(found) > 1:
        raise ConfigError(
            f"{TABLE}.kernels in {where}: the kernels come from several top-level packages "
            f"({', '.join(sorted(found))})",
            help="a wheel's kernels live in one import package, which carries their manifest",
        )
    ((package, source_root),) = found.items()
    return package, source_root


def _source_root(root: Path, package: str) -> Path:
    for base in (root, *(root / d for d in SOURCE_DIRS)):
        if (base / package).is_dir():
            return base
    return root


# --------------------------------------------------------------------------- the reader


class _Reader:
    """Walks the model once, taking each value from the highest-priority source."""

    def __init__(self, where: str, config_settings: Mapping[str, Any], env: Mapping[str, str]):
        self.where = where
        self.config_settings = config_settings
        self.env = env

    def overridden(self, keys: tuple[str, ...]) -> bool:
        return _env_name(keys) in self.env or ".".join(keys) in self.config_settings

    def reject_unknown_keys(self, raw: dict, model: type, keys: tuple[str, ...]) -> None:
        known = {f.metadata["key"]: f for f in dataclasses.fields(model)}
        for key, value in raw.items():
            if key not in known:
                suggestion = difflib.get_close_matches(key.replace("_", "-"), known, n=1)
                hint = f"did you mean `{suggestion[0]}`? " if suggestion else ""
                raise ConfigError(
                    f"unknown key {_toml_key(keys + (key,))} in {self.where}",
                    help=hint + "known keys: " + ", ".join(".".join(k) for k in model_keys(model, keys)),
                )
            nested = _nested_model(model, known[key])
            if nested is not None and isinstance(value, dict):
                self.reject_unknown_keys(value, nested, keys + (key,))

    def reject_unknown_config_settings(self) -> None:
        known = {".".join(k) for k in model_keys()}
        for setting in self.config_settings:
            if setting not in known:
                suggestion = difflib.get_close_matches(setting.replace("_", "-"), known, n=1)
                hint = f"did you mean `{CONFIG_SETTINGS_PREFIX}{suggestion[0]}`? " if suggestion else ""
                raise ConfigError(
                    f"unknown config setting {CONFIG_SETTINGS_PREFIX}{setting}",
                    help=hint + "known settings: "
                    + ", ".join(CONFIG_SETTINGS_PREFIX + k for k in sorted(known)),
                )

    def build(self, raw: dict, model: type, keys: tuple[str, ...]) -> Any:
        values = {}
        for f in dataclasses.fields(model):
            key = keys + (f.metadata["key"],)
            nested = _nested_model(model, f)
            if nested is not None:
                table = raw.get(f.metadata["key"], {})
                if not isinstance(table, dict):
                    raise ConfigError(
                        f"{_toml_key(key)} in {self.where}: expected a table, got {_type_name(table)}"
                    )
                values[f.name] = self.build(table, nested, key)
                continue
            value, where = self._value(raw, key, _field_type(model, f))
            if value is _MISSING:
                continue
            check: Check | None = f.metadata["check"]
            problem = check(value) if check else None
            if problem:
                raise ConfigError(f"{where}: {problem}", help=f"{_toml_key(key)}: {f.metadata['doc']}")
            values[f.name] = value
        return model(**values)

    def _value(self, raw: dict, keys: tuple[str, ...], type_: Any) -> tuple[Any, str]:
        """The value for ``keys`` and a description of where it came from, for messages."""
        env_name = _env_name(keys)
        if env_name in self.env:
            where = f"environment variable {env_name}"
            return _parse_text(self.env[env_name], type_, where), where
        setting = ".".join(keys)
        if setting in self.config_settings:
            where = f"config setting {CONFIG_SETTINGS_PREFIX}{setting}"
            text = self.config_settings[setting]
            if isinstance(text, list):  # the option was repeated
                text = ",".join(text) if typing.get_origin(type_) is list else text[-1]
            return _parse_text(str(text), type_, where), where
        if keys[-1] in raw:
            where = f"{_toml_key(keys)} in {self.where}"
            return _check_toml_type(raw[keys[-1]], type_, where), where
        return _MISSING, ""


_MISSING = object()


def _check_toml_type(value: Any, type_: Any, where: str) -> Any:
    expected = _describe_type(type_)
    if typing.get_origin(type_) is list:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    elif type_ is int:
        # bool is an int in Python but `opt-level = true` is a mistake in TOML
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, type_):
        return value
    raise ConfigError(f"{where}: expected {expected}, got {_type_name(value)} {value!r}")


def _parse_text(text: str, type_: Any, where: str) -> Any:
    """Values from the command line or the environment arrive as text."""
    if typing.get_origin(type_) is list:
        return [item.strip() for item in re.split(r"[,;]", text) if item.strip()]
    if type_ is bool:
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
    elif type_ is int:
        try:
            return int(text)
        except ValueError:
            pass
    elif type_ is str:
        return text.strip()
    elif type_ is dict:  # a table given as text is JSON
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        raise ConfigError(f"{where}: expected a table written as JSON, got {text!r}")
    raise ConfigError(f"{where}: expected {_describe_type(type_)}, got {text!r}")


# --------------------------------------------------------------------------- the model, as data


def model_keys(model: type = BuildtileSettings, keys: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf key of the model, as TOML key tuples: ("kernels",), ("c-abi", "enabled") ..."""
    for f in dataclasses.fields(model):
        key = keys + (f.metadata["key"],)
        nested = _nested_model(model, f)
        if nested is not None:
            yield from model_keys(nested, key)
        else:
            yield key


def json_schema(model: type = BuildtileSettings) -> dict:
    """A JSON schema of ``[tool.buildtile]``, generated from the model (for editors and validators)."""
    properties = {}
    for f in dataclasses.fields(model):
        nested = _nested_model(model, f)
        if nested is not None:
            prop = json_schema(nested)
        else:
            prop = _json_type(_field_type(model, f))
        prop["description"] = f.metadata["doc"]
        properties[f.metadata["key"]] = prop
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if model is BuildtileSettings:
        schema["required"] = list(REQUIRED_KEYS)
        properties["checks"]["enum"] = list(CHECK_MODES)
        properties["opt-level"].update(minimum=OPT_LEVELS[0], maximum=OPT_LEVELS[-1])
        properties["targets"]["items"]["enum"] = list(SUPPORTED_TARGETS)
        properties["targets"].update(minItems=1, uniqueItems=True)
        properties["kernels"]["minItems"] = 1
        properties["kernels"]["items"]["anyOf"] = [
            {"pattern": f"^{_MODULE_NAME.pattern}$"}, {"pattern": _PATH_ENTRY_PATTERN}]
        properties["jobs"]["minimum"] = 0
        # no NUL (written as an escape, which Python's and JavaScript's regular expressions share);
        # what else the reader refuses (an unknown ~user ...) depends on the machine
        properties["cache-dir"]["pattern"] = r"^[^\u0000]*$"
        properties["cache-mode"]["enum"] = list(CACHE_MODES)
        properties["executor"]["pattern"] = r"^(local|dask://.+:[0-9]+)$"
    return schema


def _json_type(type_: Any) -> dict:
    if typing.get_origin(type_) is list:
        return {"type": "array", "items": {"type": "string"}}
    if type_ is dict:
        return _tile_products_schema()
    return {"type": {bool: "boolean", int: "integer", str: "string"}[type_]}


def _tile_products_schema() -> dict:
    """``[tool.buildtile.tile.specialize]``: a table of named products (what product_table_problem reads)."""
    entry = {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]}
    shape = {"type": "array", "minItems": 1, "items": entry}
    values = {"anyOf": [
        {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "integer", "minimum": 1}},
        {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(ABI_DTYPES)}},
    ]}
    product = {"type": "object",
               "properties": {SHAPE_KEY: {"anyOf": [shape, {"type": "object", "additionalProperties": shape}]},
                              PYPROJECT_MAX_ELEMENTS_KEY: {"type": "integer", "minimum": 1}},
               "additionalProperties": values}
    return {"type": "object", "propertyNames": {"pattern": r"^[A-Za-z_]\w*$"}, "additionalProperties": product}


def _field_type(model: type, f: dataclasses.Field) -> Any:
    return typing.get_type_hints(model)[f.name]


def _nested_model(model: type, f: dataclasses.Field) -> type | None:
    type_ = _field_type(model, f)
    return type_ if dataclasses.is_dataclass(type_) else None


def _doc(model: type, key: str) -> str:
    (doc,) = (f.metadata["doc"] for f in dataclasses.fields(model) if f.metadata["key"] == key)
    return doc


def _describe_type(type_: Any) -> str:
    if typing.get_origin(type_) is list:
        return "a list of strings"
    return {bool: "true or false", int: "an integer", str: "a string", dict: "a table"}[type_]


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def _toml_key(keys: tuple[str, ...]) -> str:
    return ".".join((TABLE, *keys))


def _env_name(keys: tuple[str, ...]) -> str:
    return ENV_PREFIX + "_".join(k.replace("-", "_").upper() for k in keys)


def _is_path_entry(entry: str) -> bool:
    return "/" in entry or "\\" in entry or entry.endswith(".py") or any(c in entry for c in _GLOB_CHARS)


def _buildtile_config_settings(config_settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key[len(CONFIG_SETTINGS_PREFIX):]: value
        for key, value in config_settings.items()
        if key.startswith(CONFIG_SETTINGS_PREFIX)
    }


def tool_schema(tool: str = "buildtile") -> dict:
    """The JSON schema of ``[tool.$tool]`` (buildtile's settings), for validate-pyproject.

    validate-pyproject calls its ``tool_schema`` entry points with the tool's name.
    """
    return {"$schema": JSON_SCHEMA_DRAFT, "$id": SCHEMA_ID, **json_schema()}
