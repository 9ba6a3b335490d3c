"""``tile.mma`` on Hopper (``sm_90a``): ``wgmma`` fed by TMA through a ring of mbarrier-guarded stages.

The planner (:func:`.select.hopper_plan`) takes this path for a kernel
compiled for ``sm_90a`` whose K loop is the plain matmul form (two
``tile.load``\\ s of 2-D row-major inputs, one ``tile.mma`` of them into a
loop-carried f32 accumulator) and whose shapes the instructions take:

    M a multiple of 64, N in 16, 32, 64, 128, 256, K in 16, 32, 64, 128, 256,
    f16 or bf16 operands, at most 128 accumulators per thread.

Per K step one thread asks the copy engine (TMA) for both operand tiles with
``cp.async.bulk.tensor`` into one stage of the ring (128-byte swizzled column
panels, 1024-byte aligned: :mod:`.descriptors`), and arms the stage's
mbarrier with the bytes to expect; every thread waits on the barrier's phase
(``mbarrier.try_wait.parity``), then each warpgroup of 128 threads issues
``wgmma.mma_async`` m64nNk16 over its 64-row blocks straight from shared
memory (:mod:`.wgmma`) and keeps one step in flight while the next stage
arrives (:mod:`.pipeline`). The copies read the inputs through tensor maps
passed as kernel parameters (:mod:`.tensor_maps`), which the hosts encode at
launch; the copy engine zero-fills whatever lies outside an input, so ragged
M, N and K need no masks until the epilogue, which is the common one
(registers to masked global stores, fused elementwise operations included).

The same kernel keeps its sm_80 entry in the sm_90a image: inputs that break
the copy engine's rules (a base or a row stride that is not a multiple of 16
bytes, a strided innermost axis, an empty extent) launch that one instead.
"""
