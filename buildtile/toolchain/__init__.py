"""The shared back half of every backend: LLVM IR -> PTX -> cubin."""
