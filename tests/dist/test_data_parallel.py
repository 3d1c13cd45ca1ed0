"""Data-parallel training on MPI (`mpirun -np N tfm ...`): N processes, talking TCP over
loopback only (no shared-memory transport, as between hosts), compute what one process
computes on the same global batches, for every family; a run repeats bit for bit; a run
resumes on another number of processes; a lost process stops the job."""
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

TFM = os.environ["TFM_BINARY"]
FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "threads"
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self",
          "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
STEPS = 50
COMMON = ["--steps", str(STEPS), "--log-every", "1", "--seed", "5"]

# Each family's small model, with dropout on, so that the masks must agree too.
FAMILIES = {
    "copy": ["train", "--config", "copy.json", "--batch", "12", "--samples", "3", "--warmup", "100"],
    "translation": ["train", "--train-src", f"{FIXTURES}/mt.de", "--train-tgt", f"{FIXTURES}/mt.en", "--valid-src",
                    f"{FIXTURES}/mt.de", "--valid-tgt", f"{FIXTURES}/mt.en", "--src-vocab", f"{FIXTURES}/vocab.model",
                    "--tgt-vocab", f"{FIXTURES}/vocab.model", "--config", f"{FIXTURES}/mt.json", "--max-tokens", "300",
                    "--warmup", "100", "--lr", "0.5", "--validate-every", "25", "--epochs", "100"],
    "lm": ["lm", "train", "--text", f"{FIXTURES}/lm.txt", "--layers", "1", "--d-model", "32", "--heads", "2", "--d-ff", "64",
           "--context", "32", "--batch", "8", "--dropout", "0.1", "--sample-tokens", "0", "--validate-every", "25"],
    "bert": ["bert", "train", "--text", f"{FIXTURES}/lm.txt", "--layers", "1", "--d-model", "32", "--heads", "2", "--d-ff", "64",
             "--max-len", "32", "--batch", "8", "--dropout", "0.1", "--validate-every", "25"],
    "vit": ["vit", "train", "--data", str(FASHION), "--layers", "1", "--d-model", "32", "--heads", "2", "--d-ff", "64",
            "--batch", "16", "--valid-images", "64", "--dropout", "0.1", "--validate-every", "25"],
}


