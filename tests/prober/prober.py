#!/usr/bin/python3
"""prober.py - what an operator's client sees of a port while berth switches what serves it.

Python 3 standard library only; loopback traffic only in berth's tests and benchmarks.

  prober.py [--url http://127.0.0.1:8000] [--interval-ms 10] [--path /v1/models] [--completions]
            [--model NAME] [--body-bytes N] [--max-tokens N] [--streams K] [--stream-tokens T]
            [--duration S] [--stop-file PATH] [--ready-file PATH] [--timeout S]
            [--max-inflight N] [--out FILE]

Every --interval-ms a new request starts, each on a NEW TCP connection (so a closed port shows
as a refusal, not as a stale keep-alive), each in its own thread (a held or slow request does not
stop the schedule; at most --max-inflight at once, a tick past that is counted as skipped). With
--path and --completions both, the ticks alternate between GET PATH and POST /v1/completions
(without either: GET /v1/models). A completion names --model when given; without it the body has
no "model" and the server answers with the one it serves (vLLM and the fake allow that), so a
switch from model a to model b is seen as replies naming b instead of a. --body-bytes pads the
prompt so the request body is about that many bytes (a client caught mid-upload by a switch).

--streams K: K more threads, each holding a streamed completion ("stream": true, max_tokens
--stream-tokens) open, back to back for the whole run. A stream is completed when `data: [DONE]`
came after the engine said it ended the stream itself (a `finish_reason` of "length" or "stop"),
or, from a server that says no finish_reason, after every token it asked for. Tokens are what the
engine reports (`usage.completion_tokens`, llama.cpp's `timings.predicted_n`), not the chunks: a
control token streams as a chunk with no text, and an EOS ends a stream short of max_tokens. A
failed attempt is retried after one interval.

Every request (streams included) is classified:
  ok                 2xx; for a completion a JSON body with "choices"; for a stream: completed
  refused            the connection was refused (nothing listens)
  reset              the connection was reset or closed before a response
  http_503           503 (the summary counts those with and without Retry-After)
  http_other         any other status, or a 2xx whose body is not what was asked for
  timeout            no answer within --timeout seconds
  stream_incomplete  a stream that started (200) and ended before [DONE] or short of tokens

The run ends after --duration seconds, on SIGTERM/SIGINT, or when --stop-file exists (at most
--max-duration, default 3600 s, whatever is given). --ready-file PATH is created when the first
HTTP response (any status) arrives: a caller waits for it before it starts what it measures. Requests in flight are then waited for up to
--timeout seconds (streams finish the one they hold and start no other). The summary (JSON, to
--out or stdout) has: counts per class (all requests, and per kind get/completion/stream), total,
streams_started/completed/failed, latency p50/p90/p99/max in ms over ok requests (streams apart:
their duration is the stream's length), the ok requests answered after waiting more than 1 s
(held), which model answered (completion replies' "model", /v1/models' ids) with counts, the
first error, and a timeline of ok/refused/failed per 100 ms bucket (by the time a request was
sent). One line goes to stderr. The exit status is 0 once the summary is written: the caller
judges the counts.
"""

import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse

CLASSES = ("ok", "refused", "reset", "http_503", "http_other", "timeout", "stream_incomplete")
HELD_MS = 1000.0  # an ok request that waited longer than this was held (by a front)


class Result:
    """One request's outcome."""

    __slots__ = ("sent", "kind", "cls", "ms", "model", "detail", "retry_after")

    def __init__(self, sent, kind):
        self.sent = sent  # seconds since the run started, when the connection was opened
        self.kind = kind  # "get", "completion" or "stream"
        self.cls = None
        self.ms = 0.0
        self.model = None  # the model that answered, when known
        self.detail = ""
        self.retry_after = False


class Target:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError("--url must be http://HOST[:PORT][/PREFIX], got %r" % url)
        self.host = u.hostname
        self.port = u.port or 80
        self.prefix = u.path.rstrip("/")


