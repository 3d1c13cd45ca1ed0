"""`tfm serve` under attack (issue 36): started under a memory limit (ulimit -v) and a low
task limit, it answers /health within a second while 1,000 keep-alive connections are
open, 100 clients send their headers a byte a second, clients leave in the middle of
streams, and oversized, duplicate-header and malformed requests keep arriving; then
SIGTERM ends it with status 0. (run by ctest as Serve.UnderAttack; TFM_BINARY names build/tfm)"""
import os
import random
import re
import resource
import socket
import stat
import threading
import time

from test_serve import LM, MT, TFM, Server, raw_request

SANITIZED = os.environ.get("TFM_SANITIZED") == "1"
ATTACK_SECONDS = 12  # beyond the 10 s a request's headers may take: the slow clients are closed
NOBODY = 65534


def tasks_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def readable_by_anyone(*paths):
    return all(os.stat(p).st_mode & stat.S_IROTH for p in paths)


def limits(memory_bytes, tasks):
    """What the server starts under: ulimit -v (none in the sanitized build, whose shadow
    memory needs terabytes of addresses) and, where `tasks`, a task limit. A task limit
    binds only a user other than root: the server then runs as nobody."""
    def apply():
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if tasks:
            resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
            os.setgid(NOBODY), os.setuid(NOBODY)
    return apply


def request_bytes(path="/health", extra=b""):
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n"


def read_response(sock):
    """One response with a Content-Length, read whole from `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or b"!"
        assert not data.endswith(b"!"), "the server closed the connection"
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return head.decode()


def timed_health(port):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request_bytes())
        head = read_response(s)
    return head.split("\r\n")[0], time.monotonic() - started


class Attackers:
    """Threads that attack the server until `stop` is set; each counts what it did."""

    def __init__(self, server):
        self.server, self.stop, self.counts, self.failures = server, threading.Event(), {}, []
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self.slow_headers, self.streams_left, self.bad_requests)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def slow_headers(self):
        """100 clients sending a request's headers one byte a second (slowloris)."""
        request = request_bytes(extra=b"X-Slow: " + b"a" * 200 + b"\r\n")
        clients = [socket.create_connection(("127.0.0.1", self.server.port)) for _ in range(100)]
        sent = 0
        while True:
            for c in clients:
                try:
                    c.send(request[sent:sent + 1])
                except OSError:  # closed by the server: its request took too long
                    pass
            sent += 1
            if self.stop.wait(1):
                break
        self.counts["slow clients closed by the server"] = sum(self.closed_by_server(c) for c in clients)

    @staticmethod
    def closed_by_server(client):
        client.settimeout(0.5)
        try:
            return client.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        finally:
            client.close()

    def streams_left(self):
        """Generations streamed and left after their first event (half of them reset)."""
        body = b'{"prompt": "the", "max_new_tokens": 300, "stream": true}'
        while not self.stop.is_set():
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
                s.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          str(len(body)).encode() + b"\r\n\r\n" + body)
                received = b""
                while b"data:" not in received and (piece := s.recv(65536)):
                    received += piece
                if b"data:" not in received:
                    self.failures.append(f"a stream sent no event: {received[:200]!r}")
                if random.random() < 0.5:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # close with a reset
            self.count("stream left")

    BAD = [  # (request, the status it must get)
        (b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n", "413"),
        (request_bytes(extra=b"X-Big: " + b"a" * 70000 + b"\r\n"), "431"),
        (b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 30\r\n\r\n{}", "400"),
        (b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "411"),
        (b"GET /health HTTP/1.1\r\nHost: x\r\nbroken header line\r\n\r\n", "400"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) + b"\r\n\r\n", "400"),  # TLS to a plain port
    ]

    def bad_requests(self):
        while not self.stop.is_set():
            data, status = random.choice(self.BAD)
            answer = raw_request(self.server, data)
            if not answer.startswith("HTTP/1.1 " + status):
                self.failures.append(f"{data[:40]!r} got {answer[:60]!r}, not {status}")
            if not self.truncated():
                self.failures.append("half a request was answered, or its connection kept")
            self.count("bad request")

    def truncated(self):
        """A body shorter than its Content-Length, then the client's end half-closed: the
        server closes the connection without an answer."""
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=15) as s:
            s.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{\"sente")
            s.shutdown(socket.SHUT_WR)
            return s.recv(65536) == b""


def test_the_server_under_attack_keeps_answering_and_stops_cleanly():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))  # this test's own 1,100 sockets
    args = ["--model", MT, "--model", f"lm={LM}", "--threads", "2", "--keep-alive", "60", "--max-body", "100000"]

    # What the server takes unattacked: its threads.
    plain = Server(*args)
    assert plain.request("POST", "/v1/translate", {"sentences": ["ein hund ."]})[0] == 200
    tasks = tasks_of(plain.proc.pid)
    assert plain.stop() == 0

    memory = 0 if SANITIZED else 1_500_000 * 1024  # the review's ulimit -v 1500000 (the tensor cache then reserves less address space)
    # (as root, with files nobody can read, or as another user, whose other processes
    # count, without a task limit)
    as_nobody = os.getuid() == 0 and readable_by_anyone(TFM, MT, LM)
    server = Server(*args, preexec_fn=limits(memory, tasks + 6 if as_nobody else 0))
    try:
        with open(f"/proc/{server.proc.pid}/limits") as f:
            limits_now = f.read()
        assert not memory or re.search(rf"Max address space +{memory} ", limits_now), limits_now
        assert not as_nobody or re.search(rf"Max processes +{tasks + 6} ", limits_now), limits_now
        kept = []
        for _ in range(1000):  # keep-alive connections, each after one answered request
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall(request_bytes())
            assert read_response(s).startswith("HTTP/1.1 200")
            kept.append(s)
        status, _, metrics = server.request("GET", "/metrics")
        assert int(float(re.search(r"^tfm_open_connections (\S+)$", metrics, re.M).group(1))) >= 1000

        latencies = []
        with Attackers(server) as attack:
            deadline = time.monotonic() + ATTACK_SECONDS
            while time.monotonic() < deadline:
                line, seconds = timed_health(server.port)
                assert line == "HTTP/1.1 200 OK", line
                latencies.append(seconds)
                time.sleep(0.25)
        assert not attack.failures, attack.failures[:5]
        assert attack.counts.get("stream left", 0) >= 3 and attack.counts.get("bad request", 0) >= 20, attack.counts
        assert attack.counts["slow clients closed by the server"] == 100, attack.counts
        assert max(latencies) < 1, f"/health took {max(latencies):.2f} s under attack"

        for s in kept[::100]:  # the keep-alive connections are still served
            s.sendall(request_bytes())
            assert read_response(s).startswith("HTTP/1.1 200")
        assert server.request("POST", "/v1/translate", {"sentences": ["ein hund ."]})[0] == 200
    except BaseException:
        server.proc.kill()
        raise
    started = time.monotonic()
    assert server.stop(timeout=40) == 0, "".join(server.lines)
    stopping = time.monotonic() - started
    assert stopping < 5, "the drain waited for connections that were not being answered"
    for s in kept:
        s.close()
    print(f"/health under attack: {len(latencies)} requests, at most {max(latencies) * 1000:.1f} ms; {attack.counts}; "
          f"stopped in {stopping:.2f} s")
