"""The build driver, top to bottom:

    discover -> analyze -> entries -> per-target checks -> jobs (PTX + cubin, cached)
             -> manifest -> emitters

Backends contribute the stages up to LLVM IR (or PTX) through
:class:`buildtile.backend.BackendImpl`; the driver owns what is common:
LLVM IR -> PTX, nvJitLink, the cache, artifact files, the manifest and the
plugin lifecycle hooks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import llvmlite.binding as llvm

from buildtile import __version__
from buildtile.backend import AnalyzedKernel, Backend, CompileEntry, CompileOptions, KernelSource, Stage
from buildtile.cache import KernelCache, cache_key, resolve_cache_dir
from buildtile.cache_tiers import team_cache
from buildtile.config import Project, compile_options
from buildtile.diagnostics import Diagnostic, Span, unique
from buildtile.discovery import find_kernels, resolve_modules
from buildtile.errors import CompileError, ConfigError
from buildtile.executors import open_executor
from buildtile.interop import manifest as manifest_io
from buildtile.interop.abi import ABI_VERSION
from buildtile.interop.driver_compat import min_driver_for, ptx_isa_of
from buildtile.interop.tile_choice import CHOICE_RECORD
from buildtile.jobs import Job, Progress, run_jobs
from buildtile.names import check_kernels, check_module
from buildtile.plugins import backends as registered_backends
from buildtile.plugins import emitters as registered_emitters
from buildtile.plugins import plugin_manager
from buildtile.deep_stack import deep_stack, too_deep
from buildtile.staging_dirs import new_staging_dir
from buildtile.stages import STAGES_DIR, stage_file, stage_text
from buildtile.toolchain.nvjitlink import nvjitlink_version
from buildtile.toolchain.ptx import llvm_to_ptx, target_arch
from buildtile.toolchain.ptxas import ptxas_version
from buildtile.toolchain.registers import VERSION as REGISTER_FIT


@dataclass(frozen=True)
class Artifact:
    kernel: str
    target: str
    kind: str            # "cubin" or "ptx"
    data: bytes
    seconds: float       # time to produce it (lowering + PTX + link)


@dataclass(frozen=True)
class KernelBuild:
    """An analysed kernel with its backend and compiled entries."""

    kernel: AnalyzedKernel
    backend: Backend
    entries: list[CompileEntry]


def compile_project(project: Project, out_dir: Path, *, log: Callable[[str], None] = print,
                    emit: tuple[Stage, ...] = ()) -> dict:
    """Compile every kernel of ``project`` into ``out_dir/<package>/_buildtile``.

    ``emit`` names stages whose text goes to ``out_dir/stages`` (see
    :mod:`buildtile.stages`). Returns the manifest, plus two keys that are
    not written to the file: ``_cmake_source_dirs`` (CMake projects the
    emitters want built) and ``_timings`` (seconds per kernel per target).
    """
    settings = project.settings
    targets = project_targets(project)
    pm = plugin_manager()
    options = compile_options(settings)

    pm.hook.buildtile_before_discovery(project=project)
    sources = discover(project)
    pm.hook.buildtile_after_discovery(project=project, kernels=sources)
    builds = compile_entries(analyze(sources, options), options)
    check_targets(builds, targets, options)

    package_out = Path(out_dir) / project.package / manifest_io.MANIFEST_DIR
    # build into a fresh folder and swap it in at the end: a failed build leaves no half-written tree
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    staging = new_staging_dir(Path(out_dir))
    try:
        jobs = _plan_jobs(project, builds, targets, options)
        cache = team_cache(KernelCache(resolve_cache_dir(settings.cache_dir)), settings.cache_remote,
                           settings.cache_mode)
        executor = open_executor(settings.executor, workers=settings.jobs, strict=settings.executor_strict, warn=log)
        try:
            run_jobs([j for js in jobs.values() for j in js], cache, options.opt_level, settings.jobs,
                     Progress(log), executor)
        finally:
            executor.close()
        manifest = {
            "manifest_version": manifest_io.MANIFEST_VERSION, "abi_version": ABI_VERSION,
            "package": project.package, "package_version": project.version, "buildtile_version": __version__,
            "targets": targets, "ptx_target": targets[0] if settings.ptx else None, "checks": settings.checks,
            "kernels": [_record(project, b, jobs, targets, staging, pm) for b in builds],
        }
        records = package_records(builds)
        if records:
            manifest["records"] = records
        (staging / manifest_io.MANIFEST_NAME).write_text(manifest_io.dumps(manifest))
        if emit:
            _write_stages(Path(out_dir), builds, jobs, emit)
        cmake_dirs = _run_emitters(pm, manifest, staging, Path(out_dir) / "scratch", settings)
        if package_out.exists():
            shutil.rmtree(package_out)
        package_out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, package_out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    pm.hook.buildtile_after_package(project=project, manifest=manifest, out_dir=package_out)
    timings = {(symbol, job.target): job.seconds for symbol, js in jobs.items() for job in js}
    return {**manifest, "_cmake_source_dirs": cmake_dirs, "_timings": timings}


def project_targets(project: Project) -> list[str]:
    """The project's targets, oldest first (the first is the one PTX is shipped for)."""
    return sorted(project.settings.targets, key=target_arch)


