"""Run every kernel and tile specialization of the installed example_kernels once, from Python,
on the conformance jobs' inputs (test_conformance.make_jobs), and check each result against
NumPy: the program tests/gpu/run.sh runs under each compute-sanitizer tool
(``buildtile sanitize --tool T -- python tests/gpu/sanitize_examples.py``).

Exits 1 if a job fails or the jobs miss an entry of the manifest, so a sanitized run covers
every compiled entry.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_conformance import PACKAGE, make_jobs, manifest_entries, python_arrays, python_call, python_read  # noqa: E402


def main() -> int:
    from buildtile.runtime.package import find_manifest

    manifest = json.loads(find_manifest(f"{PACKAGE}.ops").read_text())
    jobs = make_jobs()
    missing = manifest_entries(manifest) - {job.covers for job in jobs}
    failures = 0
    if missing:
        print(f"jobs do not cover {sorted(missing, key=str)}")
        failures += 1
    for job in jobs:
        try:
            arrays = python_arrays(job, 0)
            python_call(job, arrays, manifest)
            job.check(python_read(arrays))
        except Exception as exc:  # report every job, then fail
            failures += 1
            print(f"{job.id:<32} FAILED: {type(exc).__name__}: {exc}")
            continue
        print(f"{job.id:<32} OK")
    print(f"{len(jobs) - failures} of {len(jobs)} jobs ran and matched NumPy")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
