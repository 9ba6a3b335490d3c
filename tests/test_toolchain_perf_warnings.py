"""ptxas' performance-loss reports (toolchain/perf_warnings.py) are build errors, matched on ptxas' code:
serialised wgmma is BT0025, ignored setmaxnreg BT0026, any other performance loss BT0027."""

from __future__ import annotations

import pytest

from buildtile.errors import ToolchainError
from buildtile.toolchain.perf_warnings import check_log, performance_losses

FUNCTION = "k7kernels2mm__t128x128__tma"
#: the texts ptxas prints, as nvJitLink's info log and standalone ptxas' output carry them
C7509 = (f"ptxas info    : (C7509) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
         f"the presence of Extern calls in the function '{FUNCTION}' in line 1552\n")
C7516 = (f"ptxas info    : (C7516) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
         f"ill formed pipeline stage in the function '{FUNCTION}'\n")
C7504 = ("ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility "
         "across compilation units.\n")
C7508 = ("ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register "
         "count at entry.\n")
USAGE = (f"ptxas info    : Compiling entry function '{FUNCTION}' for 'sm_90a'\n"
         f"ptxas info    : Function properties for {FUNCTION}\n"
         "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
         "ptxas info    : Used 168 registers, used 1 barriers\n")


def check(log: str, assembler: str = "nvJitLink") -> ToolchainError:
    with pytest.raises(ToolchainError) as info:
        check_log(log, kernel="pkg.ops.mm [c=128x128]", target="sm_90a", assembler=assembler)
    return info.value


def test_calls_in_a_wgmma_kernel_are_bt0025_naming_the_kernel_and_the_function():
    err = check(USAGE + C7509)
    text = str(err)
    assert err.code == "BT0025"
    assert text.startswith("error[BT0025]: kernel `pkg.ops.mm [c=128x128]` for sm_90a: its wgmma instructions "
                           "are serialised because the kernel makes a call")
    assert f"(in `{FUNCTION}`)" in text and "nvJitLink reported:\n    (C7509) Potential Performance Loss" in text
    # from nvJitLink the fix is standalone ptxas
    assert "pip install nvidia-cuda-nvcc" in err.help


def test_calls_reported_by_standalone_ptxas_are_the_kernels_own():
    err = check(C7509, assembler="ptxas")
    assert err.code == "BT0025" and "ptxas reported" in str(err)
    assert "nvidia-cuda-nvcc" not in err.help and "calls" in err.help


def test_an_ill_formed_wgmma_pipeline_is_bt0025_and_a_buildtile_bug():
    err = check(C7516, assembler="ptxas")
    assert err.code == "BT0025" and "(C7516)" in str(err) and "ill-formed" in str(err)
    assert "bug in buildtile" in err.help


def test_every_report_of_the_kind_is_quoted_once():
    err = check(C7509 + C7516 + C7509)
    text = str(err)
    assert text.count("(C7509)") == 1 and text.count("(C7516)") == 1


@pytest.mark.parametrize("log, code", [(C7504, "C7504"), (C7508, "C7508")])
def test_an_ignored_setmaxnreg_is_bt0026(log, code):
    err = check(USAGE + log)
    assert err.code == "BT0026" and f"({code})" in str(err) and "`setmaxnreg`" in str(err)


def test_the_matcher_reads_the_code_not_the_sentence():
    # a later CUDA release words it differently: still a serialised wgmma
    err = check("ptxas info    : (C7516) Potential Performance Loss: wgmma pipeline stage is broken in 'k'\n")
    assert err.code == "BT0025"


def test_a_performance_loss_without_a_code_of_its_own_is_bt0027():
    err = check("ptxas info    : (C7599) Potential Performance Loss: something new in the function 'k'\n")
    assert err.code == "BT0027" and "(C7599)" in str(err)


@pytest.mark.parametrize("log", [
    "",
    USAGE,
    # told, not a loss: ptxas added a wait where the PTX reads an accumulator
    "ptxas info    : (C7517) warpgroup.wait is injected in around line 27304 by compiler to allow use of "
    "registers defined by GMMA in function 'k'\n",
])
def test_a_log_without_a_performance_loss_passes(log):
    check_log(log, kernel="k", target="sm_90a", assembler="ptxas")
    assert performance_losses(log) == []
