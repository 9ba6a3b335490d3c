"""The build driver: discover -> analyze -> (kernel x target) PTX and cubin -> manifest -> emitters.

Backends contribute the stages up to PTX; the driver owns what is common:
nvJitLink, artifact files, the manifest and the plugin lifecycle hooks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from buildtile import __version__
from buildtile.backend import AnalyzedKernel, CompileOptions, KernelSource
from buildtile.config import Project
from buildtile.discovery import find_kernels, resolve_modules
from buildtile.errors import CompileError, ConfigError
from buildtile.interop import manifest as manifest_io
from buildtile.interop.abi import ABI_VERSION
from buildtile.plugins import backends as registered_backends
from buildtile.plugins import emitters as registered_emitters
from buildtile.plugins import plugin_manager
from buildtile.toolchain.nvjitlink import ptx_to_cubin
from buildtile.toolchain.ptx import target_arch


@dataclass(frozen=True)
class Artifact:
    kernel: str
    target: str
    kind: str            # "cubin" or "ptx"
    data: bytes
    seconds: float       # time to produce it (lowering + PTX + link)


def discover(project: Project) -> list[KernelSource]:
    """Every kernel of the project, found statically, in a stable order."""
    backends = registered_backends()
    modules = resolve_modules(project.root, project.settings.kernels, str(project.pyproject))
    for m in modules:
        if m.name.split(".")[0] != project.package:
            raise ConfigError(
                f"tool.buildtile.kernels: module `{m.name}` is outside package `{project.package}` "
                f"(in {project.pyproject})", help="all kernel modules of a project live in one top-level package")
    return [k for m in modules for k in find_kernels(m, backends, project.root)]


def analyze(sources: list[KernelSource], options: CompileOptions) -> list[AnalyzedKernel]:
    """Run every build-time check; all diagnostics of all kernels are reported together."""
    backends = registered_backends()
    analyzed, diags = [], []
    for src in sources:
        try:
            analyzed.append(backends[src.kind].impl.analyze(src, options))
        except CompileError as err:
            diags.extend(err.diagnostics)
    if diags:
        raise CompileError(diags)
    _check_unique_symbols(analyzed)
    return analyzed


def compile_project(project: Project, out_dir: Path, *, log: Callable[[str], None] = print) -> dict:
    """Compile every kernel of ``project`` into ``out_dir/<package>/_buildtile``.

    Returns the manifest, plus two keys that are not written to the file:
    ``_cmake_source_dirs`` (CMake projects the emitters want built) and
    ``_timings`` (seconds per kernel per target).
    """
    settings = project.settings
    for t in settings.targets:
        target_arch(t)
    pm = plugin_manager()
    backends = registered_backends(pm)
    options = CompileOptions(opt_level=settings.opt_level, checks=settings.checks)

    pm.hook.buildtile_before_discovery(project=project)
    sources = discover(project)
    pm.hook.buildtile_after_discovery(project=project, kernels=sources)
    kernels = analyze(sources, options)

    targets = sorted(settings.targets, key=lambda t: target_arch(t))
    ptx_target = targets[0] if settings.ptx else None
    package_out = Path(out_dir) / project.package / manifest_io.MANIFEST_DIR
    # build into a fresh folder and swap it in at the end: a failed build leaves no half-written tree
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".buildtile-", dir=Path(out_dir)))
    try:
        records, timings = [], {}
        total, done = len(kernels) * len(targets), 0
        for k in kernels:
            backend = backends[k.source.kind].impl
            artifacts = {}
            for target in targets:
                pm.hook.buildtile_before_compile(project=project, kernel=k, target=target)
                start = time.perf_counter()
                ptx = backend.to_ptx(k, target, options)
                cubin = ptx_to_cubin(ptx, target, name=f"{k.symbol}.ptx", opt_level=options.opt_level)
                seconds = time.perf_counter() - start
                done += 1
                log(f"[{done}/{total}] {k.source.module}.{k.source.name} -> {target} ({seconds * 1e3:.0f} ms)")
                timings[(k.source.name, target)] = seconds
                artifacts[target] = _write(staging, f"kernels/{k.symbol}.{target}.cubin", cubin, "cubin")
                if target == ptx_target:
                    artifacts["ptx"] = {**_write(staging, f"kernels/{k.symbol}.{target}.ptx", ptx.encode(), "ptx"),
                                        "target": target}
                pm.hook.buildtile_after_compile(project=project, kernel=k, target=target,
                                                artifact=Artifact(k.source.name, target, "cubin", cubin, seconds))
            records.append({
                "name": k.source.name, "module": k.source.module, "symbol": k.symbol, "kind": k.source.kind,
                "source": {"file": k.source.display_file, "line": k.source.node.lineno},
                "params": k.params, "contract": k.contract, "artifacts": artifacts,
                **({"bounds_sites": k.extra["bounds_sites"]} if "bounds_sites" in k.extra else {}),
            })
        manifest = {
            "manifest_version": manifest_io.MANIFEST_VERSION, "abi_version": ABI_VERSION,
            "package": project.package, "package_version": project.version, "buildtile_version": __version__,
            "targets": targets, "ptx_target": ptx_target, "checks": settings.checks, "kernels": records,
        }
        (staging / manifest_io.MANIFEST_NAME).write_text(manifest_io.dumps(manifest))

        cmake_dirs = []
        scratch = Path(out_dir) / "scratch"
        for emitter in registered_emitters(pm):
            if emitter.enabled(settings):
                result = emitter.emit(manifest, staging, scratch / emitter.name, settings)
                if result.cmake_source_dir is not None:
                    cmake_dirs.append(str(result.cmake_source_dir))
        if package_out.exists():
            shutil.rmtree(package_out)
        package_out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, package_out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    pm.hook.buildtile_after_package(project=project, manifest=manifest, out_dir=package_out)
    return {**manifest, "_cmake_source_dirs": cmake_dirs, "_timings": timings}


def _write(root: Path, rel: str, data: bytes, kind: str) -> dict:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"kind": kind, "path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _check_unique_symbols(kernels: list[AnalyzedKernel]) -> None:
    seen: dict[str, AnalyzedKernel] = {}
    for k in kernels:
        if k.symbol in seen:
            raise ConfigError(f"two kernels compile to the same entry name `{k.symbol}` "
                              f"({k.source.module}.{k.source.name} and {seen[k.symbol].source.module}."
                              f"{seen[k.symbol].source.name})", help="rename one of them")
        seen[k.symbol] = k