def tfm(args, processes=0, cwd=None, timeout=600):
    """`tfm args` alone (processes 0) or as `mpirun -np processes`, one thread each."""
    command = ([*MPIRUN, "-np", str(processes)] if processes else []) + [TFM, "--threads", "1", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def records(run_dir, key):
    return [json.loads(line) for line in open(run_dir / "metrics.jsonl") if key in line]


def losses(run_dir):
    return [r["train_loss"] for r in records(run_dir, "train_loss")]


def weights(path):
    """The tensors' bytes of a safetensors file (its metadata holds timings)."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return header, raw[8 + n:]


def assert_close(got, want, what, rel=1e-5):
    assert len(got) == len(want), f"{what}: {len(got)} values, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= rel * abs(w), f"{what}: value {i + 1} is {g}, one process gave {w}"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("dp")
    (d / "copy.json").write_text('{"d_model":32,"heads":2,"d_ff":64,"encoder_layers":1,"decoder_layers":1,"dropout":0.1}')
    return d


@pytest.mark.parametrize("family", FAMILIES)
def test_n_processes_compute_what_one_computes(work, family):
    if family == "vit" and not FASHION.is_dir():
        pytest.fail(f"{FASHION} is missing: install Debian's dataset-fashion-mnist (scripts/install-deps.sh)")
    args = FAMILIES[family] + COMMON
    one = tfm(args + ["--out", f"{family}-1"], cwd=work)
    assert one.returncode in (0, 3), one.stdout + one.stderr  # 3: the copy task's samples are not all copied yet
    want = losses(work / f"{family}-1")
    assert len(want) == STEPS
    for n in (2, 3):
        run = tfm(args + ["--out", f"{family}-{n}"], processes=n, cwd=work)
        assert run.returncode == one.returncode, run.stdout + run.stderr
        assert run.stdout.count("model:") == 1, "only rank 0 writes:\n" + run.stdout
        assert f"data parallel: {n} processes" in run.stdout
        assert_close(losses(work / f"{family}-{n}"), want, f"{family}, {n} processes' training losses")
        valid = [r for r in records(work / f"{family}-{n}", "score_name")]
        valid_want = [r for r in records(work / f"{family}-1", "score_name")]
        assert [r["step"] for r in valid] == [r["step"] for r in valid_want]
        if "valid_loss" in valid_want[-1]:
            assert_close([r["valid_loss"] for r in valid], [r["valid_loss"] for r in valid_want], f"{family}, {n} processes' validation")
        assert not any((work / f"{family}-{n}").glob("*.tmp"))


def test_the_same_run_repeated_gives_bit_identical_weights(work):
    args = FAMILIES["lm"] + ["--steps", "20", "--seed", "9"]
    for name in ("again-a", "again-b"):
        run = tfm(args + ["--out", name], processes=3, cwd=work)
        assert run.returncode == 0, run.stdout + run.stderr
    assert weights(work / "again-a" / "last.safetensors") == weights(work / "again-b" / "last.safetensors")


def test_a_run_resumes_on_another_number_of_processes(work):
    """20 steps on 2 processes, then 20 more on 3, then 20 on 1: the losses of 60 steps on one."""
    args = FAMILIES["lm"] + ["--log-every", "1", "--seed", "4", "--validate-every", "0"]
    whole = tfm(args + ["--steps", "60", "--out", "whole"], cwd=work)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    for steps, n in ((20, 2), (40, 3), (60, 0)):
        resume = ["--resume", "parts/last.safetensors"] if steps > 20 else []
        run = tfm(args + ["--steps", str(steps), "--out", "parts", *resume], processes=n, cwd=work)
        assert run.returncode == 0, run.stdout + run.stderr
    assert_close(losses(work / "parts"), losses(work / "whole"), "the resumed runs' losses")


def test_a_lost_process_stops_the_job_and_the_last_checkpoint_resumes(work):
    args = FAMILIES["lm"] + ["--steps", "100000", "--save-every", "5", "--validate-every", "0", "--seed", "4", "--log-every", "1"]
    log = open(work / "killed.log", "w")
    job = subprocess.Popen([*MPIRUN, "-np", "3", "--tag-output", TFM, "--threads", "1", *args, "--out", "killed"], cwd=work,
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not (work / "killed" / "step-10.safetensors").exists():
            assert time.time() < deadline and job.poll() is None, (work / "killed.log").read_text()
            time.sleep(0.1)
        pids = subprocess.run(["pgrep", "-f", "-s", str(job.pid), "tfm --threads 1 lm train"], capture_output=True, text=True)
        ranks = sorted(int(p) for p in pids.stdout.split())
        assert len(ranks) == 3, pids.stdout
        killed_at = time.time()
        os.kill(ranks[1], signal.SIGKILL)  # started second: rank 1, most likely; the message must name whichever it was
        code = job.wait(timeout=60)
        assert time.time() - killed_at < 60
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        log.close()
    out = (work / "killed.log").read_text()
    assert code != 0
    assert "exited on signal 9" in out and "rank" in out, out[-3000:]
    saved = sorted((work / "killed").glob("step-*.safetensors"), key=lambda p: int(p.stem[5:]))[-1]
    info = tfm(["info", str(saved)])
    assert info.returncode == 0, info.stdout + info.stderr
    # The last checkpoint continues exactly: 5 more steps from it on 2 processes give one process's losses.
    step = int(saved.stem[5:])
    resumed = tfm(args[:args.index("--steps")] + ["--steps", str(step + 5), "--validate-every", "0", "--seed", "4", "--log-every", "1",
                  "--resume", str(saved), "--out", "after-kill"], processes=2, cwd=work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    straight = tfm(args[:args.index("--steps")] + ["--steps", str(step + 5), "--validate-every", "0", "--seed", "4", "--log-every", "1",
                   "--out", "straight"], cwd=work)
    assert straight.returncode == 0, straight.stdout + straight.stderr
    assert_close(losses(work / "after-kill")[-5:], losses(work / "straight")[-5:], "the losses after the resume")


def test_a_process_that_cannot_read_its_data_fails_the_job_with_its_message(work):
    """Rank 1's text is missing: the job stops, naming rank 1 and the file."""
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then text=missing.txt; else text={FIXTURES}/lm.txt; fi; '
              f'exec {TFM} --threads 1 lm train --text "$text" --steps 5 --out failing')
    started = time.time()
    run = subprocess.run([*MPIRUN, "-np", "2", "sh", "-c", script], cwd=work, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert time.time() - started < 60
    assert "tfm: error: rank 1 of 2: --text: File does not exist: missing.txt" in run.stderr, run.stderr
