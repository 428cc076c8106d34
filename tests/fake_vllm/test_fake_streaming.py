"""Tests of fake_vllm.py's streamed completions, their pacing (fake_stream.py) and failures."""

import http.client
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_stream  # noqa: E402
from test_fake_vllm import FakeVllmFixture, request  # noqa: E402


class FakeClock:
    """A clock that moves only when slept on; remembers every sleep."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def stream(port, path, body):
    """Posts `body` with stream true; returns (status, content type, the data: payloads)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(dict(body, stream=True)),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode("utf-8")
        events = [block[len("data: "):] for block in text.split("\n\n") if block]
        return r.status, r.getheader("Content-Type"), r.getheader("Transfer-Encoding"), events
    finally:
        conn.close()


class PacerTest(unittest.TestCase):
    def test_one_stream_follows_an_absolute_schedule(self):
        c = FakeClock()
        pacer = fake_stream.Pacer(rate=10, cap=0, clock=c.clock, sleep=c.sleep)
        s = pacer.stream()
        s.wait_next()
        self.assertAlmostEqual(c.now, 100.1)
        c.now += 0.25  # the writer was late: the next tokens catch up instead of drifting
        s.wait_next()
        s.wait_next()
        self.assertAlmostEqual(c.now, 100.35)
        s.wait_next()
        self.assertAlmostEqual(c.now, 100.4)

    def test_the_aggregate_cap_spaces_every_stream_on_one_schedule(self):
        c = FakeClock()
        pacer = fake_stream.Pacer(rate=0, cap=4, clock=c.clock, sleep=c.sleep)
        slots = [pacer.claim(100.0) for _ in range(8)]
        self.assertEqual(slots, [100.0 + i * 0.25 for i in range(8)])

    def test_per_stream_rate_under_a_cap(self):
        pacer = fake_stream.Pacer(rate=10, cap=15, clock=lambda: 0.0)
        # Two streams wanting 20 tokens/s together get the cap's 15.
        slots = sorted(pacer.claim(i / 10) for i in range(1, 16) for _ in range(2))
        self.assertAlmostEqual(slots[-1] - slots[0], 29 / 15)

    def test_max_tokens_and_prompt_counts(self):
        self.assertEqual(fake_stream.max_tokens({}), 16)
        self.assertEqual(fake_stream.max_tokens({"max_tokens": 5}), 5)
        self.assertEqual(fake_stream.max_tokens({"max_completion_tokens": 7}), 7)
        self.assertEqual(fake_stream.max_tokens({"max_tokens": "9"}), 16)
        self.assertEqual(fake_stream.prompt_tokens({"prompt": "a b c"}, chat=False), 3)
        self.assertEqual(fake_stream.prompt_tokens(
            {"messages": [{"role": "user", "content": "a b"}, "junk"]}, chat=True), 2)


class StreamingTest(FakeVllmFixture):
    def test_streamed_completion_with_usage(self):
        _, port = self.serve(["--tokens-per-second", "1000"])
        status, ctype, encoding, events = stream(port, "/v1/completions", {
            "model": "berth-test", "prompt": "a b", "max_tokens": 5,
            "stream_options": {"include_usage": True}})
        self.assertEqual((status, ctype, encoding), (200, "text/event-stream", "chunked"))
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        texts = [c["choices"][0]["text"] for c in chunks[:-1]]
        self.assertEqual(texts, [" tok0", " tok1", " tok2", " tok3", " tok4"])
        self.assertEqual(chunks[4]["choices"][0]["finish_reason"], "length")
        self.assertIsNone(chunks[0]["choices"][0]["finish_reason"])
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"], {"prompt_tokens": 2, "completion_tokens": 5,
                                               "total_tokens": 7})

    def test_streamed_chat_without_usage(self):
        _, port = self.serve()
        status, _, _, events = stream(port, "/v1/chat/completions", {
            "model": "berth-test", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3})
        self.assertEqual(status, 200)
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual(len(chunks), 3)
        self.assertEqual(chunks[0]["object"], "chat.completion.chunk")
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant",
                                                            "content": " tok0"})
        self.assertEqual(chunks[2]["choices"][0]["delta"], {"content": " tok2"})
        self.assertNotIn("usage", chunks[-1])

    def test_chat_without_stream_answers_a_message(self):
        _, port = self.serve()
        status, body = request(port, "POST", "/v1/chat/completions", {
            "model": "berth-test", "messages": [{"role": "user", "content": "x y z"}]})
        self.assertEqual(status, 200)
        answer = json.loads(body)
        self.assertEqual(answer["object"], "chat.completion")
        self.assertIn("berth-test", answer["choices"][0]["message"]["content"])
        self.assertEqual(answer["usage"]["prompt_tokens"], 3)

    def test_fail_completions_flag(self):
        _, port = self.serve(["--fail-completions"])
        status, body = request(port, "POST", "/v1/completions", {"model": "berth-test"})
        self.assertEqual(status, 500)
        self.assertIn("told to fail", json.loads(body)["message"])
        self.assertEqual(request(port, "GET", "/health")[0], 200)

    def test_fail_completions_while_the_file_exists(self):
        flag = os.path.join(self.tmp, "fail")
        _, port = self.serve(env={"FAKE_VLLM_FAIL_COMPLETIONS_FILE": flag})
        body = {"model": "berth-test", "messages": [{"role": "user", "content": "hi"}]}
        self.assertEqual(request(port, "POST", "/v1/chat/completions", body)[0], 200)
        open(flag, "w").close()
        self.assertEqual(request(port, "POST", "/v1/chat/completions", body)[0], 500)
        os.unlink(flag)
        self.assertEqual(request(port, "POST", "/v1/chat/completions", body)[0], 200)

    def test_rate_flags_must_be_numbers(self):
        p = self.start(["serve", self.model, "--tokens-per-second", "fast"])
        code, err = self.finish(p)
        self.assertEqual(code, 2)
        self.assertIn("tokens_per_second must be a number", err)
        p = self.start(["serve", self.model], {"FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND": "-1"})
        code, err = self.finish(p)
        self.assertEqual(code, 2)
        self.assertIn("0 or a positive number", err)


if __name__ == "__main__":
    unittest.main()
