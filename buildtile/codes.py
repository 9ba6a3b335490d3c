"""Every error code buildtile reports, with what it means: the error index.

One entry per code: a title, when it is caught, an explanation of the rule
and why it exists, and a wrong and a right example. ``buildtile explain
CODE`` prints an entry; the tests check that every code the compiler, the
runtime, the C shim and the C++ header can raise has one, and that each has
a case in the must-fail corpus or a test that produces it.
"""

from __future__ import annotations

from dataclasses import dataclass

KERNEL_CHECK = "kernel check"
"""Caught by the build-time checks of a kernel (``buildtile check``, the build)."""

STAGES = (KERNEL_CHECK, "configuration", "build", "package", "launch", "runtime")


@dataclass(frozen=True)
class ErrorCode:
    code: str
    title: str
    stages: tuple[str, ...]
    explanation: str
    wrong: str
    right: str


def _entry(code: str, title: str, stages: tuple[str, ...], explanation: str, wrong: str, right: str) -> ErrorCode:
    return ErrorCode(code, title, stages, _block(explanation), _block(wrong), _block(right))


def _block(text: str) -> str:
    """Strip the indentation and the blank first and last lines of a triple-quoted block."""
    lines = text.strip("\n").splitlines()
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[indent:] for l in lines).rstrip()


