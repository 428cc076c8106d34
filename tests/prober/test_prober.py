"""Tests of prober.py against the fake vLLM (tests/fake_vllm) and a stub that answers 503.

Each test runs the prober as its own process, stops it with its --stop-file, and asserts the
counts of its JSON summary, never how fast anything was.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PROBER = os.path.join(HERE, "prober.py")
FAKE_VLLM = os.path.join(HERE, "..", "fake_vllm", "fake_vllm.py")
sys.path.insert(0, os.path.join(HERE, "..", "fake_vllm"))
import make_model  # noqa: E402
sys.path.insert(0, HERE)
import prober  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serves(port):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/health")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def wait_for(predicate, seconds=30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class ProberFixture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="prober-test-")
        self.model = make_model.make_model(os.path.join(self.tmp, "model"))
        self.port = free_port()
        self.servers = []
        self.prober = None

    def tearDown(self):
        for p in self.servers:
            if p.poll() is None:
                p.kill()
            p.wait()
        if self.prober and self.prober.poll() is None:
            self.prober.kill()
            self.prober.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_server(self, name="a", tokens_per_second=0):
        p = subprocess.Popen([sys.executable, FAKE_VLLM, "serve", self.model, "--host",
                              "127.0.0.1", "--port", str(self.port), "--served-model-name", name,
                              "--tokens-per-second", str(tokens_per_second)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.servers.append(p)
        self.assertTrue(wait_for(lambda: serves(self.port)), "the fake vLLM did not serve")
        return p

    def start_prober(self, *args, port=None):
        self.stop_file = os.path.join(self.tmp, "stop")
        ready = os.path.join(self.tmp, "ready")
        self.out = os.path.join(self.tmp, "summary.json")
        self.prober = subprocess.Popen(
            [sys.executable, PROBER, "--url", "http://127.0.0.1:%d" % (port or self.port),
             "--stop-file", self.stop_file, "--max-duration", "60", "--timeout", "20",
             "--ready-file", ready, "--out", self.out] + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Whatever the machine's load, the prober has seen the server before the test goes on.
        self.assertTrue(wait_for(lambda: os.path.exists(ready) or self.prober.poll() is not None),
                        "the prober saw no response")
        self.assertIsNone(self.prober.poll(), "the prober ended early")

    def stop_prober(self):
        open(self.stop_file, "w").close()
        _, err = self.prober.communicate(timeout=60)
        self.assertEqual(self.prober.returncode, 0, err)
        self.assertIn(b"prober: ", err)
        with open(self.out) as f:
            return json.load(f)

    def ok_count(self, s):
        return s["counts"]["ok"]


class AgainstTheFakeVllm(ProberFixture):
    def test_a_server_that_stays_up_gives_no_failure_and_every_stream_completes(self):
        self.start_server(tokens_per_second=200)
        self.start_prober("--path", "/v1/models", "--completions", "--body-bytes", "20000",
                          "--streams", "2", "--stream-tokens", "20")
        time.sleep(1.5)
        s = self.stop_prober()
        self.assertEqual(s["counts"]["refused"], 0, s["first_error"])
        self.assertEqual(s["failed"], 0, s["first_error"])
        self.assertIsNone(s["first_error"])
        self.assertGreater(s["by_kind"]["get"]["ok"], 0)
        self.assertGreater(s["by_kind"]["completion"]["ok"], 0)
        self.assertGreater(s["streams_started"], 0)
        self.assertEqual(s["streams_completed"], s["streams_started"])
        self.assertEqual(s["streams_failed"], 0)
        self.assertEqual(set(s["models"]), {"a"})
        self.assertEqual(s["models"]["a"], s["counts"]["ok"])
        self.assertEqual(s["unfinished"], 0)
        self.assertEqual(s["latency_ms"]["n"], s["counts"]["ok"] - s["streams_completed"])
        self.assertEqual(sum(sum(b) for b in s["timeline"]["buckets"]), s["total"])

    def test_a_server_stopped_and_started_again_shows_refusals_and_the_gap(self):
        self.start_server("a")
        self.start_prober("--path", "/v1/models", "--completions")
        time.sleep(0.5)
        first = self.servers[0]
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=10)
        time.sleep(1.0)
        self.start_server("b")
        time.sleep(0.5)
        s = self.stop_prober()
        self.assertGreater(s["counts"]["refused"], 0)
        self.assertGreater(s["counts"]["ok"], 0)
        self.assertEqual(set(s["models"]), {"a", "b"}, "both servers answered")
        # A request in flight when the server exits is reset; the ones after it are refused.
        self.assertRegex(s["first_error"], r"^(refused|reset) ")
        # The timeline: ok, then a run of buckets with refusals and nothing ok, then ok again.
        b = s["timeline"]["buckets"]
        first_refused = next(i for i, (_, r, _) in enumerate(b) if r)
        last_refused = max(i for i, (_, r, _) in enumerate(b) if r)
        self.assertTrue(any(ok for ok, _, _ in b[:first_refused]), b)
        self.assertTrue(any(ok for ok, _, _ in b[last_refused + 1:]), b)
        dark = [i for i, (ok, r, _) in enumerate(b) if r and not ok]
        self.assertGreaterEqual(len(dark), 3, "a 1 s gap spans several 100 ms buckets: %s" % b)
        self.assertEqual(s["counts"]["refused"], sum(r for _, r, _ in b))

    def test_a_stream_cut_by_a_killed_server_is_incomplete(self):
        server = self.start_server(tokens_per_second=10)
        self.start_prober("--interval-ms", "50", "--streams", "1", "--stream-tokens", "200")
        time.sleep(1.0)  # the stream is a few tokens in; it would take 20 s to finish
        server.kill()
        server.wait(timeout=10)
        time.sleep(0.3)
        s = self.stop_prober()
        stream = s["by_kind"]["stream"]
        self.assertEqual(stream["stream_incomplete"], 1, s)
        self.assertEqual(s["streams_completed"], 0)
        self.assertEqual(s["streams_failed"], s["streams_started"])
        self.assertGreater(s["by_kind"]["get"]["ok"], 0)


class Stub503(BaseHTTPRequestHandler):
    """Answers 503 to every request, every other one with Retry-After: 2; the first one after
    waiting 1.2 s with a 200 when the server's `hold_first` is set."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with self.server.lock:
            self.server.n += 1
            n = self.server.n
        if n == 1 and self.server.hold_first:
            time.sleep(1.2)
            body = b'{"object": "list", "data": [{"id": "held"}]}'
            self.send_response(200)
        else:
            body = b'{"error": "no backend"}'
            self.send_response(503)
            if n % 2:
                self.send_header("Retry-After", "2")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class AgainstAStub(ProberFixture):
    def start_stub(self, hold_first=False):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Stub503)
        server.daemon_threads = True
        server.lock = threading.Lock()
        server.n = 0
        server.hold_first = hold_first
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return server.server_address[1]

    def test_a_503_is_classified_with_or_without_retry_after(self):
        port = self.start_stub()
        self.start_prober("--interval-ms", "20", port=port)
        time.sleep(0.5)
        s = self.stop_prober()
        self.assertGreaterEqual(s["counts"]["http_503"], 2)
        self.assertEqual(s["counts"]["http_503"], s["total"])
        self.assertEqual(s["counts"]["refused"], 0)
        ra = s["http_503_retry_after"]
        self.assertGreater(ra["with"], 0)
        self.assertGreater(ra["without"], 0)
        self.assertEqual(ra["with"] + ra["without"], s["counts"]["http_503"])
        self.assertTrue(s["first_error"].startswith("http_503"), s["first_error"])

    def test_a_held_request_does_not_stop_the_schedule_and_is_counted_held(self):
        port = self.start_stub(hold_first=True)
        self.start_prober("--interval-ms", "20", port=port)
        time.sleep(0.5)
        s = self.stop_prober()
        self.assertEqual(s["held"]["n"], 1)
        self.assertEqual(s["models"], {"held": 1})
        # Requests were sent while the first one was held: its answer came after the others'.
        self.assertGreater(s["counts"]["http_503"], 0)


