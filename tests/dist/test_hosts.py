"""Data-parallel training across hosts: two network namespaces ("hosts" with their own
network stack and hostname), joined by veth links through a bridge, each running one
process of the job, so that the processes' traffic crosses network interfaces (counted
on the links). mpirun starts the remote processes as it does over ssh, through an agent
that enters the host's namespace. Making namespaces takes root (CAP_SYS_ADMIN and
CAP_NET_ADMIN): where the machine refuses, the test fails and says so; scripts/test.sh
runs it only where namespaces can be made."""
import json
import os
import pathlib
import subprocess

import pytest

TFM = os.environ["TFM_BINARY"]
FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "threads"
TAG = f"tfm{os.getpid() % 100000}"  # names of this run's links and namespaces (at most 15 characters)
NET = "10.213.7"
HOSTS = {f"{NET}.11": f"{TAG}a", f"{NET}.12": f"{TAG}b"}  # address: namespace
LM = ["lm", "train", "--text", f"{FIXTURES}/lm.txt", "--layers", "1", "--d-model", "32", "--heads", "2", "--d-ff", "64",
      "--context", "32", "--batch", "8", "--dropout", "0.1", "--sample-tokens", "0", "--steps", "30", "--log-every", "1",
      "--validate-every", "15", "--seed", "8"]


def ip(*args):
    run = subprocess.run(["ip", *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {run.stderr.strip()}")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    probe = subprocess.run(["ip", "netns", "add", f"{TAG}p"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail("this machine refuses to create network namespaces (`ip netns add`: " + probe.stderr.strip() +
                    "); the test needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN")
    ip("netns", "del", f"{TAG}p")
    bridge = f"{TAG}br"
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{NET}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for address, ns in HOSTS.items():
            ip("netns", "add", ns)
            ip("link", "add", f"{ns}v", "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", f"{ns}v", "master", bridge, "up")
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
        work = tmp_path_factory.mktemp("hosts")
        agent = work / "agent.sh"  # mpirun's `ssh HOST COMMAND`, for a host that is a namespace
        cases = "".join(f"  {address}) ns={ns} ;;\n" for address, ns in HOSTS.items())
        agent.write_text(f'#!/bin/sh\nhost=$1; shift\ncase $host in\n{cases}  *) echo "agent: unknown host $host" >&2; exit 1 ;;\nesac\n'
                         'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"\n')
        agent.chmod(0o755)
        (work / "hostfile").write_text("".join(f"{address} slots=1\n" for address in HOSTS))
        yield work
    finally:
        for ns in HOSTS.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def link_bytes():
    """Bytes through the hosts' links, as the bridge's side of each counts them."""
    total = 0
    for ns in HOSTS.values():
        for way in ("rx", "tx"):
            total += int(pathlib.Path(f"/sys/class/net/{ns}v/statistics/{way}_bytes").read_text())
    return total


def losses(run_dir):
    return [json.loads(line)["train_loss"] for line in open(run_dir / "metrics.jsonl") if "train_loss" in line]


def test_two_hosts_train_as_one_process_does(hosts):
    one = subprocess.run([TFM, "--threads", "1", *LM, "--out", "alone"], cwd=hosts, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout + one.stderr
    before = link_bytes()
    two = subprocess.run(["mpirun", "--allow-run-as-root", "--hostfile", "hostfile", "-np", "2", "--mca", "plm_rsh_agent", str(hosts / "agent.sh"),
                          "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", f"{NET}.0/24",
                          "--mca", "oob_tcp_if_include", f"{NET}.0/24", TFM, "--threads", "1", *LM, "--out", str(hosts / "hosts")],
                         cwd=hosts, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stdout + two.stderr
    crossed = link_bytes() - before
    want, got = losses(hosts / "alone"), losses(hosts / "hosts")
    assert len(got) == len(want) == 30
    for i, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-5 * abs(w), f"step {i + 1}: {g} on two hosts, {w} alone"
    parameters = int(two.stdout.split(" parameters")[0].rsplit(", ", 1)[1])
    # Each step sends each host's gradients at least once (4 bytes a parameter).
    assert crossed >= 30 * 4 * parameters, f"only {crossed} bytes crossed the links for 30 steps of {parameters} parameters"
