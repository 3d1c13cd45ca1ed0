"""bench/llama.py --small end to end (run by ctest: PYTHONPATH holds build/python, TFM_BINARY
names build/tfm): transformers makes the model directory, both engines generate from it in
processes of their own, and tfm's f32 greedy ids are PyTorch's. Skipped where transformers'
offline environment (HFENV, ../shared/tools/hf-reference/setup.sh) is not installed."""
import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
HFENV = os.environ.get("HFENV", "/work/hfenv")


@pytest.mark.skipif(not os.path.exists(os.path.join(HFENV, "hfenv.py")), reason=f"no transformers environment in {HFENV}")
def test_the_small_run_measures_every_engine_and_compares_their_ids(tmp_path):
    module = next(p for p in os.environ["PYTHONPATH"].split(os.pathsep) if glob.glob(os.path.join(p, "tfm*.so")))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llama.py"), "--small", "--prompt", "8", "--new", "4", "--threads", "2",
                          "--work", str(tmp_path), "--tfm", os.environ["TFM_BINARY"], "--python-module", module, "--no-doc"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| PyTorch") or line.startswith("| tfm")]
    assert [r.split(" | ")[0:2] for r in rows] == [[f"| {e}", b] for e in ("PyTorch f32", "tfm f32", "tfm bf16", "tfm int8") for b in ("1", "8")]
    assert "tfm f32: 4 of 4 new tokens as PyTorch f32's" in out.stdout
    assert os.path.exists(os.path.join(tmp_path, "small", "model.safetensors"))