def completion_body(args, stream):
    body = {"prompt": "Say something.", "max_tokens": args.stream_tokens if stream
            else args.max_tokens}
    if args.model:
        body["model"] = args.model
    if stream:
        body["stream"] = True
    data = json.dumps(body).encode()
    if args.body_bytes > len(data):
        body["prompt"] += " " + "x" * (args.body_bytes - len(data) - 1)
        data = json.dumps(body).encode()
    return data


def classify_error(res, e):
    if isinstance(e, ConnectionRefusedError):
        res.cls = "refused"
    elif isinstance(e, (socket.timeout, TimeoutError)):
        res.cls = "timeout"
    elif isinstance(e, (ConnectionError, http.client.RemoteDisconnected, BrokenPipeError,
                        http.client.IncompleteRead, http.client.BadStatusLine)):
        res.cls = "reset"
    else:
        res.cls = "reset"  # any other socket or protocol error: no usable response
    res.detail = "%s: %s" % (type(e).__name__, e)


def read_stream(res, r, want_tokens, deadline):
    """Reads server-sent events until [DONE] or the end; classifies the stream."""
    buf = b""
    tokens = 0       # chunks with text
    reported = None  # the engine's own count of the tokens it generated
    finish = None    # the engine's finish_reason
    done = False
    while not done:
        if time.monotonic() > deadline:
            res.cls, res.detail = "timeout", "stream open past --timeout (%d tokens)" % tokens
            return
        try:
            chunk = r.read1(65536)
        except (socket.timeout, TimeoutError) as e:
            res.cls, res.detail = "timeout", "stream: %s after %d tokens" % (e, tokens)
            return
        except (OSError, http.client.HTTPException) as e:
            res.cls = "stream_incomplete"
            res.detail = "stream cut after %d of %d tokens: %s: %s" % (
                tokens, want_tokens, type(e).__name__, e)
            return
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            line = event.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            try:
                obj = json.loads(payload)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            res.model = obj.get("model", res.model)
            for choice in obj.get("choices") or []:
                if not isinstance(choice, dict):
                    continue
                if choice.get("text") or (choice.get("delta") or {}).get("content"):
                    tokens += 1
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
            timings = obj.get("timings") if isinstance(obj.get("timings"), dict) else {}
            for n in (usage.get("completion_tokens"), timings.get("predicted_n")):
                if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                    reported = n
    count = reported if reported is not None else tokens
    ended = finish in ("length", "stop") if finish is not None else count == want_tokens
    if done and ended:
        res.cls = "ok"
    else:
        res.cls = "stream_incomplete"
        res.detail = "stream ended after %d of %d tokens%s%s" % (
            count, want_tokens, " (finish_reason %s)" % finish if finish else "",
            "" if done else " without [DONE]")


def one_request(target, args, res, t0, on_response=None):
    """Runs one request on a new connection and fills `res`."""
    if res.kind == "get":
        method, path, body = "GET", target.prefix + args.path, None
    else:
        method, path = "POST", target.prefix + "/v1/completions"
        body = completion_body(args, res.kind == "stream")
    start = time.monotonic()
    res.sent = start - t0
    deadline = start + args.timeout
    conn = http.client.HTTPConnection(target.host, target.port, timeout=args.timeout)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        if on_response:
            on_response()
        if res.kind == "stream" and r.status == 200:
            read_stream(res, r, args.stream_tokens, deadline)
            return
        data = r.read()
        if r.status == 503:
            res.cls = "http_503"
            res.retry_after = r.getheader("Retry-After") is not None
            res.detail = "503%s: %s" % (" (Retry-After: %s)" % r.getheader("Retry-After")
                                        if res.retry_after else "", data[:200].decode(
                                            "utf-8", "replace"))
            return
        if not 200 <= r.status < 300:
            res.cls = "http_other"
            res.detail = "%d: %s" % (r.status, data[:200].decode("utf-8", "replace"))
            return
        res.cls = "ok"
        try:
            obj = json.loads(data)
        except ValueError:
            obj = None
        if res.kind == "completion":
            if not isinstance(obj, dict) or not obj.get("choices"):
                res.cls, res.detail = "http_other", "%d without choices: %s" % (
                    r.status, data[:200].decode("utf-8", "replace"))
            else:
                res.model = obj.get("model")
        elif isinstance(obj, dict) and isinstance(obj.get("data"), list):
            ids = [m.get("id") for m in obj["data"] if isinstance(m, dict)]
            res.model = ",".join(str(i) for i in ids) if ids else None
    except Exception as e:  # noqa: BLE001 - every failure is a class, never a crash
        classify_error(res, e)
    finally:
        conn.close()
        res.ms = (time.monotonic() - start) * 1000.0


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return round(sorted_values[k], 2)


