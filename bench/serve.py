#!/usr/bin/python3
"""`tfm serve` under load on loopback (`bench/run.sh --serve`): clients sending single
sentences of Multi30k val to POST /v1/translate, each on its own keep-alive connection,
at 1, 8 and 64 at once: throughput and p50/p99 latency, against offline `tfm translate`
of the same sentences (same beam, same threads). Then the resident memory of the server
over many requests, Python calling tfm.Translator from 8 threads on the same sentences,
and, with --lm, what a client reading a stream at 1 byte/s does to the others' p99.
Rewrites the "Measured under load" section of docs/SERVING.md."""
import argparse
import datetime
import gzip
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

from compare import ROOT, TFM, cpu_model, publish


class Server:
    """`tfm serve` on a free port of 127.0.0.1."""

    def __init__(self, threads, *models):
        args = [TFM, "--threads", str(threads), "serve", "--port", "0", "--max-queue", "4096", "--max-connections", "512"]
        for m in models:
            args += ["--model", m]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        for line in self.proc.stderr:
            if m := re.search(r"listening on http://[^:]+:(\d+)", line):
                self.port = int(m.group(1))
                break
        else:
            raise SystemExit("tfm serve did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def load(port, sentences, clients, requests, path="/v1/translate", body=lambda s: {"sentences": [s], "beam": 4}):
    """`requests` requests from `clients` threads, each its own connection: (seconds, latencies, failures)."""
    latencies, failures, next_index, lock = [], [0], [0], threading.Lock()

    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= requests:
                break
            started = time.perf_counter()
            try:
                c.request("POST", path, json.dumps(body(sentences[i % len(sentences)])), {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                latencies.append(time.perf_counter() - started)
                failures[0] += not ok
        c.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, latencies, failures[0]


def offline(a, sentences):
    """Seconds of `tfm translate` on the sentences (the process's whole run, loading included)."""
    started = time.perf_counter()
    subprocess.run([TFM, "--threads", str(a.threads), "translate", "--model", a.model, "--beam", "4"], input="\n".join(sentences) + "\n",
                   capture_output=True, text=True, check=True)
    return time.perf_counter() - started


def python_threads(a, sentences, threads=8):
    """Python calling tfm.Translator from `threads` threads, one sentence a call: (seconds, latencies)."""
    code = f"""
import json, sys, threading, time
sys.path.insert(0, {os.path.join(ROOT, 'build', 'python')!r})
import tfm
sentences = json.load(sys.stdin)
translator = tfm.Translator({a.model!r}, threads={a.threads})
latencies, lock, index = [], threading.Lock(), [0]
def work():
    while True:
        with lock:
            i = index[0]; index[0] += 1
        if i >= len(sentences): return
        t = time.perf_counter(); translator.translate([sentences[i]], beam=4)
        with lock: latencies.append(time.perf_counter() - t)
start = time.perf_counter()
ts = [threading.Thread(target=work) for _ in range({threads})]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps([time.perf_counter() - start, latencies]))
"""
    out = subprocess.run(["/usr/bin/python3", "-c", code], input=json.dumps(sentences), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def slow_reader(port, stop):
    """A client that asks for a long stream and reads it one byte a second."""
    s = socket.create_connection(("127.0.0.1", port))
    body = json.dumps({"prompt": "ROMEO:", "max_new_tokens": 1000, "stream": True})
    s.sendall(f"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
    while not stop.is_set() and s.recv(1):
        stop.wait(1)
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="trained translation checkpoint")
    ap.add_argument("--data", required=True, help="Multi30k directory (val.de.gz)")
    ap.add_argument("--lm", help="a language model checkpoint, for the slow-client run")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--memory-requests", type=int, default=100000)
    ap.add_argument("--no-doc", action="store_true")
    a = ap.parse_args()
    with gzip.open(os.path.join(a.data, "val.de.gz"), "rt", encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    rows = []
    seconds = offline(a, sentences)
    offline_rate = len(sentences) / seconds
    rows.append(f"| offline `tfm translate` | | {offline_rate:.1f} | | | |")
    server = Server(a.threads, a.model)
    try:
        load(server.port, sentences, 8, 64)  # warm up
        for clients in (1, 8, 64):
            wall, lat, failed = load(server.port, sentences, clients, len(sentences))
            rows.append(f"| `tfm serve`, {clients} client{'s' if clients > 1 else ''} | {len(lat)} | {len(lat) / wall:.1f} "
                        f"({len(lat) / wall / offline_rate:.0%}) | {percentile(lat, 50) * 1000:.0f} | {percentile(lat, 99) * 1000:.0f} | {failed} |")
            print(rows[-1], flush=True)
        memory, done, failed_total = [server.rss_mib()], 0, 0
        while done < a.memory_requests:
            n = min(10000, a.memory_requests - done)
            failed_total += load(server.port, sentences, 64, n)[2]
            done += n
            memory.append(server.rss_mib())
            print(f"  {done} requests: resident {memory[-1]:.0f} MiB", flush=True)
    finally:
        server.stop()
    wall, lat = python_threads(a, sentences)
    rows.append(f"| Python, `tfm.Translator` from 8 threads | {len(lat)} | {len(lat) / wall:.1f} ({len(lat) / wall / offline_rate:.0%}) | "
                f"{percentile(lat, 50) * 1000:.0f} | {percentile(lat, 99) * 1000:.0f} | 0 |")
    slow = ""
    if a.lm:
        server = Server(a.threads, a.lm)
        try:
            body = lambda s: {"prompt": s[:20], "max_new_tokens": 20, "temperature": 0}
            load(server.port, sentences, 8, 64, "/v1/generate", body)
            p99 = []
            for with_slow in (False, True, False, True):
                stop = threading.Event()
                if with_slow:
                    threading.Thread(target=slow_reader, args=(server.port, stop), daemon=True).start()
                    time.sleep(1)
                p99.append(percentile(load(server.port, sentences, 8, 400, "/v1/generate", body)[1], 99))
                stop.set()
            alone, beside = statistics.mean(p99[0::2]), statistics.mean(p99[1::2])
            slow = (f"\n\nA client reading a generation stream at 1 byte/s beside 8 clients generating 20 tokens each: their p99 "
                    f"{alone * 1000:.0f} ms without it, {beside * 1000:.0f} ms with it ({beside / alone - 1:+.0%}; means of two runs each).")
        finally:
            server.stop()
    table = (f"Measured {datetime.date.today()} on {cpu_model()}, {os.cpu_count()} cores, {a.threads} threads; {len(sentences)} "
             f"sentences of Multi30k val, one per request, beam 4, each client on its own keep-alive connection; throughput in "
             f"sentences per second (and as a share of offline `tfm translate`, which also loads the model).\n\n"
             "| run | requests | sentences/s | p50 ms | p99 ms | failed |\n|---|---|---|---|---|---|\n" + "\n".join(rows) +
             f"\n\nResident memory over {a.memory_requests:,} requests at 64 clients, every 10,000: " +
             ", ".join(f"{m:.0f}" for m in memory) + f" MiB ({failed_total} failed)." + slow)
    publish(table, a.no_doc, "<!-- serve: bench/run.sh --serve writes this section -->", "<!-- end of serve results -->",
            os.path.join(ROOT, "docs", "SERVING.md"))


if __name__ == "__main__":
    sys.exit(main())
