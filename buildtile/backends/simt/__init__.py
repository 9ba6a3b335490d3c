"""The SIMT backend: describe one thread's work, launch thousands.

Stages, each a function over plain data:
``frontend.build_typed_ir`` (AST -> typed IR) -> ``ownership.check``
(checked IR) -> ``lower.lower_to_llvm`` (LLVM IR text) ->
``toolchain.ptx.llvm_to_ptx`` (PTX) -> ``toolchain.nvjitlink.ptx_to_cubin``.
"""
