"""fake_stream.py - how fake_vllm.py paces and words its streamed completions (stdlib only).

Tokens are released on absolute schedules so that a client's measured rates are known in advance:
token i of a stream (i = 1, 2, ...) is due at start + i / per_stream_rate, and, with an aggregate
cap, every token also takes the next free slot of a server-wide schedule spaced 1 / cap apart.
Sleeping until an absolute time does not drift: a late wake-up makes the next token wait less.
"""

import json
import threading
import time


class Pacer:
    """Due times for tokens: per stream `rate` tokens/s (0: no limit), and at most `cap` tokens/s
    over all streams together (0: no cap)."""

    def __init__(self, rate, cap, clock=time.monotonic, sleep=time.sleep):
        self.rate = float(rate or 0)
        self.cap = float(cap or 0)
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._next_slot = 0.0  # the server-wide schedule's next free time

    def stream(self):
        return StreamPacer(self, self.clock())

    def claim(self, wanted):
        """The time token due at `wanted` may go out: `wanted`, or the cap's next free slot."""
        if self.cap <= 0:
            return wanted
        with self._lock:
            # An idle server does not bank slots: the schedule restarts at the first token
            # wanted after it ran dry.
            slot = max(wanted, self._next_slot)
            self._next_slot = slot + 1.0 / self.cap
            return slot


class StreamPacer:
    def __init__(self, pacer, start):
        self.pacer = pacer
        self.start = start
        self.sent = 0

    def wait_next(self):
        """Blocks until the next token is due."""
        self.sent += 1
        if self.pacer.rate > 0:
            wanted = self.start + self.sent / self.pacer.rate
        else:
            wanted = self.pacer.clock()
        due = self.pacer.claim(wanted)
        delay = due - self.pacer.clock()
        if delay > 0:
            self.pacer.sleep(delay)


# The byte 0xff as Python holds undecodable bytes (surrogateescape): sse() and fake_vllm's
# replies write it as the raw byte, which is not UTF-8.
BAD = b"\xff".decode("utf-8", "surrogateescape")


def token_text(i, bad=""):
    """The i-th token's text (0-based): a short word, so clients can count content deltas;
    `bad` (BAD or "") is put in it."""
    return " tok%d%s" % (i, bad)


def prompt_tokens(request, chat):
    """A rough token count of the prompt: its words."""
    if chat:
        messages = request.get("messages") or []
        words = 0
        for m in messages if isinstance(messages, list) else []:
            content = m.get("content") if isinstance(m, dict) else None
            words += len(str(content).split()) if content is not None else 0
        return words
    return len(str(request.get("prompt", "")).split())


def max_tokens(request, default=16, limit=1 << 20):
    """max_tokens (completions) or max_completion_tokens (chat); default 16, like vLLM."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return min(value, limit)
    return default


def wants_usage(request):
    options = request.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def dump_json(obj, raw=False, separators=None):
    """`obj` as JSON bytes: \\u escapes for anything not ASCII, or with `raw` non-ASCII text as
    UTF-8 and BAD as the byte 0xff itself."""
    if not raw:
        return json.dumps(obj, separators=separators).encode("utf-8")
    return json.dumps(obj, separators=separators, ensure_ascii=False).encode(
        "utf-8", "surrogateescape")


def sse(obj, raw=False):
    """One server-sent event: `data: JSON` and a blank line."""
    return b"data: " + dump_json(obj, raw, (",", ":")) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def chunk(ident, model, created, chat, text, finish, first, raw=False):
    """One streamed chunk in the OpenAI shape of /v1/completions or /v1/chat/completions."""
    if chat:
        delta = {"content": text}
        if first:
            delta["role"] = "assistant"
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        kind = "text_completion"
    return sse({"id": ident, "object": kind, "created": created, "model": model,
                "choices": [choice]}, raw)


def usage_chunk(ident, model, created, chat, prompt, completion):
    kind = "chat.completion.chunk" if chat else "text_completion"
    return sse({"id": ident, "object": kind, "created": created, "model": model, "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}})


def stream_events(pacer, ident, model, chat, request, bad=""):
    """The events of one streamed answer, each yielded when due: max_tokens chunks of one token
    (each holding `bad`), the last with finish_reason "length", the usage chunk when asked, then
    [DONE]."""
    created = int(time.time())
    n = max_tokens(request)
    paced = pacer.stream()
    for i in range(n):
        paced.wait_next()
        yield chunk(ident, model, created, chat, token_text(i, bad),
                    "length" if i == n - 1 else None, i == 0, raw=bool(bad))
    if wants_usage(request):
        yield usage_chunk(ident, model, created, chat, prompt_tokens(request, chat), n)
    yield DONE