def latency_stats(values):
    v = sorted(values)
    return {"n": len(v), "p50": percentile(v, 50), "p90": percentile(v, 90),
            "p99": percentile(v, 99), "max": round(v[-1], 2) if v else None}


def summarize(results, args, meta):
    counts = {c: 0 for c in CLASSES}
    by_kind = {}
    models = {}
    first_error = None
    ok_ms, stream_ms, held_ms = [], [], []
    timeline = {}
    retry_after = {"with": 0, "without": 0}
    bucket_s = args.bucket_ms / 1000.0
    for r in sorted(results, key=lambda r: r.sent):
        counts[r.cls] += 1
        by_kind.setdefault(r.kind, {c: 0 for c in CLASSES})[r.cls] += 1
        b = timeline.setdefault(int(r.sent / bucket_s), [0, 0, 0])
        if r.cls == "ok":
            b[0] += 1
            (stream_ms if r.kind == "stream" else ok_ms).append(r.ms)
            if r.kind != "stream" and r.ms > HELD_MS:
                held_ms.append(r.ms)
            if r.model:
                models[r.model] = models.get(r.model, 0) + 1
        else:
            b[1 if r.cls == "refused" else 2] += 1
            if first_error is None:
                first_error = "%s at %.3f s (%s): %s" % (r.cls, r.sent, r.kind, r.detail)
            if r.cls == "http_503":
                retry_after["with" if r.retry_after else "without"] += 1
    streams = [r for r in results if r.kind == "stream"]
    last = max(timeline) if timeline else -1
    summary = {
        "url": args.url,
        "interval_ms": args.interval_ms,
        "duration_s": round(meta["duration"], 3),
        "total": len(results),
        "counts": counts,
        "failed": len(results) - counts["ok"],
        "by_kind": by_kind,
        "http_503_retry_after": retry_after,
        "streams_started": len(streams),
        "streams_completed": sum(1 for r in streams if r.cls == "ok"),
        "streams_failed": sum(1 for r in streams if r.cls != "ok"),
        "latency_ms": latency_stats(ok_ms),
        "stream_ms": latency_stats(stream_ms),
        "held": latency_stats(held_ms),
        "models": models,
        "first_error": first_error,
        "skipped_at_bound": meta["skipped"],
        "late_ticks": meta["late"],
        "unfinished": meta["unfinished"],
        "timeline": {"bucket_ms": args.bucket_ms, "columns": ["ok", "refused", "failed"],
                     "buckets": [timeline.get(i, [0, 0, 0]) for i in range(last + 1)]},
    }
    return summary


