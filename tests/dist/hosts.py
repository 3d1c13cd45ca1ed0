"""Hosts made of network namespaces, for running an MPI job across network interfaces on
one machine (tests/dist/test_hosts.py, bench/scaling.py): each host has its own network
stack and hostname, a veth link to a bridge, and an address; mpirun starts the processes
on them as it would over ssh, through an agent that enters the host's namespace. Making
them takes root (CAP_SYS_ADMIN and CAP_NET_ADMIN)."""
import contextlib
import os
import pathlib
import subprocess

NET = "10.213.7"  # the hosts' subnet: .1 the bridge, .11, .12, ... the hosts


class Refused(Exception):
    """The machine does not let this process make network namespaces."""


def ip(*args):
    run = subprocess.run(["ip", *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {run.stderr.strip()}")


@contextlib.contextmanager
def namespace_hosts(count, work):
    """Makes `count` hosts; yields the mpirun arguments that place one process on each and
    keep the job's traffic on their links. Everything is removed on the way out."""
    tag = f"tfm{os.getpid() % 100000}"  # link and namespace names: at most 15 characters
    probe = subprocess.run(["ip", "netns", "add", f"{tag}p"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise Refused("this machine refuses to create network namespaces (`ip netns add`: " + probe.stderr.strip() +
                      "); hosts made of them need root with CAP_SYS_ADMIN and CAP_NET_ADMIN")
    ip("netns", "del", f"{tag}p")
    hosts = {f"{NET}.{11 + i}": f"{tag}{chr(ord('a') + i)}" for i in range(count)}  # address: namespace
    bridge = f"{tag}br"
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{NET}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for address, ns in hosts.items():
            ip("netns", "add", ns)
            ip("link", "add", f"{ns}v", "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", f"{ns}v", "master", bridge, "up")
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
        work = pathlib.Path(work)
        agent = work / "agent.sh"  # mpirun's `ssh HOST COMMAND`, for a host that is a namespace
        cases = "".join(f"  {address}) ns={ns} ;;\n" for address, ns in hosts.items())
        agent.write_text(f'#!/bin/sh\nhost=$1; shift\ncase $host in\n{cases}  *) echo "agent: unknown host $host" >&2; exit 1 ;;\nesac\n'
                         'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"\n')
        agent.chmod(0o755)
        (work / "hostfile").write_text("".join(f"{address} slots=1\n" for address in hosts))
        # Each host thinks itself alone: bound, both processes would share the first core.
        yield Hosts(hosts, ["mpirun", "--allow-run-as-root", "--hostfile", str(work / "hostfile"), "-np", str(count), "--bind-to", "none",
                            "--mca", "plm_rsh_agent", str(agent), "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl", "tcp,self",
                            "--mca", "btl_tcp_if_include", f"{NET}.0/24", "--mca", "oob_tcp_if_include", f"{NET}.0/24"])
    finally:
        for ns in hosts.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


class Hosts:
    def __init__(self, addresses, mpirun):
        self.namespaces = list(addresses.values())
        self.mpirun = mpirun  # mpirun and its arguments, up to the program

    def link_bytes(self):
        """Bytes through the hosts' links so far, as the bridge's side of each counts them."""
        total = 0
        for ns in self.namespaces:
            for way in ("rx", "tx"):
                total += int(pathlib.Path(f"/sys/class/net/{ns}v/statistics/{way}_bytes").read_text())
        return total