@deep_stack
def discover(project: Project) -> list[KernelSource]:
    """Every kernel of the project, found statically, in a stable order."""
    backends = registered_backends()
    modules = resolve_modules(project.root, project.settings.kernels, str(project.pyproject))
    for m in modules:
        if m.name.split(".")[0] != project.package:
            raise ConfigError(
                f"tool.buildtile.kernels: module `{m.name}` is outside package `{project.package}` "
                f"(in {project.pyproject})", help="all kernel modules of a project live in one top-level package")
    sources = [k for m in modules for k in find_kernels(m, backends, project.root)]
    diags = [d for m in modules for d in check_module(m, backends, project.root)]
    if diags:
        raise CompileError(diags)
    return sources


@deep_stack
def analyze(sources: list[KernelSource], options: CompileOptions) -> list[AnalyzedKernel]:
    """Run every build-time check; all diagnostics of all kernels are reported together."""
    backends = registered_backends()
    analyzed, diags = [], check_kernels(sources)
    for src in sources:
        try:
            analyzed.append(backends[src.kind].impl.analyze(src, options))
        except CompileError as err:
            diags.extend(err.diagnostics)
        except RecursionError:
            diags.append(too_deep(src))
    if diags:
        raise CompileError(diags)
    return analyzed


@deep_stack
def compile_entries(kernels: list[AnalyzedKernel], options: CompileOptions) -> list[KernelBuild]:
    """Each kernel's compiled entries (one, or one per tile specialization), with their LLVM IR."""
    backends = registered_backends()
    builds, diags = [], []
    for k in kernels:
        backend = backends[k.source.kind]
        try:
            builds.append(KernelBuild(k, backend, backend.impl.entries(k, options)))
        except RecursionError:
            diags.append(too_deep(k.source))
    if diags:
        raise CompileError(diags)
    return builds



def check_targets(builds: list[KernelBuild], targets: list[str], options: CompileOptions) -> None:
    """Every backend's per-target refusals, for every entry and every target of the project,
    before anything is compiled; all of them are reported together."""
    diags = [d for b in builds for entry in b.entries for target in entry_targets(entry, targets)
             for d in b.backend.impl.check_target(b.kernel, entry, target, options)]
    if diags:
        raise CompileError(unique(diags))


def kernel_targets(kernel: AnalyzedKernel, targets: list[str]) -> list[str]:
    """The project's targets this kernel is built for: those its contract's
    ``min_compute_capability`` allows (a kernel that needs sm_90 skips sm_80)."""
    floor = kernel.contract.get("min_compute_capability") or 0
    allowed = [t for t in targets if target_arch(t)[0] >= floor]
    if not allowed:
        src = kernel.source
        raise CompileError([Diagnostic(
            "BT0010", f"kernel `{src.module}.{src.name}` needs compute capability {floor} or newer, "
            f"but the project builds only for {', '.join(targets)}",
            Span.of(src.decorator, src.display_file, src.lines), label=f"needs sm_{floor} or newer",
            help=f"add a target such as sm_{floor} to tool.buildtile.targets")])
    return allowed