_ENTRIES = [
    _entry("BT0001", "syntax error", (KERNEL_CHECK,), """
        A module that defines kernels is not valid Python.

        buildtile reads kernel modules with Python's own parser before it
        looks for kernels, so a syntax error anywhere in the file stops the
        check of every kernel in it; the diagnostic points at the place the
        parser gave up. BT0001 is also the code of an error that carries no
        more specific one.
        """, """
        @simt.kernel(block=256)
        def scale(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 2.0 * (x[i]     # the `(` is never closed
        """, """
        @simt.kernel(block=256)
        def scale(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 2.0 * x[i]
        """),
    _entry("BT0010", "invalid configuration or command-line input", ("configuration",), """
        A `[tool.buildtile]` setting, a `-C` config setting, a `BUILDTILE_*`
        environment variable or an argument of the `buildtile` command is
        not one buildtile can use.

        Settings are checked once, before anything compiles, so a typo is
        reported with the key and the file that holds it instead of
        surfacing later as a strange build. The same code covers the C ABI
        build: CMake stops with error[BT0010] when the C ABI project is
        configured on a platform or with arguments it does not support.
        """, """
        [tool.buildtile]
        targets = ["sm80"]       # not spelled sm_XX
        jobs = -1                # jobs are 0 (one per core) or more
        """, """
        [tool.buildtile]
        targets = ["sm_80", "sm_90"]
        jobs = 0                 # one job per CPU core
        """),
    _entry("BT0011", "not a GPU target", ("build",), """
        A name given as a GPU target is not spelled `sm_XX` (or `sm_XXa`),
        or names a compute capability buildtile does not build for.

        Targets name the compute capability the PTX and the cubin are made
        for. buildtile knows, for each target it supports, the lowest PTX
        ISA version that target needs (so the shipped PTX still loads on
        the oldest driver that can run it); a misspelt target, or one that
        LLVM or nvJitLink cannot build, is refused before either tool sees
        it. `tool.buildtile.targets` is checked the same way when the
        settings are read (BT0010, listing the supported targets).
        """, """
        buildtile.toolchain.ptx.llvm_to_ptx(ir, "compute_80")
        """, """
        buildtile.toolchain.ptx.llvm_to_ptx(ir, "sm_80")
        """),
    _entry("BT0020", "the toolchain refused generated code", ("build",), """
        LLVM, nvJitLink or ptxas rejected what buildtile produced for a
        kernel.

        Every kernel that passes the build-time checks should lower to LLVM
        IR, PTX and a cubin. When a step after the checks fails, the kernel
        is not at fault: it is a bug in buildtile, or a tool that is missing
        or too old for the target. The message carries the tool's own text;
        `buildtile doctor` shows which LLVM, nvJitLink and ptxas were found.
        """, """
        # IR that LLVM cannot parse (only buildtile itself produces IR)
        buildtile.toolchain.ptx.llvm_to_ptx("define void @k( {", "sm_80")
        """, """
        # report the kernel and the message; check the tools with
        $ buildtile doctor
        """),
    _entry("BT0021", "libdevice not found", ("build",), """
        A kernel calls math functions (`math.exp`, `math.erf`, ...) and no
        copy of NVIDIA's libdevice bitcode was found to link them from.

        buildtile links the math functions a kernel uses from libdevice at
        build time, so the wheel needs no CUDA toolkit at run time. It looks
        in the `nvidia-nvvm` Python package and under CUDA_HOME.
        """, """
        @simt.kernel(block=256)
        def softplus(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = math.log1p(math.exp(x[i]))   # built with no libdevice
        """, """
        $ pip install nvidia-nvvm            # or: export CUDA_HOME=/usr/local/cuda
        $ pip wheel .
        """),
    _entry("BT0022", "ptxas not found", ("build",), """
        A kernel must be assembled by NVIDIA's standalone ptxas, and no
        ptxas was found.

        buildtile turns PTX into cubin with nvJitLink, which needs no CUDA
        toolkit. nvJitLink assembles in relocatable mode, and there ptxas
        drops `setmaxnreg`, the instruction a warp-specialised kernel uses
        to give its math warps the registers its copy warps do not need.
        Such kernels go to standalone ptxas instead. It ships in the
        `nvidia-cuda-nvcc` package, needed only to build, never by the
        users of the wheel: list `buildtile[hopper]` (or buildtile and
        `nvidia-cuda-nvcc`) in `build-system.requires`. buildtile looks in
        that package wherever it is on `sys.path`, then on PATH, then under
        CUDA_HOME and CUDA_PATH; `buildtile doctor` shows what it found.
        """, """
        [build-system]
        requires = ["buildtile"]       # a warp-specialised sm_90a kernel
        build-backend = "buildtile.build"
        """, """
        [build-system]
        requires = ["buildtile[hopper]"]   # brings nvidia-cuda-nvcc's ptxas
        build-backend = "buildtile.build"
        """),
    _entry("BT0024", "compute-sanitizer not found", ("configuration",), """
        `buildtile sanitize` found no compute-sanitizer binary to run the
        program under.

        It looks for the one given with `--sanitizer`, then on PATH, under
        CUDA_HOME and CUDA_PATH, in /usr/local/cuda*, and in the
        `nvidia-cuda-sanitizer-api` Python package.
        """, """
        $ buildtile sanitize -- python -m example_kernels   # no CUDA toolkit
        """, """
        $ pip install nvidia-cuda-sanitizer-api-cu12   # or put CUDA's bin/ on PATH
        $ buildtile sanitize --tool memcheck -- python -m example_kernels
        """),
    _entry("BT0025", "the assembler serialised a kernel's wgmma instructions", ("build",), """
        ptxas reported that it serialised a kernel's wgmma instructions
        ("Potential Performance Loss", codes C7509 to C7516): each
        matrix multiply waits for the one before it instead of overlapping
        with it, and a Hopper matmul runs at a fraction of its speed.

        The kernel is correct, only slow, and ptxas says so in its log
        alone; buildtile reads the log and refuses to ship it. The message
        quotes ptxas and says what causes it. A call inside the kernel
        (C7509, C7510) is most often nvJitLink's doing: it assembles in
        relocatable mode, where even the helper routine of a 64-bit division
        is a call. Standalone ptxas does not do this, and buildtile uses it
        for wgmma kernels wherever it is installed (`nvidia-cuda-nvcc`, or
        `buildtile[hopper]`). The other codes point at the wgmma lowering
        (please report them) or at a tile too large for the registers.
        """, """
        [tool.buildtile]
        targets = ["sm_90a"]   # tile.mma kernels, built without ptxas
        """, """
        $ pip install nvidia-cuda-nvcc     # or build with buildtile[hopper]
        $ pip wheel .
        """),
    _entry("BT0026", "the assembler ignored a kernel's setmaxnreg", ("build",), """
        ptxas reported that it ignored the `setmaxnreg` instructions of a
        warp-specialised kernel (C7504, C7508): every warp keeps the
        register count the kernel started with, so the math warps lack the
        registers the copy warps were to give up.

        nvJitLink always ignores them (C7504), which is why such kernels go
        to standalone ptxas; standalone ptxas ignores them when it cannot
        tell the kernel's starting register count (C7508), which the
        lowering gives it with `.maxnreg`. Either way the kernel would run
        slower than it was designed to, so the build stops.
        """, """
        # a warp-specialised kernel handed to nvJitLink, or one whose PTX
        # declares neither .maxnreg nor .minnctapersm
        """, """
        # standalone ptxas, and a register count at entry
        .maxnreg 168
        """),
    _entry("BT0027", "the assembler reported a performance loss", ("build",), """
        ptxas reported a "Potential Performance Loss" that buildtile has no
        more specific code for (BT0025 and BT0026 cover wgmma and
        setmaxnreg).

        The kernel is correct but slower than its PTX asks for, and ptxas
        says so only in its log, so the build stops rather than ship it.
        The message quotes ptxas; please report it with the kernel's source
        and the target.
        """, """
        # any kernel whose assembly ptxas reports as a performance loss
        """, """
        # a kernel ptxas assembles without such a report
        """),
    _entry("BT0030", "a plugin registered a bad backend", ("configuration",), """
        A buildtile plugin registered something that is not a
        `buildtile.backend.Backend`, or two plugins registered a backend for
        the same kernel kind.

        Each kernel kind (`simt`, `tile`, ...) is compiled by exactly one
        backend; with two, which one compiled a wheel would depend on the
        order plugins happen to load in.
        """, """
        @hookimpl
        def buildtile_register_backends(register):
            register(MyBackend)             # the class, not an instance
        """, """
        @hookimpl
        def buildtile_register_backends(register):
            register(MyBackend(kind="mykind"))
        """),
    _entry("BT0040", "the compile cluster cannot be used", ("build",), """
        The build asked for a compile cluster (`executor = "dask://HOST:PORT"`)
        in strict mode (`executor-strict = true`), and the cluster cannot be
        used: no scheduler answered at that address, or the `distributed`
        package is not installed.

        Without strict mode such a build prints one warning line and compiles
        on this machine, with the same result. Strict mode is for farms where
        a build that quietly ran on one machine would take hours.
        """, """
        [tool.buildtile]
        executor = "dask://sched.example:8786"   # nothing listens
        executor-strict = true
        """, """
        [tool.buildtile]
        executor = "dask://sched.example:8786"   # `dask scheduler` runs
        executor-strict = true                   # buildtile[dask] installed
        """),
    _entry("BT0080", "division by zero in a constant expression", (KERNEL_CHECK,), """
        An integer division or remainder whose operands are all constants
        divides by zero.

        buildtile folds constant expressions at compile time; a division by
        zero there has no value to fold to, and on the GPU an integer
        division by zero gives an unspecified result rather than an
        exception, so it is refused where it is written.
        """, """
        CHUNKS = 0

        @simt.kernel(block=256)
        def k(c: DisjointSlice[i32]):
            i = simt.index_1d()
            c[i] = 1024 // CHUNKS
        """, """
        CHUNKS = 4

        @simt.kernel(block=256)
        def k(c: DisjointSlice[i32]):
            i = simt.index_1d()
            c[i] = 1024 // CHUNKS
        """),
    _entry("BT0100", "kernels failed the build-time checks", ("build",), """
        A build stopped because kernels failed their checks.

        A failed build reports the code of its first diagnostic; BT0100 is
        the code of a failed check that recorded no diagnostic of its own.
        Run `buildtile check` on the project to see every diagnostic.
        """, """
        $ pip wheel .          # stops: a kernel failed its checks
        """, """
        $ buildtile check .    # lists each diagnostic with its own code
        """),
    _entry("BT0133", "shared memory requires unsafe", (KERNEL_CHECK,), """
        A SIMT kernel declares, reads or writes shared memory outside a
        `with simt.unsafe():` block.

        buildtile proves that every thread writes only its own elements of
        an output. Shared memory is outside that proof: threads of a block
        read each other's writes, and whether they see them depends on
        `simt.sync_threads()` being in the right places. `simt.unsafe()`
        marks the code whose correctness the author vouches for.
        """, """
        @simt.kernel(block=256)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            buf = simt.shared_array(f32, 256)
            buf[simt.thread_idx.x] = x[i]
        """, """
        @simt.kernel(block=256)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            with simt.unsafe():
                buf = simt.shared_array(f32, 256)
                buf[simt.thread_idx.x] = x[i]
                simt.sync_threads()
                y[i] = buf[255 - simt.thread_idx.x]
        """),
    _entry("BT0200", "not supported in kernels", (KERNEL_CHECK,), """
        A kernel uses a Python construct that kernels do not have: lists,
        dicts, strings, exceptions, `while ... else`, nested functions,
        lambdas, keyword arguments, recursion, slicing in SIMT kernels,
        element indexing in Tile kernels, and the like.

        Kernels are compiled ahead of time to GPU code with no Python
        runtime behind them, so only the subset of Python with a direct GPU
        meaning is accepted. The help line says what to write instead.
        """, """
        @simt.kernel(block=256)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            weights = [0.25, 0.5, 0.25]
            y[i] = weights[1] * x[i]
        """, """
        CENTRE = 0.5

        @simt.kernel(block=256)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = CENTRE * x[i]
        """),
    _entry("BT0268", "`break` or `continue` outside of a loop", (KERNEL_CHECK,), """
        `break` or `continue` appears where no loop encloses it.

        Python rejects this too, but only when the line runs; kernels are
        checked before they run, so it is reported at build time.
        """, """
        @simt.kernel(block=256)
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            if i > 100:
                break
            c[i] = 1.0
        """, """
        @simt.kernel(block=256)
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            if i <= 100:
                c[i] = 1.0
        """),
    _entry("BT0308", "mismatched types", (KERNEL_CHECK, "launch"), """
        A value has another type than the place it is used needs.

        In a kernel: operands of different widths or signedness, a float
        literal where an integer is expected, a literal out of range, a
        wrong number of indices or arguments, a tile whose shape does not
        broadcast or does not match its output. Kernels never convert
        numbers implicitly, because a silent conversion on the GPU changes
        results or performance without a trace in the source; write the
        cast.

        At a launch: an argument whose dtype, rank, device or layout is not
        the parameter's (`ops.k[grid](x_f32, y_f64, z_f64)` for the kernel
        below). It is refused before anything is queued, by the Python host
        and the C shim alike.
        """, """
        @simt.kernel(block=256)
        def k(x: Slice[f32], y: Slice[f64], z: DisjointSlice[f32]):
            i = simt.index_1d()
            z[i] = x[i] + y[i]          # f32 + f64
        """, """
        @simt.kernel(block=256)
        def k(x: Slice[f32], y: Slice[f64], z: DisjointSlice[f32]):
            i = simt.index_1d()
            z[i] = x[i] + f32(y[i])
        """),
    _entry("BT0382", "use of moved value", ("runtime",), """
        A tensor handle is used after it was moved into a Tile launch or
        into `tile.partition`.

        A Tile launch takes ownership of its arguments until the work is
        enqueued; reading or passing the old handle then could race with
        the kernel. `.sync_on(stream)` gives fresh handles over the same
        memory back. In Python every use of a moved `TileTensor` or
        `Partition` raises; in C++ the moved-from `buildtile::TileTensor`
        throws `buildtile::Error` with code 382.
        """, """
        z = tile.partition(torch_z, [128])
        pending = ops.add(x, y, z)
        print(z.shape)                        # z was moved into `add`
        """, """
        z = tile.partition(torch_z, [128])
        x, y, z = ops.add(x, y, z).sync_on(stream)
        print(z.shape)
        """),
    _entry("BT0384", "cannot assign twice to an immutable binding", (KERNEL_CHECK,), """
        A name that must keep its value is assigned again: a thread index
        bound by `simt.index_1d()` (or 2d, 3d), a shared array, or a loop
        variable that would shadow one of them.

        A disjoint write is allowed only at the thread's own index. The
        proof rests on the name still holding that index wherever it is
        used, so such names are bound once; compute other indices into new
        names.
        """, """
        @simt.kernel(block=256)
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            i = i + 1
            c[i] = 1.0
        """, """
        @simt.kernel(block=256)
        def k(x: Slice[f32], c: DisjointSlice[f32]):
            i = simt.index_1d()
            k = i + 1
            if k < len(x):
                c[i] = x[k]
        """),
    _entry("BT0415", "a name is bound more than once", (KERNEL_CHECK,), """
        A kernel's parameter list names one parameter twice, or its decorator
        gives one keyword twice (`block=64, block=128`).

        Python's parser accepts both, but Python refuses the module when it is
        imported, so a package built from it could never be used; buildtile
        refuses it while checking, where the place can be shown.
        """, """
        @simt.kernel(block=64, block=128)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = x[i]
        """, """
        @simt.kernel(block=128)
        def k(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = x[i]
        """),
    _entry("BT0425", "cannot find a name", (KERNEL_CHECK,), """
        A name, attribute, method or function is not one kernels can see.

        Kernels see their parameters, their own locals, module-level
        constants, `@simt.device` (or `@tile.function`) helpers, casts, the
        supported `math` functions and the `simt.` or `tile.` operations.
        Anything else would need the Python interpreter at run time, which
        a GPU kernel does not have.
        """, """
        @simt.kernel(block=256)
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            c[i] = scale                 # not defined anywhere
        """, """
        SCALE = 2.0

        @simt.kernel(block=256)
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            c[i] = SCALE
        """),
    _entry("BT0428", "a name is defined more than once", (KERNEL_CHECK,), """
        Two kernels need one name: they have the same name in one module,
        names that differ only in case (the C header's macros are upper-case),
        or one kernel's name is a C++ name the header generates for another:
        `scale_block` (the block shape of `scale`), `copy_unsafe` (the launcher
        of a `copy` without a launch contract), `delete_` (the escaped name of
        `delete`), `<name>_launch` (a Tile kernel's launch class), or the
        namespace of a submodule.

        A kernel's name is its name in Python, in the PTX entry, in the C
        launchers and in the C++ wrappers, so each must be one kernel's alone.
        """, """
        @simt.kernel(block=256)
        def scale(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 2.0 * x[i]

        @simt.kernel(block=128)
        def scale_block(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 3.0 * x[i]
        """, """
        @simt.kernel(block=256)
        def scale(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 2.0 * x[i]

        @simt.kernel(block=128)
        def scale_blocked(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 3.0 * x[i]
        """),
    _entry("BT0430", "a kernel is not at the top level of its module", (KERNEL_CHECK,), """
        A kernel is defined inside an `if`, `for`, `while`, `with` or `try`
        block, a function or a class.

        buildtile finds kernels by reading each module's top level, without
        running it, so a kernel defined anywhere else would be left out of the
        package and fail when launched. Define every kernel at the top level
        and choose between them at launch time.
        """, """
        FAST = True

        if FAST:
            @simt.kernel(block=256)
            def copy(x: Slice[f32], y: DisjointSlice[f32]):
                i = simt.index_1d()
                y[i] = x[i]
        """, """
        FAST = True

        @simt.kernel(block=256)
        def copy(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = x[i]
        """),
    _entry("BT0431", "a name the generated code cannot use", (KERNEL_CHECK,), """
        A kernel or a kernel module has a name that the PTX entry, the C
        header or the C++ header cannot carry: a name that is not ASCII, a
        module named `buildtile` or `std` (they would hide the C++ namespaces
        of that name inside the package's) or `_buildtile` (the folder the
        build writes the package's kernels into), a kernel named
        `check_abi` in the package's top-level module (the C++ header
        declares that function itself), a record or a record field whose
        name is not ASCII, or a record named `last_error` or `abi_version`
        (its C struct, `<package>_<Record>`, would have the name of one of
        the package library's functions).
        """, """
        @simt.kernel(block=256)
        def échelle(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 2.0 * x[i]
        """, """
        @simt.kernel(block=256)
        def scale(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            y[i] = 2.0 * x[i]
        """),
    _entry("BT0499", "index is not this thread's own", (KERNEL_CHECK,), """
        A SIMT kernel writes (or reads) a `DisjointSlice` or
        `DisjointTensor` at an index that is not provably the thread's own,
        or a Tile kernel stores outside its own tile of a `tile.Out`.

        Disjoint outputs are what let buildtile guarantee, before anything
        runs, that no two threads write the same element: each thread owns
        exactly the element at the index `simt.index_1d()` (2d, 3d) gave
        it, used unchanged and in the same axis order everywhere. `c[i + 1]`,
        `c[0]` or an index read from memory may name another thread's
        element, which would be a data race. In Tile kernels a block owns
        the tile `z.tile_id(axis)` names; `z.store(t)` always writes it.
        Reading other elements is fine through a `Slice` or `Tensor` input;
        writing elsewhere needs an `AtomicSlice`.
        """, """
        @simt.kernel(block=256)
        def shift(x: Slice[f32], c: DisjointSlice[f32]):
            i = simt.index_1d()
            c[i + 1] = x[i]
        """, """
        @simt.kernel(block=256)
        def shift(x: Slice[f32], c: DisjointSlice[f32]):
            i = simt.index_1d()
            if i >= 1:
                c[i] = x[i - 1]
        """),
    _entry("BT0502", "cannot borrow as mutable: arguments overlap", ("launch",), """
        An output of a launch is also passed as another argument, or its
        memory overlaps another argument's.

        Each output is borrowed mutably by the kernel for the launch, like
        `&mut` in Rust: the kernel is compiled on the promise that nothing
        else reads or writes those bytes meanwhile (and LLVM optimises on
        it). The check runs before anything is queued, in the Python host
        and in the C shim, on the actual address ranges, so overlapping
        views of one allocation are caught too.
        """, """
        ops.vecadd[grid](a, b, a)           # c is a's memory
        ops.vecadd[grid](a[:1000], b, a[500:1500])
        """, """
        ops.vecadd[grid](a, b, c)           # c is a separate buffer
        ops.vecadd[grid](a[:1000], b, a[1000:2000])
        """),
    _entry("BT0594", "cannot assign to a read-only value", (KERNEL_CHECK,), """
        A kernel writes to a `Slice` or `Tensor` input, stores into a Tile
        kernel's `Tensor` input, assigns a plain value to an `AtomicSlice`
        element, or rebinds a parameter.

        Inputs are shared borrows: every thread may read any element, so no
        thread may write one. Outputs are declared as such (`DisjointSlice`,
        `DisjointTensor`, `AtomicSlice`, `tile.Out`), which is what lets the
        launch check them for aliasing and the compiler check who writes
        where.
        """, """
        @simt.kernel(block=256)
        def relu(a: Slice[f32]):
            i = simt.index_1d()
            a[i] = max(a[i], 0.0)
        """, """
        @simt.kernel(block=256)
        def relu(a: DisjointSlice[f32]):
            i = simt.index_1d()
            a[i] = max(a[i], 0.0)
        """),
    _entry("BT0600", "launch contract violated", (KERNEL_CHECK, "launch"), """
        A kernel's launch contract is invalid, or a launch breaks it.

        The contract (`block=`, `dynamic_shared=`, `requires=`,
        `min_compute_capability=`, a Tile kernel's `specialize=`) states
        what every launch must provide. At build time buildtile checks that
        the contract itself makes sense (block sizes within 1..1024, known
        keys, relations over real parameters, a block with as many
        dimensions as the kernel indexes with, tile shapes that are powers
        of two) and that the kernel stays within it. At a launch, by the
        Python host and the C shim alike and before anything is queued, the
        grid, the block, the shared memory, the device and the `requires`
        relations over the arguments' sizes are checked against it: an empty
        grid (`ops.k[0](c)`) or a block other than the contract's is
        refused.
        """, """
        @simt.kernel(block=(16, 16))
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            c[i] = 1.0
        """, """
        @simt.kernel(block=256)
        def k(c: DisjointSlice[f32]):
            i = simt.index_1d()
            c[i] = 1.0
        """),
    _entry("BT0601", "out-of-range read", ("runtime",), """
        A kernel of a `checks = "debug"` build read outside an array.

        Writes past the end of a disjoint output are skipped by
        construction; reads are not checked in release builds, where they
        cost nothing. A debug build records the first out-of-range read on
        the device, and the host raises `BoundsError` at the next
        synchronisation (or before the next launch of a debug build),
        naming the kernel, the source line, the index and the extent.
        """, """
        @simt.kernel(block=256)
        def diff(x: Slice[f32], d: DisjointSlice[f32]):
            i = simt.index_1d()
            d[i] = x[i + 1] - x[i]          # reads x[len(x)] in the last thread
        """, """
        @simt.kernel(block=256)
        def diff(x: Slice[f32], d: DisjointSlice[f32]):
            i = simt.index_1d()
            if i + 1 < len(x):
                d[i] = x[i + 1] - x[i]
        """),
    _entry("BT0610", "no image for this device", ("launch",), """
        The package carries no cubin and no PTX that this GPU can run.

        Kernels are compiled ahead of time for the targets in
        `[tool.buildtile] targets`. A GPU of another architecture can run
        them only from PTX of an older target (with `ptx = true`) that the
        driver compiles at load time. The message names the built targets.
        """, """
        [tool.buildtile]
        targets = ["sm_90"]
        ptx = false              # then launched on an sm_80 GPU
        """, """
        [tool.buildtile]
        targets = ["sm_80", "sm_90"]
        ptx = true
        """),
    _entry("BT0620", "package not built or incomplete", ("package",), """
        An installed package lacks its buildtile manifest, a kernel the
        Python module declares, or the C ABI library it should carry.

        The manifest is written by the build; without it (a source checkout
        that was never built, a kernel added since the last build, a wheel
        built with the C ABI off) there is nothing to launch.
        """, """
        $ git clone ... && cd my_kernels
        $ python -c "from my_kernels import ops; ops.vecadd[1](a, b, c)"
        """, """
        $ pip install --no-build-isolation .     # or: buildtile build
        $ python -c "from my_kernels import ops; ops.vecadd[1](a, b, c)"
        """),
    _entry("BT0621", "manifest is not valid", ("package",), """
        The package's manifest is not valid JSON, or a record in it (a
        parameter, a contract, a `requires` relation, a Tile signature)
        does not have the shape this buildtile reads.

        Both hosts trust the manifest to describe the compiled kernels; one
        they cannot read is refused whole rather than guessed at. It is
        written only by the build, so the cure is to rebuild.
        """, """
        # a hand-edited _buildtile/manifest.json
        {"name": "x", "kind": "slice", "dtype": "float", "rank": 1}
        """, """
        # rebuild the package; never edit the manifest
        {"name": "x", "kind": "slice", "dtype": "f32", "rank": 1}
        """),
    _entry("BT0622", "kernel ABI version mismatch", ("package", "launch"), """
        A package was built for another manifest or kernel ABI version than
        the buildtile (or the C/C++ headers) reading it.

        The ABI fixes how each parameter is passed to a compiled kernel. A
        launcher of one version driving kernels of another would pass
        arguments the kernels misread, so the versions must match exactly.
        """, """
        # a wheel built with an older buildtile, imported with a newer one
        >>> from old_kernels import ops
        """, """
        $ pip install --force-reinstall --no-build-isolation ./old_kernels
        """),
    _entry("BT0623", "damaged kernel image", ("package", "launch"), """
        A cubin or PTX file of the package cannot be read, or its bytes do
        not match the sha256 the manifest records.

        Loading a truncated or replaced image into the driver could fail in
        obscure ways or run other code; the checksum makes a damaged
        install a clear error.
        """, """
        $ truncate -s 100 site-packages/my_kernels/_buildtile/sm_80/ops.cubin
        """, """
        $ pip install --force-reinstall my_kernels
        """),
    _entry("BT0700", "CUDA driver error", ("runtime",), """
        The CUDA driver is missing, or returned an error for a call buildtile
        made (loading a module, launching, synchronising).

        buildtile loads the driver lazily, so packages import on machines
        without a GPU; a launch then fails with this code. The message names
        the driver call and the driver's own error text; errors from a
        kernel that already ran (an illegal address, for instance) surface
        at the next synchronisation.
        """, """
        # on a machine with no NVIDIA driver
        >>> ops.vecadd[4](a, b, c)
        """, """
        $ buildtile doctor        # says whether a GPU and a driver are usable
        """),
    _entry("BT0701", "the CUDA driver could not be loaded", ("runtime",), """
        The C shim library could not load or initialise the CUDA driver.

        The shim a package's C ABI ships opens libcuda with dlopen on the
        first launch, so the library links and loads on machines without a
        GPU. A launch there returns status 701 (BT_ERR_NO_DRIVER) with this
        message, after the argument checks, which need no driver.
        """, """
        /* on a machine with no NVIDIA driver */
        int status = my_kernels_vecadd(&cfg, &a, &b, &c);   /* 701 */
        """, """
        int status = my_kernels_vecadd(&cfg, &a, &b, &c);
        if (status != 0)
            fprintf(stderr, "%s\\n", my_kernels_last_error());
        """),
    _entry("BT0800", "out-of-bounds access (emulator)", ("runtime",), """
        A kernel run on the CPU emulator (`BUILDTILE_DEVICE=cpu`,
        `buildtile.emulate`) read or wrote global or shared memory outside
        every array of the launch.

        On a GPU such an access reads another allocation's data or faults
        later, far from its cause. The emulator checks every access of the
        kernel's own LLVM IR against the launch's arrays (their real extents)
        and names the array, the byte and the thread.
        """, """
        with simt.unsafe():
            out[i] = x[i + 1]        # the last thread reads past the end of x
        """, """
        if i + 1 < len(x):
            out[i] = x[i + 1]
        """),
    _entry("BT0801", "two writers of one element (emulator)", ("runtime",), """
        Under the CPU emulator two threads (SIMT) or two tiles (Tile) wrote
        the same element of an output during one launch.

        The ownership checks prove each element has one writer; inside
        `simt.unsafe()` that proof is yours. The emulator keeps a writer
        record of every byte of the launch's arrays and reports the second
        writer, a dynamic cross-check of the proof (atomics are exempt).
        """, """
        with simt.unsafe():
            out[i // 2] = 1.0        # threads 2k and 2k + 1 write element k
        """, """
        out[i] = 1.0                 # each thread writes its own element
        """),
    _entry("BT0802", "barrier reached by part of a block (emulator)", ("runtime",), """
        Under the CPU emulator some threads of a block met at a barrier (or
        a warp collective) after others of the block or warp had returned;
        or threads waited for each other forever (part of a warp at a
        shuffle, the others at a barrier); or, in a cooperative launch, every
        block still running waited at a `simt.grid_sync()` that a block which
        had returned never reached.

        Every thread of a block must reach each `sync_threads()`, and every
        thread of the grid each `grid_sync()`; on a GPU a barrier that part
        of the block (or grid) skips hangs or silently misbehaves.
        """, """
        if simt.thread_idx.x >= 32:
            return
        with simt.unsafe():
            simt.sync_threads()
        """, """
        with simt.unsafe():
            simt.sync_threads()      # every thread reaches it
        """),
    _entry("BT0803", "read of uninitialised shared memory (emulator)", ("runtime",), """
        Under the CPU emulator a thread read shared memory that no thread of
        its block had written in this block's run.

        Shared memory starts with stale data from another block; the
        emulator records which bytes the block wrote (stores and cp.async
        copies) and reports a read of any other.
        """, """
        with simt.unsafe():
            stage = simt.shared_array(f32, 64)
            if t < 32:
                stage[t] = x[i]
            simt.sync_threads()
            out[i] = stage[t]        # threads 32..63 read what nobody wrote
        """, """
        with simt.unsafe():
            stage = simt.shared_array(f32, 64)
            stage[t] = x[i]
            simt.sync_threads()
            out[i] = stage[t]
        """),
    _entry("BT0804", "misaligned access (emulator)", ("runtime",), """
        Under the CPU emulator a vector access (or ldmatrix, cp.async) used
        an address that is not a multiple of its size.

        On a GPU this is a misaligned-address fault that ends the context.
        """, """
        # a float4 load from a pointer 4 bytes past a 16-byte boundary
        """, """
        # vector accesses only where the address is a multiple of 16
        """),
    _entry("BT0805", "the emulator cannot run this kernel", ("launch",), """
        `BUILDTILE_DEVICE=cpu` or `buildtile.emulate` was asked to run a
        kernel it cannot: it uses inline PTX or an intrinsic the emulator
        has no stand-in for, its module's source is not installed, no C
        compiler is found to build the emulator's runtime, or the full
        buildtile (which carries the emulator) is not installed.
        """, """
        $ BUILDTILE_DEVICE=cpu python app.py     # with buildtile-runtime alone
        """, """
        $ pip install buildtile
        $ BUILDTILE_DEVICE=cpu python app.py
        """),
    _entry("BT0806", "cp.async copies left in flight (emulator)", ("runtime",), """
        Under the CPU emulator a thread ended with cp.async copies that no
        `cp.async.wait_group` retired, or kept more in flight than the
        emulator tracks.
        """, """
        # a pipeline that commits a stage and never waits for it
        """, """
        # every committed group retired by a wait_group before it is read
        """),
    _entry("BT0807", "misused asynchronous instruction (emulator)", ("runtime",), """
        Under the CPU emulator a kernel's TMA entry (sm_90a) or its inline
        PTX used an asynchronous or warpgroup instruction in a way the PTX
        ISA leaves undefined: an mbarrier that no `mbarrier.init` made, more
        arrivals than its count, a bulk tensor copy through something that
        is no tensor map, a `wgmma` or `setmaxnreg` by part of a warpgroup,
        a `wgmma` without `wgmma.fence`, a matrix descriptor that points
        outside shared memory, or a write of shared memory that a `wgmma`
        not yet retired by `wgmma.wait_group` still reads.

        On a GPU such a kernel hangs, faults or computes garbage, depending
        on timing; the emulator names the instruction's kernel and line.
        """, """
        # a stage refilled by TMA while the wgmma reading it is in flight:
        # wgmma.commit_group, then cp.async.bulk.tensor into that stage
        """, """
        # retire the group first (wgmma.wait_group), then refill the stage
        """),
]

CODES: dict[str, ErrorCode] = {entry.code: entry for entry in _ENTRIES}
