"""Standalone ptxas (toolchain/ptxas.py) and the route to it (toolchain/nvjitlink.py ``link_ptx``):
kernels that use setmaxnreg must go to ptxas (without one the build stops with BT0022 naming the package),
wgmma kernels go to it where it is installed, everything else keeps nvJitLink."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from buildtile.errors import ToolchainError
from buildtile.toolchain import nvjitlink, ptxas
from buildtile.toolchain.nvjitlink import link_ptx, ptx_to_cubin, ptx_to_fitted_cubin
from buildtile.toolchain.registers import parse_usage

HAVE_PTXAS = ptxas.find_ptxas() is not None
needs_ptxas = pytest.mark.skipif(not HAVE_PTXAS, reason="no ptxas here (pip install nvidia-cuda-nvcc)")

_HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n\n"

#: a warp-specialised kernel: the producer warpgroup gives registers up, the consumer takes them;
#: ``.maxnreg`` tells ptxas the count at entry, without which it ignores setmaxnreg (C7508)
WARP_SPECIALISED = _HEAD + """.visible .entry ws(
	.param .u64 ws_param_0
)
.reqntid 256, 1, 1
.maxnreg 168
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<3>;
	.reg .pred 	%p<2>;

	mov.u32 	%r1, %tid.x;
	setp.lt.u32 	%p1, %r1, 128;
	@%p1 bra 	$L_consumer;
	setmaxnreg.dec.sync.aligned.u32 40;
	bra.uni 	$L_done;
$L_consumer:
	setmaxnreg.inc.sync.aligned.u32 232;
	ld.param.u64 	%rd1, [ws_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.u32 	[%rd2], %r1;
$L_done:
	ret;
}
"""

#: one wgmma after a 64-bit division: in relocatable mode (nvJitLink) the division is an extern
#: call and ptxas serialises the wgmma (C7509); standalone ptxas assembles it clean
WGMMA_AFTER_DIVISION = _HEAD + """.visible .entry mm(
	.param .u64 mm_param_0,
	.param .u64 mm_param_1,
	.param .u64 mm_param_2,
	.param .u64 mm_param_3
)
.reqntid 128, 1, 1
.minnctapersm 1
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [mm_param_0];
	ld.param.u64 	%rd2, [mm_param_1];
	ld.param.u64 	%rd3, [mm_param_2];
	ld.param.u64 	%rd4, [mm_param_3];
	div.u64 	%rd5, %rd2, %rd4;
	mov.f32 	%f1, 0f00000000;
	mov.f32 	%f2, 0f00000000;
	mov.f32 	%f3, 0f00000000;
	mov.f32 	%f4, 0f00000000;
	setp.ne.b64 	%p1, %rd5, 0;
	wgmma.fence.sync.aligned;
	// begin inline asm
	{ wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd5, %rd3, %p1, 1, 1, 0, 0; }
	// end inline asm
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	cvta.to.global.u64 	%rd6, %rd1;
	st.global.v4.f32 	[%rd6], {%f1, %f2, %f3, %f4};
	ret;
}
"""

PLAIN = _HEAD + """.visible .entry plain(
	.param .u64 plain_param_0
)
{
	.reg .b64 	%rd<3>;
	// setmaxnreg.inc.sync.aligned.u32 232; (a comment, not an instruction)
	ld.param.u64 	%rd1, [plain_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.u32 	[%rd2], 1;
	ret;
}
"""


@pytest.fixture
def no_ptxas(monkeypatch):
    """The finder pointed at nothing: no wheel, nothing on PATH, no toolkit."""
    monkeypatch.setattr(ptxas, "candidate_paths", lambda: [])


@pytest.fixture
def routes(monkeypatch):
    """The assembler each link went to, in order."""
    taken = []
    real_ptxas, real_nvjitlink = ptxas.assemble, nvjitlink._nvjitlink_link

    def via_ptxas(*args, **kwargs):
        taken.append("ptxas")
        return real_ptxas(*args, **kwargs)

    def via_nvjitlink(*args, **kwargs):
        taken.append("nvJitLink")
        return real_nvjitlink(*args, **kwargs)

    monkeypatch.setattr(ptxas, "assemble", via_ptxas)
    monkeypatch.setattr(nvjitlink, "_nvjitlink_link", via_nvjitlink)
    return taken


def sass(cubin: bytes, tmp_path: Path) -> str | None:
    """The cubin's SASS, where cuobjdump (and the nvdisasm it runs) are installed."""
    tool = shutil.which("cuobjdump")
    if tool is None or shutil.which("nvdisasm") is None:
        return None
    path = tmp_path / "kernel.cubin"
    path.write_bytes(cubin)
    return subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True).stdout


# ---------------------------------------------------------------- what goes where


def test_setmaxnreg_is_needed_only_as_an_instruction_not_in_a_comment():
    assert "setmaxnreg" in ptxas.why_ptxas(WARP_SPECIALISED)
    assert ptxas.why_ptxas(PLAIN) is None and not ptxas.prefers_ptxas(PLAIN)


def test_a_wgmma_in_inline_asm_prefers_ptxas_without_needing_it():
    assert ptxas.why_ptxas(WGMMA_AFTER_DIVISION) is None and ptxas.prefers_ptxas(WGMMA_AFTER_DIVISION)


