"""Long fuzzing runs of the kernel and launch mutators (the test suite runs a few hundred cases):

    python scripts/fuzz.py kernels --cases 20000 --seed 1
    python scripts/fuzz.py launches --cases 10000 --seed 1

Prints the outcomes and, for each distinct internal error, one reproducer (the mutant kernel
module, or the launch), then exits 1 if there was any.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fuzz.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("fuzzer", choices=["kernels", "launches"])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.monotonic()
    if args.fuzzer == "kernels":
        from fuzz.kernels import run_cases

        report = run_cases(args.cases, args.seed, log=lambda line: print(line, flush=True))
    else:
        # launches need the test suite's fake driver and compiled runtime kernels: run the suite's
        # launch-fuzzing test, both launch paths, at this size and seed
        import os
        import subprocess

        env = {**os.environ, "FUZZ_CASES": str(args.cases), "FUZZ_SEED": str(args.seed)}
        return subprocess.call([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                                str(ROOT / "tests" / "test_fuzz_launches.py"), "-k", "every_mutated_launch"],
                               cwd=ROOT, env=env)
    print(f"{report.cases} cases in {time.monotonic() - start:.0f} s: "
          + ", ".join(f"{kind} {n}" for kind, n in sorted(report.outcomes.items())))
    print(f"{len(report.internal)} distinct internal errors")
    for key, (reproducer, name) in report.internal.items():
        print(f"\n=== {key}  ({name})\n{reproducer}")
    return 1 if report.internal else 0


if __name__ == "__main__":
    raise SystemExit(main())
