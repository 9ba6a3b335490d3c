"""MkDocs hook: the pages generated from the code.

Two pages are never written by hand, so they cannot drift from what the
code does:

- ``configuration.md``, from the settings model in :mod:`buildtile.config`
  (every ``[tool.buildtile]`` key, its type, default, checks and doc string,
  and how ``-C`` and ``BUILDTILE_*`` override it);
- ``errors.md``, from the table of error codes, ``CODES`` in
  :data:`CODES_MODULE`: an ordered mapping of code to an entry with
  ``.code``, ``.title``, ``.explanation``, ``.wrong`` and ``.right``.

A page that cannot be generated stops the build with the reason; it is
never left empty. ``render_configuration`` and ``render_error_codes`` are
plain functions, so tests can call them without MkDocs.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: the repository root: the pages describe the buildtile of this tree
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: where the error code table lives, and the name of the table in it
CODES_MODULE = "buildtile.codes"
CODES_NAME = "CODES"
#: the attributes every entry of the table has
CODE_FIELDS = ("code", "title", "explanation", "wrong", "right")


class PageError(Exception):
    """A generated page cannot be produced; the message says why."""


# --------------------------------------------------------------------------- configuration


class SettingDoc(typing.NamedTuple):
    """One leaf key of the settings model, as the configuration page shows it."""

    keys: tuple[str, ...]      # ("c-abi", "enabled")
    type_: Any                 # bool, int, str or list[str]
    default: Any
    doc: str
    schema: dict               # the key's part of the generated JSON schema
    required: bool


def setting_docs() -> list[SettingDoc]:
    """Every ``[tool.buildtile]`` key, read from the dataclasses that declare them."""
    from buildtile import config

    schema = config.json_schema()

    def walk(model: type, instance: object, keys: tuple[str, ...], part: dict) -> Iterator[SettingDoc]:
        hints = typing.get_type_hints(model)
        for f in dataclasses.fields(model):
            key = keys + (f.metadata["key"],)
            value = getattr(instance, f.name)
            sub = part["properties"][f.metadata["key"]]
            if dataclasses.is_dataclass(hints[f.name]):
                yield from walk(hints[f.name], value, key, sub)
                continue
            yield SettingDoc(key, hints[f.name], value, f.metadata["doc"], sub,
                             required=not keys and key[-1] in config.REQUIRED_KEYS)

    found = list(walk(config.BuildtileSettings, config.BuildtileSettings(), (), schema))
    documented = [s.keys for s in found]
    declared = list(config.model_keys())
    if documented != declared:
        raise PageError(f"the configuration page found keys {documented}, the model declares {declared}")
    return found


def env_name(keys: tuple[str, ...]) -> str:
    """The environment variable that overrides a key (``BUILDTILE_C_ABI_ENABLED``)."""
    from buildtile.config import ENV_PREFIX

    return ENV_PREFIX + "_".join(k.replace("-", "_").upper() for k in keys)


def _type_text(type_: Any) -> str:
    if typing.get_origin(type_) is list:
        return "list of strings"
    return {bool: "boolean", int: "integer", str: "string", dict: "table"}[type_]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    return str(value)


def _override_example(setting: SettingDoc) -> str:
    if typing.get_origin(setting.type_) is list:
        return "a,b"
    if setting.type_ is dict:  # a table given as text is JSON
        return '{"rows": {"shape": ["n"], "n": [128, 1024]}}'
    if setting.type_ is bool:
        return "1" if not setting.default else "0"
    if "enum" in setting.schema:
        return str(setting.schema["enum"][-1])
    if setting.type_ is str:
        return "<text>"
    return str(setting.default)


def _constraints(setting: SettingDoc) -> list[str]:
    out = []
    schema = setting.schema
    if "enum" in schema:
        out.append("one of " + ", ".join(f"`{_toml_value(v)}`" for v in schema["enum"]))
    if "minimum" in schema and "maximum" in schema:
        out.append(f"from {schema['minimum']} to {schema['maximum']}")
    if "minItems" in schema:
        out.append(f"at least {schema['minItems']} entry")
    pattern = schema.get("items", {}).get("pattern")
    if pattern:
        out.append(f"each entry matches `{pattern}`")
    return out


def render_configuration() -> str:
    """The text of ``configuration.md``."""
    from buildtile.config import CONFIG_SETTINGS_PREFIX, TABLE

    settings = setting_docs()
    lines = [
        "# Configuration",
        "",
        "!!! note \"Generated page\"",
        "    This page is generated from the settings model in `buildtile/config.py` "
        "when the documentation is built.",
        "",
        f"A project configures buildtile in the `[{TABLE}]` table of its `pyproject.toml`. "
        "Every value can also be set for one build, without editing the file. "
        "Each value is taken from the first of these that sets it:",
        "",
        f"1. an environment variable `BUILDTILE_<KEY>` (`{env_name(('targets',))}=sm_90`);",
        f"2. a PEP 517 config setting `{CONFIG_SETTINGS_PREFIX}<key>` "
        f"(`pip wheel . -C{CONFIG_SETTINGS_PREFIX}targets=sm_80,sm_90`);",
        f"3. the `[{TABLE}]` table.",
        "",
        "Values given as text (the first two) are parsed by type: a list is split at `,` or `;`, "
        "a boolean is `1`, `true`, `yes` or `on`, or `0`, `false`, `no`, `off` or empty, an integer "
        "is a decimal number. A repeated `-C` option of a list key adds to the list; of any other "
        "key, the last one wins. Other `-C` settings (without the `buildtile.` prefix) go to "
        "scikit-build-core unchanged.",
        "",
        "A key buildtile does not know, a value of the wrong type or one that fails its check stops "
        "the build with one `error[BT0010]` message naming the key and where it was set "
        "(the file, the config setting or the environment variable), with the key's "
        "description as help. `buildtile check` reads the same settings.",
        "",
        "The same model gives the JSON schema of the table (`buildtile.config.json_schema()`), "
        "which validate-pyproject picks up through buildtile's `validate_pyproject.tool_schema` "
        "entry point.",
        "",
        "## Every key with its default",
        "",
        "```toml",
        f"[{TABLE}]",
    ]
    table_of: dict[tuple[str, ...], list[SettingDoc]] = {}
    for s in settings:
        table_of.setdefault(s.keys[:-1], []).append(s)
    for table, members in table_of.items():
        if table:
            lines += ["", f"[{'.'.join((TABLE, *table))}]"]
        for s in members:
            value = '["my_package.ops"]   # required' if s.required else _toml_value(s.default)
            lines.append(f"{s.keys[-1]} = {value}")
    lines += ["```", ""]

    for s in settings:
        dotted = ".".join(s.keys)
        lines += [f"## `{dotted}` {{#{dotted.replace('.', '-')}}}", ""]
        lines += [s.doc, ""]
        lines += [
            f"- TOML: `{s.keys[-1]}` in `[{'.'.join((TABLE, *s.keys[:-1]))}]`",
            f"- Type: {_type_text(s.type_)}",
            "- Default: " + ("none, the key is required" if s.required else f"`{_toml_value(s.default)}`"),
        ]
        constraints = _constraints(s)
        if constraints:
            lines.append("- Allowed: " + "; ".join(constraints))
        lines += [
            f"- Config setting: `-C{CONFIG_SETTINGS_PREFIX}{dotted}={_override_example(s)}`",
            f"- Environment: `{env_name(s.keys)}={_override_example(s)}`",
            "",
        ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- error codes


def load_codes() -> list[Any]:
    """The entries of the error code table, in its order; PageError when it cannot be read."""
    try:
        module = importlib.import_module(CODES_MODULE)
    except ImportError as exc:
        raise PageError(f"the error code page is generated from {CODES_MODULE}.{CODES_NAME}, "
                        f"which cannot be imported: {exc}") from exc
    table = getattr(module, CODES_NAME, None)
    if table is None:
        raise PageError(f"{CODES_MODULE} has no {CODES_NAME} table")
    entries = list(table.values())
    if not entries:
        raise PageError(f"{CODES_MODULE}.{CODES_NAME} is empty")
    for key, entry in zip(table, entries):
        missing = [name for name in CODE_FIELDS if not isinstance(getattr(entry, name, None), str)]
        if missing:
            raise PageError(f"{CODES_MODULE}.{CODES_NAME}[{key!r}] has no text for {', '.join(missing)}")
    return entries


def _example(label: str, code: str) -> list[str]:
    if not code.strip():
        return []
    return [f"{label}:", "", "```python", code.strip("\n"), "```", ""]


def render_error_codes() -> str:
    """The text of ``errors.md``."""
    entries = load_codes()
    lines = [
        "# Error codes",
        "",
        "!!! note \"Generated page\"",
        f"    This page is generated from the error code table (`{CODES_MODULE}`) "
        "when the documentation is built.",
        "",
        "Every error buildtile reports carries a code, `error[BT0308]: ...`, the same in build "
        "diagnostics, in the Python host's exceptions and in the C ABI's status codes "
        "(`BT_ERR_ALIAS == 502` is `BT0502`). `buildtile explain CODE` prints an entry of this page.",
        "",
        "| code | meaning |",
        "| --- | --- |",
    ]
    lines += [f"| [{e.code}](#{e.code.lower()}) | {e.title} |" for e in entries]
    lines.append("")
    for e in entries:
        lines += [f"## {e.code}: {e.title} {{#{e.code.lower()}}}", "", e.explanation.strip(), ""]
        lines += _example("Wrong", e.wrong)
        lines += _example("Right", e.right)
    return "\n".join(lines)


# --------------------------------------------------------------------------- the MkDocs hook

#: page -> the function that writes it
GENERATED_PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": render_configuration,
    "errors.md": render_error_codes,
}


def on_files(files, config):
    """Add the generated pages to the site (MkDocs ``on_files`` event)."""
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    for uri, render in GENERATED_PAGES.items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} is generated when the site is built; remove the file")
        try:
            content = render()
        except PageError as exc:
            raise PluginError(f"cannot generate {uri}: {exc}") from exc
        files.append(File.generated(config, uri, content=content))
    return files