def test_the_finder_looks_in_the_nvcc_wheel_then_path_then_cuda_home(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "ptxas"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ptxas.shutil, "which", lambda name: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    paths = ptxas.candidate_paths()
    assert paths[-1] == fake and any(path.parts[-3:] == ("cu13", "bin", "ptxas") for path in paths)
    monkeypatch.setattr(ptxas, "candidate_paths", lambda: [tmp_path / "missing", fake])
    assert ptxas.find_ptxas() == fake


def test_plain_ptx_keeps_nvjitlink_even_where_ptxas_is_installed(routes):
    assert ptx_to_cubin(PLAIN, "sm_90a")[:4] == b"\x7fELF"
    assert routes == ["nvJitLink"]


# ---------------------------------------------------------------- without ptxas


def test_a_warp_specialised_kernel_without_ptxas_is_bt0022_naming_the_package(no_ptxas, routes):
    with pytest.raises(ToolchainError) as info:
        ptx_to_fitted_cubin(WARP_SPECIALISED, "sm_90a", name="pkg.ops.gemm -> sm_90a.ptx")
    text = str(info.value)
    assert info.value.code == "BT0022" and routes == ["ptxas"]     # never nvJitLink, which would drop setmaxnreg
    assert "kernel `pkg.ops.gemm` for sm_90a needs ptxas" in text and "setmaxnreg" in text
    assert "pip install nvidia-cuda-nvcc" in text


def test_a_wgmma_kernel_without_ptxas_falls_back_to_nvjitlink_whose_serialisation_is_bt0025(no_ptxas, routes):
    with pytest.raises(ToolchainError) as info:
        ptx_to_cubin(WGMMA_AFTER_DIVISION, "sm_90a", name="pkg.ops.mm -> sm_90a.ptx")
    text = str(info.value)
    assert routes == ["nvJitLink"] and info.value.code == "BT0025"
    assert "(C7509)" in text and "kernel `pkg.ops.mm` for sm_90a" in text and "`mm`" in text
    assert "pip install nvidia-cuda-nvcc" in text


def test_a_setmaxnreg_kernel_forced_through_nvjitlink_is_bt0026(monkeypatch):
    # the reason setmaxnreg kernels go to ptxas: nvJitLink drops the instruction (C7504)
    monkeypatch.setattr(nvjitlink, "_goes_to_ptxas", lambda ptx: False)
    with pytest.raises(ToolchainError) as info:
        ptx_to_cubin(WARP_SPECIALISED, "sm_90a", name="pkg.ops.gemm -> sm_90a.ptx")
    assert info.value.code == "BT0026" and "(C7504)" in str(info.value)


def test_a_failing_ptxas_is_bt0020_with_its_log(monkeypatch, tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho \"ptxas fatal   : Unresolved extern function 'f'\" >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ptxas, "candidate_paths", lambda: [fake])
    with pytest.raises(ToolchainError) as info:
        ptx_to_cubin(WARP_SPECIALISED, "sm_90a", name="pkg.ops.gemm -> sm_90a.ptx")
    text = str(info.value)
    assert info.value.code == "BT0020" and "status 255" in text
    assert "ptxas could not assemble kernel `pkg.ops.gemm` for sm_90a" in text
    assert "Unresolved extern function 'f'" in text


# ---------------------------------------------------------------- with ptxas


@needs_ptxas
def test_a_warp_specialised_kernel_keeps_setmaxnreg_through_ptxas(routes, tmp_path):
    cubin, log = link_ptx(WARP_SPECIALISED, "sm_90a", name="pkg.ops.gemm -> sm_90a.ptx", verbose=True)
    assert cubin[:4] == b"\x7fELF" and routes == ["ptxas"]
    assert "C7504" not in log and "C7508" not in log     # what ptxas says when it drops setmaxnreg
    text = sass(cubin, tmp_path)
    if text is not None:
        assert text.count("USETMAXREG") == 2, text


@needs_ptxas
def test_register_fitting_reads_the_ptxas_log(routes):
    _, log = ptxas.assemble(WARP_SPECIALISED, "sm_90a", kernel="ws", verbose=True)
    assert parse_usage(log)["ws"].registers == 168         # the .maxnreg it declares
    routes.clear()
    ptx, cubin = ptx_to_fitted_cubin(WARP_SPECIALISED, "sm_90a")
    assert ptx == WARP_SPECIALISED and cubin[:4] == b"\x7fELF" and routes == ["ptxas"]


@needs_ptxas
def test_a_wgmma_kernel_goes_to_ptxas_which_does_not_serialise_it(routes):
    assert ptx_to_cubin(WGMMA_AFTER_DIVISION, "sm_90a")[:4] == b"\x7fELF"
    assert routes == ["ptxas"]


@needs_ptxas
def test_setmaxnreg_without_a_register_count_at_entry_is_bt0026():
    ptx = WARP_SPECIALISED.replace(".maxnreg 168\n", "")
    with pytest.raises(ToolchainError) as info:
        ptx_to_cubin(ptx, "sm_90a", name="pkg.ops.gemm -> sm_90a.ptx")
    assert info.value.code == "BT0026" and "(C7508)" in str(info.value) and "ptxas reported" in str(info.value)


@needs_ptxas
def test_at_opt_level_0_a_performance_loss_is_not_an_error():
    # -O0 asks for a slow kernel; ptxas reports C7508 all the same
    ptx = WARP_SPECIALISED.replace(".maxnreg 168\n", "")
    assert ptx_to_cubin(ptx, "sm_90a", opt_level=0)[:4] == b"\x7fELF"


@needs_ptxas
def test_the_version_is_the_release_line():
    version = ptxas.ptxas_version()
    assert version is not None and "release" in version and os.access(ptxas.find_ptxas(), os.X_OK)


def test_no_ptxas_has_no_version(no_ptxas):
    assert ptxas.find_ptxas() is None and ptxas.ptxas_version() is None
