#!/usr/bin/python3
"""client.py HOST PORT MODEL CONCURRENCY SECONDS MAX_TOKENS - what an operator might write with
the Python standard library: a thread per stream, http.client, streamed /v1/completions read line
by line, json.loads per event, tokens counted from content deltas. Prints {"output_tokens": N,
"requests": R, "seconds": S} as JSON."""

import http.client
import json
import sys
import threading
import time


def stream(host, port, model, max_tokens, deadline, totals, lock):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    body = json.dumps({"model": model, "prompt": "hello " * 128, "max_tokens": max_tokens,
                       "stream": True, "ignore_eos": True})
    tokens = requests = 0
    while time.monotonic() < deadline:
        conn.request("POST", "/v1/completions", body=body,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        done = False
        while True:
            line = r.readline()
            if not line:
                break
            if time.monotonic() >= deadline:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                done = True
                continue
            event = json.loads(data)
            for c in event.get("choices", []):
                if c.get("text"):
                    tokens += 1
        if not done:
            conn.close()
            break
        requests += 1
    with lock:
        totals[0] += tokens
        totals[1] += requests


def main():
    host, port, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    concurrency, seconds, max_tokens = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    totals, lock = [0, 0], threading.Lock()
    t0 = time.monotonic()
    deadline = t0 + seconds
    threads = [threading.Thread(target=stream, args=(host, port, model, max_tokens, deadline,
                                                     totals, lock)) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"output_tokens": totals[0], "requests": totals[1],
                      "seconds": time.monotonic() - t0}))


if __name__ == "__main__":
    main()
