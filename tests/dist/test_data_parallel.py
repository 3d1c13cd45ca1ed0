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

LM = ["lm", "train", "--text", f"{FIXTURES}/lm.txt", "--layers", "1", "--d-model", "32", "--heads", "2", "--d-ff", "64",
      "--context", "32", "--batch", "8", "--dropout", "0.1", "--sample-tokens", "0"]
# Each family's small model, with dropout on, so that the masks must agree too (learning
# rates low enough that rounding differences do not grow past 1e-5 in 50 steps: one
# process on 1 and 2 threads differs by 1e-3 after 30 steps of the copy task at its
# default rate, which warms up over 10 steps).
FAMILIES = {
    "copy": ["train", "--config", "copy.json", "--batch", "12", "--samples", "3", "--warmup", "100"],
    "translation": ["train", "--train-src", f"{FIXTURES}/mt.de", "--train-tgt", f"{FIXTURES}/mt.en", "--valid-src",
                    f"{FIXTURES}/mt.de", "--valid-tgt", f"{FIXTURES}/mt.en", "--src-vocab", f"{FIXTURES}/vocab.model",
                    "--tgt-vocab", f"{FIXTURES}/vocab.model", "--config", f"{FIXTURES}/mt.json", "--max-tokens", "100",
                    "--warmup", "100", "--lr", "0.5", "--validate-every", "25", "--epochs", "100"],  # batches of a few sentences: some leave a process without a share
    "lm": LM + ["--validate-every", "25"],
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


def rank_of(pid):
    environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(v for v in environ if v.startswith(b"OMPI_COMM_WORLD_RANK=")).split(b"=")[1])


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
    args = LM + ["--steps", "20", "--seed", "9"]
    for name in ("again-a", "again-b"):
        run = tfm(args + ["--out", name], processes=3, cwd=work)
        assert run.returncode == 0, run.stdout + run.stderr
    assert weights(work / "again-a" / "last.safetensors") == weights(work / "again-b" / "last.safetensors")


def test_a_run_resumes_on_another_number_of_processes(work):
    """20 steps on 2 processes, then 20 more on 3, then 20 on 1: the losses of 60 steps on one."""
    args = LM + ["--log-every", "1", "--seed", "4", "--validate-every", "0"]
    whole = tfm(args + ["--steps", "60", "--out", "whole"], cwd=work)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    for steps, n in ((20, 2), (40, 3), (60, 0)):
        resume = ["--resume", "parts/last.safetensors"] if steps > 20 else []
        run = tfm(args + ["--steps", str(steps), "--out", "parts", *resume], processes=n, cwd=work)
        assert run.returncode == 0, run.stdout + run.stderr
    assert_close(losses(work / "parts"), losses(work / "whole"), "the resumed runs' losses")


