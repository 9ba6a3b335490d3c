"""The build driver: discover -> analyze -> (kernel x target) PTX and cubin -> manifest -> emitters.

Backends contribute the stages up to PTX; the driver owns what is common:
nvJitLink, artifact files, the manifest and the plugin lifecycle hooks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
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
import llvmlite.binding as llvm

from buildtile.cache import KernelCache, cache_key, resolve_cache_dir
from buildtile.jobs import Job, Progress, run_jobs
from buildtile.staging_dirs import new_staging_dir
from buildtile.toolchain.nvjitlink import nvjitlink_version
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
    staging = new_staging_dir(Path(out_dir))   # removes what interrupted builds left there
    try:
        jobs = _plan_jobs(project, kernels, targets, options, backends)
        run_jobs([j for js in jobs.values() for j in js], KernelCache(resolve_cache_dir(settings.cache_dir)),
                 options.opt_level, settings.jobs, Progress(log))
        records, timings = [], {}
        for k in kernels:
            impl = backends[k.source.kind].impl
            artifacts_of: dict[str, dict] = {}
            for symbol, _ in compile_entries(impl, k):
                artifacts = artifacts_of[symbol] = {}
                for job in jobs[symbol]:
                    target = job.target
                    timings[(symbol, target)] = job.seconds
                    artifacts[target] = _write(staging, f"kernels/{symbol}.{target}.cubin", job.cubin, "cubin")
                    if settings.ptx and target == kernel_targets(k, targets)[0]:
                        # the lowest target it is built for: PTX the driver can JIT on newer GPUs
                        artifacts["ptx"] = {**_write(staging, f"kernels/{symbol}.{target}.ptx", job.ptx.encode(),
                                                     "ptx"), "target": target}
                    pm.hook.buildtile_after_compile(project=project, kernel=k, target=target,
                                                    artifact=Artifact(k.source.name, target, "cubin", job.cubin,
                                                                      job.seconds))
            record = {
                "name": k.source.name, "module": k.source.module, "symbol": k.symbol, "kind": k.source.kind,
                "source": {"file": k.source.display_file, "line": k.source.node.lineno},
                "params": k.params, "contract": k.contract, "artifacts": artifacts_of[k.symbol],
                **({"bounds_sites": k.extra["bounds_sites"]} if "bounds_sites" in k.extra else {}),
            }
            if hasattr(impl, "tile_record"):   # one compiled entry per tile shape
                record["tile"] = impl.tile_record(k, artifacts_of)
            records.append(record)
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


def kernel_targets(kernel: AnalyzedKernel, targets: list[str]) -> list[str]:
    """The project's targets this kernel is built for: those its contract's
    ``min_compute_capability`` allows (a kernel that needs sm_90 skips sm_80)."""
    floor = kernel.contract.get("min_compute_capability") or 0
    allowed = [t for t in targets if target_arch(t)[0] >= floor]
    if not allowed:
        raise ConfigError(
            f"kernel `{kernel.source.module}.{kernel.source.name}` needs compute capability {floor} or newer, "
            f"but the project builds only for {', '.join(targets)}",
            help=f"add a target such as sm_{floor} to tool.buildtile.targets")
    return allowed


def _plan_jobs(project: Project, kernels: list[AnalyzedKernel], targets: list[str], options: CompileOptions,
               backends: dict) -> dict[str, list[Job]]:
    """One job per kernel and target, keyed by the content that decides its bytes."""
    pm = plugin_manager()
    toolchain = f"llvm {'.'.join(map(str, llvm.llvm_version_info))}; nvjitlink {'.'.join(map(str, nvjitlink_version()))}"
    plan: dict[str, list[Job]] = {}
    for k in kernels:
        backend = backends[k.source.kind]
        lower = getattr(backend.impl, "llvm_ir", None)
        for symbol, spec in compile_entries(backend.impl, k):
            extra = {"specialization": spec} if spec is not None else {}
            llvm_ir = lower(k, options, **extra) if lower is not None else None
            # without LLVM IR, the kernel's whole module source stands in for its content
            content = llvm_ir if llvm_ir is not None else "\n".join(k.source.lines) + symbol
            label = f"{k.source.module}.{k.source.name}" + (f" {spec.tile_shapes}" if spec is not None else "")
            for target in kernel_targets(k, targets):
                pm.hook.buildtile_before_compile(project=project, kernel=k, target=target)
                key = cache_key(__version__, backend.kind, backend.version, toolchain, target,
                                str(options.opt_level), options.checks, content)
                make_ptx = None
                if llvm_ir is None:
                    make_ptx = lambda impl=backend.impl, k=k, t=target, e=extra: impl.to_ptx(k, t, options, **e)  # noqa: E731
                plan.setdefault(symbol, []).append(Job(f"{label} -> {target}", target, key, llvm_ir, make_ptx))
    return plan


def compile_entries(impl, kernel: AnalyzedKernel) -> list[tuple[str, object]]:
    """(PTX entry name, specialization) of each compiled entry of a kernel: one, or
    one per specialization for backends that have them (tile shapes)."""
    if hasattr(impl, "specializations"):
        return [(spec.symbol, spec) for spec in impl.specializations(kernel)]
    return [(kernel.symbol, None)]


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