class ReadStream(unittest.TestCase):
    """How a stream is judged, on server-sent events as real engines write them (issue 38: a real
    llama-server ended 39 streams with fewer text chunks than tokens, which the prober had
    counted incomplete)."""

    class Body:
        def __init__(self, events):
            self.data = b"".join(b"data: " + e.encode() + b"\n\n" for e in events)

        def read1(self, n):
            chunk, self.data = self.data[:n], self.data[n:]
            return chunk

    def judge(self, events, want=8):
        res = prober.Result(0.0, "stream")
        prober.read_stream(res, self.Body(events), want, time.monotonic() + 10)
        return res

    @staticmethod
    def chunk(text, finish=None, **extra):
        obj = {"model": "m", "choices": [{"text": text, "finish_reason": finish}]}
        obj.update(extra)
        return json.dumps(obj)

    def test_control_tokens_print_nothing_and_the_engines_count_decides(self):
        # llama.cpp: 8 tokens, 2 of them control tokens (empty chunks), the last chunk with
        # finish_reason, usage and timings.
        events = [self.chunk("a")] * 5 + [self.chunk("")] * 2 + [
            self.chunk("b", "length", usage={"completion_tokens": 8},
                       timings={"predicted_n": 8}), "[DONE]"]
        self.assertEqual(self.judge(events).cls, "ok")

    def test_an_eos_before_max_tokens_is_a_stream_the_engine_ended(self):
        events = [self.chunk("a"), self.chunk("b", "stop", usage={"completion_tokens": 2}),
                  "[DONE]"]
        self.assertEqual(self.judge(events).cls, "ok")

    def test_without_finish_reason_every_token_asked_for_is_needed(self):
        self.assertEqual(self.judge([self.chunk("a")] * 8 + ["[DONE]"]).cls, "ok")
        short = self.judge([self.chunk("a")] * 5 + ["[DONE]"])
        self.assertEqual(short.cls, "stream_incomplete")
        self.assertIn("after 5 of 8 tokens", short.detail)

    def test_a_stream_cut_before_done_or_ended_otherwise_is_incomplete(self):
        cut = self.judge([self.chunk("a", "length", usage={"completion_tokens": 8})])
        self.assertEqual(cut.cls, "stream_incomplete")
        self.assertIn("without [DONE]", cut.detail)
        aborted = self.judge([self.chunk("a", "abort"), "[DONE]"])
        self.assertEqual(aborted.cls, "stream_incomplete")
        self.assertIn("finish_reason abort", aborted.detail)

    def test_hostile_events_are_skipped_not_thrown(self):
        events = ["[1, 2]", '{"choices": [7, null]}', '{"usage": {"completion_tokens": true}}',
                  '{"timings": "x"}', self.chunk("a", "length"), "[DONE]"]
        self.assertEqual(self.judge(events).cls, "ok")


if __name__ == "__main__":
    unittest.main()