def entry_targets(entry: CompileEntry, targets: list[str]) -> list[str]:
    """Those of ``targets`` that ``entry`` is built for (an entry may name the only targets it takes)."""
    return [t for t in targets if not entry.targets or t in entry.targets]


def package_records(builds: list[KernelBuild]) -> dict[str, dict]:
    """The manifest's ``records``: every record element type a kernel takes, once; two modules
    that declare different records of one name are refused (the C header names each once)."""
    records: dict[str, dict] = {}
    for b in builds:
        for name, layout in b.kernel.records.items():
            seen = records.setdefault(name, layout)
            if seen != layout:
                src = b.kernel.source
                raise CompileError([Diagnostic(
                    "BT0308", f"two different records are named `{name}`, in `{seen['module']}` and "
                    f"`{layout['module']}`", Span.of(src.node, src.display_file, src.lines),
                    label=f"takes `{layout['module']}.{name}`",
                    help="the package's records share one namespace in the C ABI; rename one of them")])
    return records


def entry_ptx(build: KernelBuild, entry: CompileEntry, target: str, options: CompileOptions) -> str:
    """An entry's PTX for one target, outside a build (``buildtile inspect --stage ptx``):
    the driver's from its LLVM IR, or the backend's for an entry without."""
    if entry.llvm_ir is None:
        return build.backend.impl.ptx(build.kernel, entry, target, options)
    return llvm_to_ptx(entry.llvm_ir, target, options.opt_level)


def _plan_jobs(project: Project, builds: list[KernelBuild], targets: list[str],
               options: CompileOptions) -> dict[str, list[Job]]:
    """One job per entry and target, keyed by the content that decides its bytes."""
    pm = plugin_manager()
    # ptxas assembles some kernels where it is installed (toolchain.nvjitlink): its version is content too
    toolchain = (f"llvm {'.'.join(map(str, llvm.llvm_version_info))}; nvjitlink {'.'.join(map(str, nvjitlink_version()))}; "
                 f"ptxas {ptxas_version() or 'none'}; {REGISTER_FIT}")
    plan: dict[str, list[Job]] = {}
    for b in builds:
        k = b.kernel
        for entry in b.entries:
            # without LLVM IR, the kernel's whole module source stands in for its content
            content = entry.llvm_ir if entry.llvm_ir is not None else "\n".join(k.source.lines) + entry.symbol
            label = f"{k.source.module}.{k.source.name}" + (f" {entry.label}" if entry.label else "")
            for target in entry_targets(entry, kernel_targets(k, targets)):
                pm.hook.buildtile_before_compile(project=project, kernel=k, target=target)
                key = cache_key(__version__, b.backend.kind, b.backend.version, toolchain, target,
                                str(options.opt_level), options.checks, content)
                make_ptx = None
                if entry.llvm_ir is None:
                    make_ptx = partial(b.backend.impl.ptx, k, entry, target, options)
                plan.setdefault(entry.symbol, []).append(
                    Job(f"{label} -> {target}", target, key, entry.llvm_ir, make_ptx))
    return plan


