"""What the GPU benchmarks (bench/gpu/compare*.py) share: running one side as a
subprocess whose last line of output is its JSON result, and printing a row of the GPU
check's table (scripts/gpu/run.sh: ROW, then tab-separated stage, check, dtype, shape,
error, tol, det, device_ms, cpu_ms, result)."""
import json
import os
import subprocess
import time


def run(cmd, out_path, timeout):
    """Runs cmd, keeps its output in out_path and returns its last line as JSON."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    with open(out_path, "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited {p.returncode}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def row(stage, check, dtype, shape, device_ms, result):
    print("\t".join(["ROW", stage, check, dtype, shape, "-", "-", "-", f"{device_ms:.3f}", "-", result]), flush=True)


def failure(e):
    """A failed run's result cell: the rows stay one line each and the table narrow."""
    return "FAIL: " + str(e).replace("\t", " ").replace("\n", " ")[:150]


class Budget:
    """Seconds for every run of a benchmark together, so that it ends within its stage's
    time limit: a run past them fails as the others do, and every row still prints."""

    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds

    def attempt(self, cmd, out_path):
        """The run's JSON result, or the exception that ended it."""
        try:
            return run(cmd, out_path, max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired as e:
            return RuntimeError(f"stopped after {e.timeout:.0f} s, what was left of the benchmark's budget")
        except Exception as e:  # noqa: BLE001 - each run's failure is a row, the others go on
            return e
