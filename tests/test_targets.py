"""Every target the settings accept compiles, with the lowest PTX ISA version that supports it;
every other target is refused when the settings are read."""

from __future__ import annotations

import re
import textwrap

import pytest

from buildtile.config import json_schema, load_project
from buildtile.errors import ConfigError, ToolchainError
from buildtile.isolation import Died, Returned, run_isolated
from buildtile.jobs import Job, run_jobs
from buildtile.toolchain.ptx import llvm_to_ptx
from buildtile.toolchain.targets import PTX_ISA, SUPPORTED_TARGETS, ptx_isa

_HEADER = 'target triple = "nvptx64-nvidia-cuda"\ntarget datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"\n'
KERNEL_IR = _HEADER + """
define void @k(ptr addrspace(1) %p, float %x) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %q = getelementptr float, ptr addrspace(1) %p, i32 %t
  %v = load float, ptr addrspace(1) %q
  %s = fmul float %v, %x
  store float %s, ptr addrspace(1) %q
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"""
#: the PTX ISA versions LLVM 22 knows, oldest first
ISA_VERSIONS = [(8, 0), (8, 1), (8, 2), (8, 3), (8, 4), (8, 5), (8, 6), (8, 7), (8, 8), (9, 0)]


class MemoryCache:
    def get(self, key: str) -> None:
        return None

    def put(self, key: str, files: dict[str, bytes]) -> None:
        pass


def test_every_supported_target_compiles_to_ptx_and_a_cubin():
    jobs = [Job(f"pkg.ops.k -> {t}", t, t, KERNEL_IR) for t in SUPPORTED_TARGETS]
    run_jobs(jobs, MemoryCache(), 3, 0, lambda *_: None)
    for job in jobs:
        major, minor = PTX_ISA[job.target]
        assert f"\n.version {major}.{minor}\n" in job.ptx
        assert f"\n.target {job.target}\n" in job.ptx
        assert job.cubin[:4] == b"\x7fELF"


def test_targets_up_to_hopper_keep_ptx_8_0():
    for target in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"):
        assert re.search(r"^\.version 8\.0$", llvm_to_ptx(KERNEL_IR, target), re.M), target


def _emit_with(target: str, isa: tuple[int, int]) -> str:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(KERNEL_IR)
    machine = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu=target, features=f"+ptx{isa[0]}{isa[1]}", opt=3)
    return machine.emit_assembly(module)


def test_each_target_gets_the_lowest_ptx_isa_that_supports_it():
    raised = [t for t in SUPPORTED_TARGETS if PTX_ISA[t] != ISA_VERSIONS[0]]
    assert raised   # Blackwell and newer
    older = [ISA_VERSIONS[ISA_VERSIONS.index(PTX_ISA[t]) - 1] for t in raised]
    outcomes = dict(run_isolated([lambda t=t, isa=isa: _emit_with(t, isa) for t, isa in zip(raised, older)], 2))
    for index, target in enumerate(raised):
        outcome = outcomes[index]
        assert isinstance(outcome, Died), f"{target} also assembles with PTX ISA {older[index]}"
        assert "does not support target" in outcome.stderr


def test_a_target_outside_the_table_is_refused_before_llvm():
    with pytest.raises(ToolchainError) as info:
        ptx_isa("sm_81")
    assert info.value.code == "BT0011" and "sm_100" in info.value.help


def write_project(root, targets: str) -> None:
    (root / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [project]
        name = "my-kernels"
        version = "1.0"

        [tool.buildtile]
        kernels = ["my_kernels.ops"]
        targets = {targets}
        """))
    (root / "my_kernels").mkdir()
    (root / "my_kernels" / "__init__.py").write_text("")
    (root / "my_kernels" / "ops.py").write_text("")


REFUSED = ["sm_70", "sm_72", "sm_80a", "sm_81", "sm_91", "sm_99", "sm_101", "sm_1000", "sm_080", "SM_80",
           " sm_80", "sm_90A", "sm_", "sm_-80", "sm_100f", "compute_90"]


@pytest.mark.parametrize("target", REFUSED)
def test_every_other_target_is_refused_with_the_key_the_file_and_the_supported_list(tmp_path, target):
    write_project(tmp_path, f'["sm_80", "{target}"]')
    with pytest.raises(ConfigError) as info:
        load_project(tmp_path)
    message = str(info.value)
    assert f"tool.buildtile.targets in {tmp_path.resolve() / 'pyproject.toml'}" in message
    assert repr(target) in message
    assert ", ".join(SUPPORTED_TARGETS) in message


@pytest.mark.parametrize("target", SUPPORTED_TARGETS)
def test_every_supported_target_is_accepted(tmp_path, target):
    write_project(tmp_path, f'["{target}"]')
    assert load_project(tmp_path).settings.targets == [target]


def test_the_schema_lists_the_same_targets():
    targets = json_schema()["properties"]["targets"]
    assert targets["items"]["enum"] == list(SUPPORTED_TARGETS)
    assert targets["uniqueItems"] is True and targets["minItems"] == 1


def test_an_environment_target_is_refused_like_a_toml_one(tmp_path):
    write_project(tmp_path, '["sm_80"]')
    with pytest.raises(ConfigError, match="environment variable BUILDTILE_TARGETS: 'sm_91' is not a GPU target"):
        load_project(tmp_path, env={"BUILDTILE_TARGETS": "sm_90,sm_91"})


def test_outcomes_of_an_emit_that_works_come_back():
    ((_, outcome),) = run_isolated([lambda: _emit_with("sm_100", (8, 6))], 1)
    assert isinstance(outcome, Returned) and ".version 8.6" in outcome.value


def test_a_project_builds_for_blackwell(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    from buildtile.compiler import compile_project

    root = tmp_path / "proj"
    shutil.copytree(Path(__file__).parent / "fixtures" / "vecadd_project", root,
                    ignore=shutil.ignore_patterns("build", "_buildtile"))
    monkeypatch.setenv("BUILDTILE_TARGETS", "sm_90,sm_100,sm_120a")
    manifest = compile_project(load_project(root), tmp_path / "out", log=lambda line: None)
    (kernel,) = manifest["kernels"]
    assert set(kernel["artifacts"]) == {"sm_90", "sm_100", "sm_120a", "ptx"}
    kernels = tmp_path / "out" / "tiny_kernels" / "_buildtile" / "kernels"
    for target in ("sm_100", "sm_120a"):
        (cubin,) = kernels.glob(f"*.{target}.cubin")
        assert cubin.read_bytes()[:4] == b"\x7fELF"
    (ptx,) = kernels.glob("*.ptx")
    assert ptx.name.endswith(".sm_90.ptx") and "\n.version 8.0\n" in ptx.read_text()   # the lowest target's
