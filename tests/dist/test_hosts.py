"""Data-parallel training across hosts (tests/dist/hosts.py: network namespaces joined by
veth links), so that the processes' traffic crosses network interfaces, counted on the
links. Where the machine refuses to make namespaces, the test fails and says so;
scripts/test.sh runs it only where they can be made."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hosts import Refused, namespace_hosts  # noqa: E402

TFM = os.environ["TFM_BINARY"]
FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "threads"
LM = ["lm", "train", "--text", f"{FIXTURES}/lm.txt", "--layers", "1", "--d-model", "32", "--heads", "2", "--d-ff", "64",
      "--context", "32", "--batch", "8", "--dropout", "0.1", "--sample-tokens", "0", "--steps", "30", "--log-every", "1",
      "--validate-every", "15", "--seed", "8"]


def losses(run_dir):
    return [json.loads(line)["train_loss"] for line in open(run_dir / "metrics.jsonl") if "train_loss" in line]


def test_two_hosts_train_as_one_process_does(tmp_path):
    one = subprocess.run([TFM, "--threads", "1", *LM, "--out", "alone"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout + one.stderr
    try:
        with namespace_hosts(2, tmp_path) as hosts:
            before = hosts.link_bytes()
            two = subprocess.run([*hosts.mpirun, TFM, "--threads", "1", *LM, "--out", str(tmp_path / "hosts")], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=300)
            crossed = hosts.link_bytes() - before
    except Refused as e:
        pytest.fail(str(e))
    assert two.returncode == 0, two.stdout + two.stderr
    want, got = losses(tmp_path / "alone"), losses(tmp_path / "hosts")
    assert len(got) == len(want) == 30
    for i, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-5 * abs(w), f"step {i + 1}: {g} on two hosts, {w} alone"
    parameters = int(two.stdout.split(" parameters")[0].rsplit(", ", 1)[1])
    # Each step sends each host's gradients at least once (4 bytes a parameter).
    assert crossed >= 30 * 4 * parameters, f"only {crossed} bytes crossed the links for 30 steps of {parameters} parameters"
