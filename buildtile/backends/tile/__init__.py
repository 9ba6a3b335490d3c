"""The Tile backend: one logical thread per tile; the compiler maps threads and memory.

Stages, one module each: ``frontend`` (AST -> typed tile IR, per
specialization), ``ownership`` (BT0594/BT0499), ``plan`` (threads, layouts,
software pipelines), ``lower`` (LLVM IR; with ``memory``, ``exchange`` and
``mma``), assembled in ``backend``.
"""