def human_line(s):
    lat = s["latency_ms"]
    return ("prober: %d requests in %.1f s: ok %d, refused %d, failed %d (reset %d, 503 %d, "
            "other %d, timeout %d, stream_incomplete %d); streams %d/%d completed; "
            "p50 %s ms p99 %s ms max %s ms; held %d; models %s" % (
                s["total"], s["duration_s"], s["counts"]["ok"], s["counts"]["refused"],
                s["failed"] - s["counts"]["refused"], s["counts"]["reset"],
                s["counts"]["http_503"], s["counts"]["http_other"], s["counts"]["timeout"],
                s["counts"]["stream_incomplete"], s["streams_completed"], s["streams_started"],
                lat["p50"], lat["p99"], lat["max"], s["held"]["n"],
                json.dumps(s["models"], sort_keys=True)))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--path", default=None, help="GET this path every tick (default /v1/models)")
    p.add_argument("--completions", action="store_true", help="POST /v1/completions")
    p.add_argument("--model", default=None)
    p.add_argument("--body-bytes", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--streams", type=int, default=0)
    p.add_argument("--stream-tokens", type=int, default=64)
    p.add_argument("--duration", type=float, default=0.0, help="seconds; 0: until told to stop")
    p.add_argument("--max-duration", type=float, default=3600.0)
    p.add_argument("--stop-file", default=None)
    p.add_argument("--ready-file", default=None)
    p.add_argument("--timeout", type=float, default=700.0)
    p.add_argument("--max-inflight", type=int, default=2000)
    p.add_argument("--bucket-ms", type=float, default=100.0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.path is None and not args.completions:
        args.path = "/v1/models"
    if args.interval_ms <= 0 or args.max_inflight < 1 or args.timeout <= 0:
        p.error("--interval-ms, --max-inflight and --timeout must be positive")
    return args


def run(args):
    target = Target(args.url)
    threading.stack_size(256 * 1024)  # hundreds of held requests: small stacks
    stop = threading.Event()
    # The handler only appends: Event.set() in a handler deadlocks when the signal lands while
    # this thread holds the same Event's lock (in stop.wait), and the run never ends.
    signalled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: signalled.append(True))
    results = []
    lock = threading.Lock()
    inflight = threading.BoundedSemaphore(args.max_inflight)
    threads = []
    t0 = time.monotonic()
    ready = threading.Event()

    def on_response():
        if not ready.is_set() and args.ready_file:
            with lock:
                if not ready.is_set():
                    open(args.ready_file, "w").close()
                    ready.set()

    def request(kind):
        res = Result(time.monotonic() - t0, kind)
        try:
            one_request(target, args, res, t0, on_response)
        finally:
            with lock:
                results.append(res)
        return res

    def tick(kind):
        try:
            request(kind)
        finally:
            inflight.release()

    def streamer():
        while not stop.is_set():
            if request("stream").cls != "ok":
                stop.wait(args.interval_ms / 1000.0)

    for _ in range(args.streams):
        t = threading.Thread(target=streamer, daemon=True)
        t.start()
        threads.append(t)

    kinds = (["get"] if args.path else []) + (["completion"] if args.completions else [])
    limit = min(args.duration or args.max_duration, args.max_duration)
    interval = args.interval_ms / 1000.0
    skipped = late = 0
    i = 0
    next_at = t0
    while not stop.is_set() and not signalled:
        now = time.monotonic()
        if now - t0 >= limit or (args.stop_file and os.path.exists(args.stop_file)):
            break
        if next_at > now:
            time.sleep(min(next_at - now, 0.1))
            continue
        if inflight.acquire(blocking=False):
            t = threading.Thread(target=tick, args=(kinds[i % len(kinds)],), daemon=True)
            t.start()
            threads.append(t)
        else:
            skipped += 1
        i += 1
        next_at += interval
        if now - next_at > interval:  # behind by more than a tick: drop the missed ticks
            missed = int((now - next_at) / interval)
            late += missed
            next_at += missed * interval
        if len(threads) > 4096:
            threads = [t for t in threads if t.is_alive()]
    duration = time.monotonic() - t0
    stop.set()
    wait_until = time.monotonic() + args.timeout + 5
    for t in threads:
        t.join(max(0.0, wait_until - time.monotonic()))
    unfinished = sum(1 for t in threads if t.is_alive())
    with lock:
        done = list(results)
    return summarize(done, args, {"duration": duration, "skipped": skipped, "late": late,
                                  "unfinished": unfinished})


def main(argv):
    args = parse_args(argv)
    summary = run(args)
    text = json.dumps(summary, indent=1, sort_keys=True) + "\n"
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    else:
        sys.stdout.write(text)
    sys.stderr.write(human_line(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