def test_a_lost_process_stops_the_job_and_the_last_checkpoint_resumes(work):
    args = LM + ["--save-every", "5", "--validate-every", "0", "--seed", "4", "--log-every", "1"]
    log = open(work / "killed.log", "w")
    job = subprocess.Popen([*MPIRUN, "-np", "3", TFM, "--threads", "1", *args, "--steps", "100000", "--out", "killed"], cwd=work,
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not (work / "killed" / "step-10.safetensors").exists():
            assert time.time() < deadline and job.poll() is None, (work / "killed.log").read_text()
            time.sleep(0.1)
        pids = subprocess.run(["pgrep", "-s", str(job.pid), "-f", f"^{TFM} "], capture_output=True, text=True).stdout.split()
        ranks = {rank_of(int(pid)): int(pid) for pid in pids}
        assert sorted(ranks) == [0, 1, 2], pids
        killed_at = time.time()
        os.kill(ranks[1], signal.SIGKILL)
        code = job.wait(timeout=60)
        assert time.time() - killed_at < 60
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        log.close()
    out = (work / "killed.log").read_text()
    assert code != 0
    assert "process rank 1 with PID" in out and "exited on signal 9 (Killed)" in out, out[-3000:]
    saved = sorted((work / "killed").glob("step-*.safetensors"), key=lambda p: int(p.stem[5:]))[-1]
    info = tfm(["info", str(saved)])
    assert info.returncode == 0, info.stdout + info.stderr
    # The last checkpoint continues exactly: 5 more steps from it on 2 processes give one process's losses.
    step = int(saved.stem[5:])
    for out, n in (("after-kill-2", 2), ("after-kill-1", 0)):
        resumed = tfm(args + ["--steps", str(step + 5), "--resume", str(saved), "--out", out], processes=n, cwd=work)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_close(losses(work / "after-kill-2")[-5:], losses(work / "after-kill-1")[-5:], "the losses after the resume")


def test_a_process_that_cannot_read_its_data_fails_the_job_with_its_message(work):
    """Rank 1's text is missing: the job stops, naming rank 1 and the file."""
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then text=missing.txt; else text={FIXTURES}/lm.txt; fi; '
              f'exec {TFM} --threads 1 lm train --text "$text" --steps 5 --out failing')
    started = time.time()
    run = subprocess.run([*MPIRUN, "-np", "2", "sh", "-c", script], cwd=work, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert time.time() - started < 60
    assert "tfm: error: rank 1 of 2: --text: File does not exist: missing.txt" in run.stderr, run.stderr


@pytest.mark.parametrize("rank1, what", [(["--text", "reversed.txt"], "training data"), (["--layers", "2"], "model settings"),
                                         (["--seed", "6"], "training flags")])
def test_processes_given_different_data_flags_or_models_are_refused_at_start(work, rank1, what):
    """The review's W6 and U3: a rank with other data (a stale copy on one host), another
    architecture or other flags is named at start, before any step mixes them."""
    lines = open(f"{FIXTURES}/lm.txt").read().splitlines()
    (work / "reversed.txt").write_text("\n".join(reversed(lines)) + "\n")
    base = [TFM, "--threads", "1"] + LM + ["--steps", "5", "--out", f"mixed_{what.replace(' ', '_')}", "--seed", "5"]
    other = list(base)
    other[other.index(rank1[0]) + 1] = rank1[1]
    job = [*MPIRUN, "-np", "1", *base, ":", "-np", "1", *other]
    run = subprocess.run(job, cwd=work, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert f"the processes of this job were given different {what}: rank 1's are" in run.stderr, run.stderr
    assert not (work / f"mixed_{what.replace(' ', '_')}" / "last.safetensors").exists()


def test_ctrl_c_stops_every_process_after_the_same_step_and_saves_once(work):
    # A log line every 25 steps: mpirun stops forwarding the processes' output on Ctrl-C, and
    # rank 0 of a model this small, logging every step (a millisecond each), would fill the
    # pipe and block in a write until mpirun kills the job (docs/SCALING.md says so).
    log = open(work / "interrupted.log", "w")
    job = subprocess.Popen([*MPIRUN, "-np", "3", TFM, "--threads", "1", *LM, "--steps", "100000", "--validate-every", "0",
                            "--log-every", "25", "--out", "interrupted"], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while not (work / "interrupted" / "metrics.jsonl").exists() or len(losses(work / "interrupted")) < 5:
            assert time.time() < deadline and job.poll() is None, (work / "interrupted.log").read_text()
            time.sleep(0.1)
        job.send_signal(signal.SIGINT)  # mpirun passes it on to every process
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
        log.close()
    out = (work / "interrupted.log").read_text()
    assert out.count("interrupted: saved") == 1, out[-3000:]
    step = int(out.split("interrupted: saved")[1].split("at step ")[1].split(";")[0])
    assert records(work / "interrupted", "train_loss")[-1]["step"] >= step - 25
    resumed = tfm(LM + ["--steps", str(step + 2), "--validate-every", "0", "--resume", "interrupted/last.safetensors", "--out",
                        "interrupted"], processes=2, cwd=work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resumed interrupted/last.safetensors at step {step}" in resumed.stdout


def tensors(path):
    """A safetensors file's f32 tensors as NumPy arrays."""
    import numpy
    header, data = weights(path)
    return {name: numpy.frombuffer(data[h["data_offsets"][0]:h["data_offsets"][1]], dtype=numpy.float32).reshape(h["shape"])
            for name, h in header.items() if h["dtype"] == "F32"}


def test_a_sharded_optimizer_computes_what_one_process_computes(work):
    """--shard-optimizer (ZeRO stage 1): each process updates its share of the weights and
    keeps its share of Adam's moments; the losses and the saved moments are one process's,
    and its checkpoints continue with or without sharding."""
    args = LM + ["--steps", "30", "--log-every", "1", "--validate-every", "15", "--clip-norm", "0.5", "--seed", "6"]
    one = tfm(args + ["--out", "zero-1"], cwd=work)
    assert one.returncode == 0, one.stdout + one.stderr
    for n in (2, 3):
        run = tfm(args + ["--shard-optimizer", "--out", f"zero-{n}"], processes=n, cwd=work)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "sharded optimiser state" in run.stdout
        assert_close(losses(work / f"zero-{n}"), losses(work / "zero-1"), f"{n} processes' losses with a sharded optimiser")
        saved, want = tensors(work / f"zero-{n}" / "last.safetensors"), tensors(work / "zero-1" / "last.safetensors")
        assert saved.keys() == want.keys()
        for name in want:  # the weights, and every parameter's moments gathered from its process (Adam's
            # division by the second moment's root makes 30 steps' rounding 5e-5 of the largest small weights)
            assert abs(saved[name] - want[name]).max() <= 1e-4 * abs(want[name]).max() + 1e-12, name
    more = LM + ["--steps", "40", "--log-every", "1", "--validate-every", "0", "--clip-norm", "0.5", "--seed", "6"]
    alone = tfm(more + ["--resume", "zero-3/last.safetensors", "--out", "zero-3"], cwd=work)  # sharded on 3, then alone
    assert alone.returncode == 0, alone.stdout + alone.stderr
    sharded = tfm(more + ["--shard-optimizer", "--resume", "zero-1/last.safetensors", "--out", "zero-1"], processes=3, cwd=work)
    assert sharded.returncode == 0, sharded.stdout + sharded.stderr
    assert_close(losses(work / "zero-3"), losses(work / "zero-1"), "the continued runs' losses")


@pytest.mark.parametrize("shard", [False, True])
def test_processes_on_the_simulated_device_compute_what_they_compute_on_the_cpu(work, shard):
    """--device sim (the CPU's kernels over memory that no other code may read, as a GPU's):
    the sums between processes go through host copies, and 2 processes give the CPU's
    2 processes' weights bit for bit, with and without the sharded optimiser."""
    args = LM + ["--steps", "10", "--seed", "8"] + (["--shard-optimizer"] if shard else [])
    for device in ("cpu", "sim"):
        run = tfm(args + ["--device", device, "--out", f"dev-{device}-{shard}"], processes=2, cwd=work)
        assert run.returncode == 0, run.stdout + run.stderr
    assert weights(work / f"dev-sim-{shard}" / "last.safetensors") == weights(work / f"dev-cpu-{shard}" / "last.safetensors")


def test_commands_other_than_training_refuse_several_processes(work):
    run = tfm(["info", f"{FIXTURES}/lm.safetensors"], processes=2, cwd=work)
    assert run.returncode != 0
    assert "tfm: error: rank 0 of 2: tfm info runs in one process: under mpirun -np 2, only the training commands" in run.stderr
    alone = tfm(["info", f"{FIXTURES}/lm.safetensors"], processes=1, cwd=work)  # a job of one is one process
    assert alone.returncode == 0, alone.stdout + alone.stderr
