"""``buildtile inspect``: what a wheel or an installed package carries, or one stage of one kernel."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from dataclasses import replace
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.image_sizes import size_summary
from buildtile.interop import manifest as manifest_io
from buildtile.interop.abi import spell_type


def load_manifest(target: str) -> tuple[dict, dict[str, int]]:
    """The manifest of a wheel file, a package folder or an importable package, with file sizes."""
    path = Path(target)
    if path.suffix == ".whl" and path.is_file():
        with zipfile.ZipFile(path) as wheel:
            names = [n for n in wheel.namelist() if n.endswith(f"/{manifest_io.MANIFEST_DIR}/{manifest_io.MANIFEST_NAME}")]
            if not names:
                raise BuildtileError(f"{path} carries no buildtile manifest", code="BT0620")
            data = json.loads(wheel.read(names[0]))
            base = names[0].rsplit("/", 1)[0]
            sizes = {i.filename[len(base) + 1:]: i.file_size for i in wheel.infolist() if i.filename.startswith(base + "/")}
    else:
        if not path.is_dir():
            spec = importlib.util.find_spec(target)
            if spec is None or not spec.submodule_search_locations:
                raise BuildtileError(f"`{target}` is not a wheel, a package folder or an importable package", code="BT0620")
            path = Path(next(iter(spec.submodule_search_locations)))
        data = manifest_io.load(manifest_io.manifest_path(path))
        base_dir = path / manifest_io.MANIFEST_DIR
        sizes = {str(p.relative_to(base_dir)): p.stat().st_size for p in base_dir.rglob("*") if p.is_file()}
    manifest_io.check_versions(data, target)
    return data, sizes


def describe(target: str, as_json: bool = False) -> str:
    data, sizes = load_manifest(target)
    if as_json:
        return json.dumps({"manifest": data, "sizes": sizes}, indent=2, sort_keys=True)
    out = [f"package {data['package']}  (buildtile {data['buildtile_version']}, ABI v{data['abi_version']})",
           f"targets: {', '.join(data['targets'])}" + (f"; PTX for {data['ptx_target']}" if data.get("ptx_target") else "")]
    for k in data["kernels"]:
        params = ", ".join(f"{p['name']}: {_spell(p)}" for p in k["params"])
        block = k["contract"].get("block")
        launch = ("one block per tile" if "tile" in k else
                  f"block={tuple(block)}" if block else "no contract: unsafe_launch only")
        out.append(f"\n{k['module']}.{k['name']}({params})  [{k['kind']}, {launch}]")
        entries = k.get("tile", {}).get("specializations", [{"artifacts": k["artifacts"]}])
        entries = [e for spec in entries for e in [spec, *([spec["tma"]] if "tma" in spec else [])]]
        for spec in [*entries, *([k["aligned"]] if "aligned" in k else [])]:
            if "tile_shapes" in spec:
                dtypes = f", dtypes {spec['dtypes']}" if spec.get("dtypes") else ""
                out.append(f"  tile shapes {spec['tile_shapes']}{dtypes}: block {tuple(spec['block'])}, "
                           f"{spec['shared_bytes']} bytes of shared memory")
            if "maps" in spec:
                maps = ", ".join(f"{m['param']} box {tuple(m['box'])}" for m in spec["maps"])
                out.append(f"  its TMA entry (wgmma fed by TMA; {maps}): block {tuple(spec['block'])}, "
                           f"{spec['shared_bytes']} bytes of shared memory")
            if "align" in spec:
                out.append(f"  aligned entry, for data pointers aligned to {spec['align']} bytes:")
            for key, art in sorted(spec["artifacts"].items()):
                out.append(f"    {key:<6} {art['kind']:<5} {sizes.get(art['path'], art.get('size', 0)):>8} bytes  "
                           f"sha256 {art['sha256'][:12]}")
    out += size_summary(data, sizes)
    libs = [n for n in sizes if n.startswith("lib/")]
    if libs:
        out.append("\nC ABI: " + ", ".join(f"{n} ({sizes[n]} bytes)" for n in libs))
    return "\n".join(out)


def _spell(p: dict) -> str:
    return spell_type(p["kind"], p["dtype"], p["rank"])


def show_stage(kernel: str, stage: str, path: str | Path = ".", target: str | None = None) -> str:
    """One stage's text of one kernel of the project at ``path``, compiled from its source.

    ``kernel`` is ``name`` or ``module.name``, optionally followed by ``.<entry label>``
    (``add.t1024``) to pick one specialization; without one, a kernel with several
    prints each under a ``==> <entry> <==`` line. ``target`` defaults to the
    project's oldest.
    """
    from buildtile.compiler import (analyze, check_targets, compile_entries, discover, entry_ptx, entry_targets,
                                    project_targets)
    from buildtile.config import compile_options, load_project
    from buildtile.stages import entry_name, parse_stages, stage_text
    from buildtile.toolchain.ptx import target_arch

    (chosen,) = parse_stages([stage], where="--stage")
    project = load_project(path)
    options = compile_options(project.settings)
    sources = discover(project)
    matches = [(s, label) for s in sources for label in [_entry_label(kernel, s.module, s.name)] if label is not None]
    if not matches:
        names = ", ".join(f"{s.module}.{s.name}" for s in sources) or "none"
        raise BuildtileError(f"no kernel `{kernel}` in {project.pyproject}", code="BT0010", help=f"kernels: {names}")
    if len({(s.module, s.name) for s, _ in matches}) > 1:
        raise BuildtileError(f"`{kernel}` names several kernels: "
                             f"{', '.join(f'{s.module}.{s.name}' for s, _ in matches)}",
                             code="BT0010", help="write the kernel as module.name")
    ((source, label),) = matches
    target = target or project_targets(project)[0]
    target_arch(target)
    (build,) = compile_entries(analyze([source], options), options)
    # an entry built for some targets only (a TMA entry: sm_90a) shows for those
    entries = [e for e in build.entries if label in ("", e.label) and entry_targets(e, [target])]
    if not entries:
        raise BuildtileError(f"kernel `{source.module}.{source.name}` has no entry `{label}`", code="BT0010",
                             help=f"entries: {', '.join(e.label for e in build.entries)}")
    check_targets([replace(build, entries=entries)], [target], options)
    texts = []
    for entry in entries:
        text = stage_text(build.backend.impl, build.kernel, entry, chosen,
                          lambda entry=entry: entry_ptx(build, entry, target, options))
        if text is None:
            raise BuildtileError(f"the `{source.kind}` backend shows no {chosen.name} stage of "
                                 f"`{entry_name(build.kernel, entry)}`", code="BT0030")
        texts.append(f"==> {entry_name(build.kernel, entry)} <==\n{text}" if len(entries) > 1 else text)
    return "\n".join(texts)


def _entry_label(kernel: str, module: str, name: str) -> str | None:
    """"" when ``kernel`` names the kernel itself, the entry label it adds, or None."""
    for written in (f"{module}.{name}", name):
        if kernel == written:
            return ""
        if kernel.startswith(written + "."):
            return kernel[len(written) + 1:]
    return None
