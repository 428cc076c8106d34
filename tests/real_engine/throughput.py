#!/usr/bin/python3
"""throughput.py - output tokens per second of an OpenAI-compatible server, measured without berth.

  throughput.py URL MODEL --concurrency N --requests N --max-tokens N [--prompt TEXT]

N threads send non-streamed POST URL/v1/completions (ignore_eos, so every request makes
max_tokens tokens) until `requests` are done; prints one JSON line: completion tokens (the
server's usage counts), wall seconds, tokens per second, errors. The independent check of what
berth tune measured (tests/e2e/real_tune_test.cc). Standard library only; every request bounded.
"""
import argparse
import json
import threading
import time
import urllib.request


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog. " * 4)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    left = [a.requests]
    tokens = [0]
    errors = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            body = json.dumps({"model": a.model, "prompt": a.prompt, "max_tokens": a.max_tokens,
                               "ignore_eos": True, "temperature": 0}).encode()
            req = urllib.request.Request(a.url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=a.timeout) as r:
                    n = json.loads(r.read())["usage"]["completion_tokens"]
                with lock:
                    tokens[0] += n
            except Exception:  # noqa: BLE001 - counted, the caller judges
                with lock:
                    errors[0] += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    print(json.dumps({"tokens": tokens[0], "seconds": wall, "output_tps": tokens[0] / wall,
                      "errors": errors[0]}))


if __name__ == "__main__":
    main()