def _record(project: Project, build: KernelBuild, jobs: dict[str, list[Job]], targets: list[str],
            staging: Path, pm) -> dict:
    """A kernel's manifest record, its artifacts written under ``staging``."""
    k = build.kernel
    ptx_target = kernel_targets(k, targets)[0] if project.settings.ptx else None
    artifacts_of: dict[str, dict] = {}
    for entry in build.entries:
        artifacts = artifacts_of[entry.symbol] = {}
        for job in jobs.get(entry.symbol, []):
            isa = ptx_isa_of(job.ptx)
            # what loading it asks of the driver: the cubin is held to the PTX it was assembled from
            needs = {"ptx_isa": isa, "min_driver": min_driver_for(isa)}
            artifacts[job.target] = {**_write(staging, f"kernels/{entry.symbol}.{job.target}.cubin", job.cubin,
                                              "cubin"), **needs}
            if job.target == ptx_target:
                # the lowest target it is built for: PTX the driver can JIT on newer GPUs
                artifacts["ptx"] = {**_write(staging, f"kernels/{entry.symbol}.{job.target}.ptx", job.ptx.encode(),
                                             "ptx"), "target": job.target, **needs}
            pm.hook.buildtile_after_compile(project=project, kernel=k, target=job.target,
                                            artifact=Artifact(k.source.name, job.target, "cubin", job.cubin,
                                                              job.seconds))
    record = {
        "name": k.source.name, "module": k.source.module, "symbol": k.symbol, "kind": k.source.kind,
        "source": {"file": k.source.display_file, "line": k.source.node.lineno, **_source_identity(project, k)},
        "params": k.params, "contract": k.contract, "artifacts": artifacts_of[k.symbol],
    }
    if k.bounds_sites is not None:
        record["bounds_sites"] = k.bounds_sites
    for entry in build.entries:
        if entry.pointer_align:   # launched instead of the first entry when every data pointer is aligned
            record["aligned"] = {"align": entry.pointer_align, "symbol": entry.symbol,
                                 "artifacts": artifacts_of[entry.symbol]}
    if k.grid_param is not None:   # one compiled entry per tile shape
        # a specialization's TMA entry, where it has one built, is launched instead of it when the inputs suit TMA
        tma = {e.tma_of: {**e.specialization, "symbol": e.symbol, "artifacts": artifacts_of[e.symbol]}
               for e in build.entries if e.tma_of and artifacts_of[e.symbol]}
        record["tile"] = {
            "grid_param": k.grid_param,
            "specializations": [{**e.specialization, "artifacts": artifacts_of[e.symbol],
                                 **({"tma": tma[e.symbol]} if e.symbol in tma else {})}
                                for e in build.entries if not e.tma_of],
            "choice": dict(CHOICE_RECORD),
        }
    return record


def _source_identity(project: Project, kernel: AnalyzedKernel) -> dict:
    """The kernel's module file relative to the package, and the sha256 of the whole file (its
    constants and helpers decide the code too): what a tree built in place is checked against."""
    file = Path(kernel.source.file)
    try:
        relative = file.resolve().relative_to(Path(project.package_dir).resolve())
        data = file.read_bytes()
    except (ValueError, OSError):
        return {}
    return {"package_file": relative.as_posix(), "sha256": hashlib.sha256(data).hexdigest()}


def _write_stages(build_dir: Path, builds: list[KernelBuild], jobs: dict[str, list[Job]],
                  stages: tuple[Stage, ...]) -> None:
    """Each entry's text of each stage asked for, the PTX as the jobs made it."""
    shutil.rmtree(build_dir / STAGES_DIR, ignore_errors=True)
    for b in builds:
        for entry in b.entries:
            ptx_of = {job.target: job.ptx for job in jobs.get(entry.symbol, [])}
            for stage in stages:
                for target in ptx_of if stage.per_target else [None]:
                    text = stage_text(b.backend.impl, b.kernel, entry, stage, lambda t=target: ptx_of[t])
                    if text is not None:
                        path = stage_file(build_dir, b.kernel, entry, stage, target)
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_text(text)


def _run_emitters(pm, manifest: dict, package_out: Path, scratch: Path, settings) -> list[str]:
    """Every enabled emitter's interop files; returns the CMake projects they want built."""
    cmake_dirs = []
    for emitter in registered_emitters(pm):
        if emitter.enabled(settings):
            result = emitter.emit(manifest, package_out, scratch / emitter.name, settings)
            if result.cmake_source_dir is not None:
                cmake_dirs.append(str(result.cmake_source_dir))
    return cmake_dirs


def _write(root: Path, rel: str, data: bytes, kind: str) -> dict:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"kind": kind, "path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}

