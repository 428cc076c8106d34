"""Tests of fake_vllm.py: it is started as a real subprocess on a free port, as a unit would."""

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_model  # noqa: E402

FAKE = os.path.join(HERE, "fake_vllm.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=2.0):
    """Returns (status, body bytes); raises OSError when nothing listens."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class FakeVllmFixture(unittest.TestCase):
    """Starts fake_vllm.py processes and stops them after each test (no tests of its own)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fake-vllm-test-")
        self.model = make_model.make_model(os.path.join(self.tmp, "model"), shards=2)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stderr.close()
        shutil.rmtree(self.tmp)

    def start(self, args, env=None):
        full_env = dict(os.environ)
        for k in list(full_env):
            if k.startswith("FAKE_VLLM_"):
                del full_env[k]
        full_env.update(env or {})
        p = subprocess.Popen([PYTHON, FAKE] + list(args), env=full_env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def wait_healthy(self, proc, port, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.fail("fake_vllm exited with %d: %s"
                          % (proc.returncode, proc.stderr.read().decode(errors="replace")))
            try:
                status, _ = request(port, "GET", "/health", timeout=0.5)
                if status == 200:
                    return time.monotonic()
            except OSError:
                pass
            time.sleep(0.02)
        self.fail("fake_vllm not healthy on port %d after %.1fs" % (port, timeout))

    def serve(self, extra=(), env=None, name="berth-test"):
        port = free_port()
        args = ["serve", self.model, "--port", str(port), "--host", "127.0.0.1"]
        if name is not None:
            args += ["--served-model-name", name]
        p = self.start(args + list(extra), env)
        self.wait_healthy(p, port)
        return p, port

    def finish(self, proc, timeout=5.0):
        proc.wait(timeout)
        return proc.returncode, proc.stderr.read().decode("utf-8", "replace")


class FakeVllmTest(FakeVllmFixture):
    def test_serves_health_models_and_completions(self):
        p, port = self.serve(["--max-model-len", "1234", "--tensor-parallel-size", "2"])
        self.assertEqual(request(port, "GET", "/health"), (200, b""))
        status, body = request(port, "GET", "/v1/models")
        self.assertEqual(status, 200)
        models = json.loads(body)
        self.assertEqual(models["object"], "list")
        self.assertEqual([m["id"] for m in models["data"]], ["berth-test"])
        self.assertEqual(models["data"][0]["max_model_len"], 1234)
        self.assertEqual(models["data"][0]["owned_by"], "fake-vllm")
        status, body = request(port, "POST", "/v1/completions",
                               {"model": "berth-test", "prompt": "hello there", "max_tokens": 4})
        self.assertEqual(status, 200)
        completion = json.loads(body)
        self.assertEqual(completion["object"], "text_completion")
        self.assertEqual(completion["model"], "berth-test")
        self.assertIn("berth-test", completion["choices"][0]["text"])
        self.assertEqual(completion["usage"]["prompt_tokens"], 2)
        status, _ = request(port, "POST", "/v1/completions", {"model": "other", "prompt": "x"})
        self.assertEqual(status, 404)
        self.assertEqual(request(port, "GET", "/nope")[0], 404)
        self.assertEqual(request(port, "POST", "/v1/chat/nope", {})[0], 404)

    def test_empty_completions_switch_answers_200_with_no_text(self):
        p, port = self.serve(env={"FAKE_VLLM_EMPTY_COMPLETIONS": "1"})
        status, body = request(port, "POST", "/v1/completions",
                               {"model": "berth-test", "prompt": "hello", "max_tokens": 4})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["choices"][0]["text"], "")

    def test_bad_bytes_put_0xff_raw_in_completions_errors_and_streams(self):
        p, port = self.serve(env={"FAKE_VLLM_BAD_BYTES": "1"})
        status, body = request(port, "POST", "/v1/completions",
                               {"model": "berth-test", "prompt": "hello", "max_tokens": 4})
        self.assertEqual(status, 200)
        self.assertIn(b" fake completion\xff from berth-test", body)
        self.assertRaises(UnicodeDecodeError, body.decode, "utf-8")
        status, body = request(port, "POST", "/v1/completions",
                               {"model": "berth-test", "prompt": "hi", "max_tokens": 3,
                                "stream": True})
        self.assertEqual(status, 200)
        self.assertEqual(body.count(b"\xff"), 3, body)
        p, port = self.serve(["--bad-bytes", "--fail-completions"])
        status, body = request(port, "POST", "/v1/chat/completions",
                               {"model": "berth-test", "messages": []})
        self.assertEqual(status, 500)
        self.assertIn(b"completion failed\xff", body)

    def test_model_name_defaults_to_model_path_and_config_max_len(self):
        p, port = self.serve(name=None)
        data = json.loads(request(port, "GET", "/v1/models")[1])["data"]
        self.assertEqual(data[0]["id"], self.model)
        self.assertEqual(data[0]["max_model_len"], 2048)  # max_position_embeddings

    def test_argv_file_is_byte_exact(self):
        argv_file = os.path.join(self.tmp, "argv.json")
        port = free_port()
        tricky = ["a b  c", 'say "hi"', "it's", "100%", "%n %%", "$HOME", "${X}", "$$",
                  "back\\slash", "\\n", "caf\u00e9 \u6a21\u578b \U0001F680", "line1\nline2",
                  "tab\there", "", "-", "=x"]
        args = ["serve", self.model, "--port", str(port), "--host", "127.0.0.1",
                "--served-model-name", "x", "--unknown-flag"] + [t for t in tricky if t]
        # A non-UTF-8 byte must survive too: pass bytes to the kernel directly.
        raw_args = [a.encode("utf-8") for a in args] + [b"--raw", b"\xff\xfe-not-utf8"]
        p = self.start(raw_args, {"FAKE_VLLM_ARGV_FILE": argv_file})
        self.wait_healthy(p, port)
        expected_raw = [FAKE.encode()] + raw_args
        with open(argv_file + ".bin", "rb") as f:
            self.assertEqual(f.read(), b"".join(a + b"\0" for a in expected_raw))
        with open(argv_file, "rb") as f:
            data = f.read()
        decoded = json.loads(data.decode("utf-8", "surrogateescape"))
        self.assertEqual([os.fsencode(a) for a in decoded], expected_raw)
        # The valid UTF-8 elements appear in the file as UTF-8 text, not \\u escapes.
        self.assertIn("caf\u00e9 \u6a21\u578b \U0001F680".encode("utf-8"), data)
        self.assertEqual(decoded[1:1 + len(args)], args)

    def test_argv_file_of_empty_argument(self):
        argv_file = os.path.join(self.tmp, "argv.json")
        port = free_port()
        args = ["serve", self.model, "--port", str(port), "--host", "127.0.0.1", "--opt", ""]
        p = self.start(args, {"FAKE_VLLM_ARGV_FILE": argv_file})
        self.wait_healthy(p, port)
        with open(argv_file, encoding="utf-8") as f:
            self.assertEqual(json.load(f), [FAKE] + args)

    def test_startup_delay_postpones_listening(self):
        port = free_port()
        t0 = time.monotonic()
        p = self.start(["serve", self.model, "--port", str(port), "--host", "127.0.0.1"],
                       {"FAKE_VLLM_STARTUP_DELAY": "1.0"})
        time.sleep(0.5)
        with self.assertRaises(OSError):
            request(port, "GET", "/health", timeout=0.3)
        ready = self.wait_healthy(p, port)
        self.assertGreaterEqual(ready - t0, 1.0)

    def test_read_weights_reads_every_byte_of_the_safetensors_before_listening(self):
        port = free_port()
        total = sum(os.path.getsize(os.path.join(self.model, n))
                    for n in os.listdir(self.model) if n.endswith(".safetensors"))
        self.assertGreater(total, 0)
        p = self.start(["serve", self.model, "--port", str(port), "--host", "127.0.0.1"],
                       {"FAKE_VLLM_READ_WEIGHTS": "1"})
        self.wait_healthy(p, port)
        p.send_signal(signal.SIGTERM)
        code, err = self.finish(p)
        self.assertEqual(code, 0, err)
        self.assertIn("read %d bytes of weights in " % total, err)

    def test_missing_config_json_exits_2_naming_the_file(self):
        os.unlink(os.path.join(self.model, "config.json"))
        p = self.start(["serve", self.model, "--port", str(free_port())])
        code, err = self.finish(p)
        self.assertEqual(code, 2)
        self.assertIn(os.path.join(self.model, "config.json"), err)

    def test_invalid_config_json_exits_2(self):
        with open(os.path.join(self.model, "config.json"), "w") as f:
            f.write("{not json")
        code, err = self.finish(self.start(["serve", self.model, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn("config.json", err)
        self.assertIn("not valid JSON", err)

    def test_truncated_safetensors_header_exits_2_naming_the_file(self):
        shard = os.path.join(self.model, "model-00002-of-00002.safetensors")
        with open(shard, "r+b") as f:
            f.truncate(20)
        code, err = self.finish(self.start(["serve", self.model, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn(shard, err)

    def test_safetensors_header_not_json_exits_2(self):
        shard = os.path.join(self.model, "model-00001-of-00002.safetensors")
        with open(shard, "r+b") as f:
            f.seek(8)
            f.write(b"garbage!")
        code, err = self.finish(self.start(["serve", self.model, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn(shard, err)

    def test_shard_named_by_index_missing_exits_2(self):
        shard = os.path.join(self.model, "model-00002-of-00002.safetensors")
        os.unlink(shard)
        code, err = self.finish(self.start(["serve", self.model, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn(shard, err)

    def test_missing_model_dir_exits_2(self):
        missing = os.path.join(self.tmp, "no-such-model")
        code, err = self.finish(self.start(["serve", missing, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn(missing, err)

    def test_follows_symlinks_like_an_hf_cache_snapshot(self):
        blobs = os.path.join(self.tmp, "hub", "blobs")
        snapshot = os.path.join(self.tmp, "hub", "snapshots", "abc123")
        os.makedirs(blobs)
        os.makedirs(snapshot)
        for i, name in enumerate(sorted(os.listdir(self.model))):
            blob = os.path.join(blobs, "blob%d" % i)
            shutil.copy(os.path.join(self.model, name), blob)
            os.symlink(os.path.join("..", "..", "blobs", "blob%d" % i),
                       os.path.join(snapshot, name))
        self.model = snapshot
        p, port = self.serve()
        self.assertEqual(request(port, "GET", "/health")[0], 200)
        os.unlink(os.path.join(blobs, "blob0"))  # config.json's blob: a dangling link now
        code, err = self.finish(self.start(["serve", snapshot, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn("config.json", err)

    def test_sglang_command_line(self):
        port = free_port()
        p = self.start(["-m", "sglang.launch_server", "--model-path", self.model, "--tp-size", "2",
                        "--mem-fraction-static", "0.8", "--context-length", "777",
                        "--served-model-name", "sg", "--host", "127.0.0.1", "--port", str(port)])
        self.wait_healthy(p, port)
        data = json.loads(request(port, "GET", "/v1/models")[1])["data"]
        self.assertEqual((data[0]["id"], data[0]["max_model_len"]), ("sg", 777))

    def test_llama_server_command_line_with_gguf(self):
        gguf = make_model.make_gguf(os.path.join(self.tmp, "m.gguf"))
        port = free_port()
        p = self.start(["--model", gguf, "--alias", "llama", "--n-gpu-layers", "99",
                        "--ctx-size", "512", "--host", "127.0.0.1", "--port", str(port)])
        self.wait_healthy(p, port)
        data = json.loads(request(port, "GET", "/v1/models")[1])["data"]
        self.assertEqual((data[0]["id"], data[0]["max_model_len"]), ("llama", 512))
        with open(gguf, "wb") as f:
            f.write(b"NOPE")
        code, err = self.finish(self.start(["--model", gguf, "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn(gguf, err)

    def test_llama_server_takes_auto_and_all_gpu_layers(self):
        gguf = make_model.make_gguf(os.path.join(self.tmp, "m.gguf"))
        for ngl in ("all", "auto", "0"):
            port = free_port()
            p = self.start(["--model", gguf, "--alias", "llama", "--n-gpu-layers", ngl,
                            "--host", "127.0.0.1", "--port", str(port)])
            self.wait_healthy(p, port)
            p.send_signal(signal.SIGTERM)
            self.finish(p)
        code, err = self.finish(self.start(["--model", gguf, "-ngl", "most",
                                            "--port", str(free_port())]))
        self.assertEqual(code, 2)
        self.assertIn("'most'", err)

    def test_trtllm_serve_command_line_lists_the_model_folders_name(self):
        extra = os.path.join(self.tmp, "trt.yaml")
        with open(extra, "w") as f:
            f.write("enable_attention_dp: false\n")
        port = free_port()
        p = self.start(["serve", self.model, "--host", "127.0.0.1", "--port", str(port),
                        "--tp_size", "2", "--pp_size", "1", "--ep_size", "2",
                        "--max_seq_len", "640", "--extra_llm_api_options", extra])
        self.wait_healthy(p, port)
        data = json.loads(request(port, "GET", "/v1/models")[1])["data"]
        self.assertEqual((data[0]["id"], data[0]["max_model_len"]),
                         (os.path.basename(self.model), 640))
        status, _ = request(port, "POST", "/v1/completions",
                            {"model": os.path.basename(self.model), "prompt": "hi",
                             "max_tokens": 2})
        self.assertEqual(status, 200)
        code, err = self.finish(self.start(["serve", self.model, "--port", str(free_port()),
                                            "--tp_size", "1", "--extra_llm_api_options",
                                            os.path.join(self.tmp, "missing.yaml")]))
        self.assertEqual(code, 1)
        self.assertIn("missing.yaml", err)

    def test_unknown_flags_are_accepted_and_reported(self):
        p, port = self.serve(["--trust-remote-code", "--dtype", "bfloat16",
                              "--enable-expert-parallel", "--kv-cache-dtype=fp8",
                              "--pipeline-parallel-size", "1", "--gpu-memory-utilization", "0.9"])
        p.send_signal(signal.SIGTERM)
        code, err = self.finish(p)
        self.assertEqual(code, 0)
        self.assertIn("--trust-remote-code --dtype bfloat16 --kv-cache-dtype=fp8", err)
        self.assertNotIn("--enable-expert-parallel", err.split("unknown arguments")[1]
                         .splitlines()[0])

    def test_fail_health_answers_503(self):
        port = free_port()
        p = self.start(["serve", self.model, "--port", str(port), "--host", "127.0.0.1"],
                       {"FAKE_VLLM_FAIL_HEALTH": "1"})
        deadline = time.monotonic() + 10
        status = None
        while time.monotonic() < deadline:
            try:
                status = request(port, "GET", "/health")[0]
                break
            except OSError:
                time.sleep(0.02)
        self.assertEqual(status, 503)
        self.assertEqual(request(port, "GET", "/v1/models")[0], 200)

    def test_exit_after_exits_1(self):
        p, port = self.serve(env={"FAKE_VLLM_EXIT_AFTER": "0.7"})
        code, err = self.finish(p)
        self.assertEqual(code, 1)
        self.assertIn("FAKE_VLLM_EXIT_AFTER", err)

    def test_exit_after_healthy_serves_first_then_exits_1(self):
        # A startup delay longer than the crash's: the clock starts once it serves (serve()
        # waits for a 200 on /health, and fails if the process exited before).
        p, port = self.serve(["--exit-after-healthy", "0.3"],
                             env={"FAKE_VLLM_STARTUP_DELAY": "0.5"})
        code, err = self.finish(p)
        self.assertEqual(code, 1)
        self.assertIn("--exit-after-healthy 0.3: exiting with status 1", err)
        p, port = self.serve(env={"FAKE_VLLM_EXIT_AFTER_HEALTHY": "0.2"})
        self.assertEqual(self.finish(p)[0], 1)

    def test_sigterm_exits_0_promptly(self):
        p, port = self.serve()
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        code, _ = self.finish(p)
        self.assertEqual(code, 0)
        self.assertLess(time.monotonic() - t0, 20.0)  # a hang guard, not a speed test
        with self.assertRaises(OSError):
            request(port, "GET", "/health", timeout=0.5)

    def claim(self, claims, proc):
        """The fake NVML claim lines the server wrote, or None when it has none."""
        try:
            with open(os.path.join(claims, "fake-vllm-%d" % proc.pid)) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return None

    def test_sleep_mode_frees_the_gpu_claim_and_wake_up_takes_its_time(self):
        claims = os.path.join(self.tmp, "claims")
        os.mkdir(claims)
        env = {"VLLM_SERVER_DEV_MODE": "1", "FAKE_NVML_CLAIMS_DIR": claims,
               "FAKE_VLLM_GPU_BYTES": "1000", "FAKE_VLLM_SLEEP_GPU_BYTES": "10",
               "FAKE_VLLM_WAKE_SECONDS": "0.4", "CUDA_VISIBLE_DEVICES": "2,3"}
        p, port = self.serve(["--enable-sleep-mode"], env)
        awake = ["process 2 %d 1000" % p.pid, "process 3 %d 1000" % p.pid]
        self.assertEqual(self.claim(claims, p), awake)
        self.assertEqual(request(port, "GET", "/is_sleeping"), (200, b'{"is_sleeping": false}'))
        completion = {"model": "berth-test", "prompt": "hi", "max_tokens": 2}
        self.assertEqual(request(port, "POST", "/v1/completions", completion)[0], 200)

        self.assertEqual(request(port, "POST", "/sleep?level=1"), (200, b""))
        self.assertEqual(request(port, "GET", "/is_sleeping"), (200, b'{"is_sleeping": true}'))
        self.assertEqual(self.claim(claims, p), ["process 2 %d 10" % p.pid,
                                                 "process 3 %d 10" % p.pid])
        status, body = request(port, "POST", "/v1/completions", completion)
        self.assertEqual(status, 503)
        self.assertIn(b"sleeping", body)
        self.assertEqual(request(port, "GET", "/health")[0], 200)
        self.assertEqual(request(port, "GET", "/v1/models")[0], 200)
        self.assertEqual(request(port, "POST", "/sleep?level=3")[0], 400)

        t0 = time.monotonic()
        self.assertEqual(request(port, "POST", "/wake_up"), (200, b""))
        self.assertGreaterEqual(time.monotonic() - t0, 0.4)  # the configured wake, at least
        self.assertEqual(request(port, "GET", "/is_sleeping"), (200, b'{"is_sleeping": false}'))
        self.assertEqual(self.claim(claims, p), awake)
        self.assertEqual(request(port, "POST", "/v1/completions", completion)[0], 200)

        p.send_signal(signal.SIGTERM)
        self.assertEqual(self.finish(p)[0], 0)
        self.assertIsNone(self.claim(claims, p))  # gone with the server

    def test_sleep_routes_need_dev_mode_and_sleeping_needs_sleep_mode(self):
        p, port = self.serve(["--enable-sleep-mode"])  # no VLLM_SERVER_DEV_MODE: no routes
        self.assertEqual(request(port, "POST", "/sleep")[0], 404)
        self.assertEqual(request(port, "POST", "/wake_up")[0], 404)
        self.assertEqual(request(port, "GET", "/is_sleeping")[0], 404)
        p, port = self.serve(env={"VLLM_SERVER_DEV_MODE": "1"})  # no --enable-sleep-mode
        status, body = request(port, "POST", "/sleep?level=1")
        self.assertEqual(status, 500)
        self.assertIn(b"--enable-sleep-mode", body)
        self.assertEqual(request(port, "GET", "/is_sleeping"), (200, b'{"is_sleeping": false}'))

    def test_sigint_exits_0(self):
        p, _ = self.serve()
        p.send_signal(signal.SIGINT)
        self.assertEqual(self.finish(p)[0], 0)

    def test_sigterm_during_startup_delay_exits_0(self):
        p = self.start(["serve", self.model, "--port", str(free_port())],
                       {"FAKE_VLLM_STARTUP_DELAY": "30"})
        # Its handlers are in place once it says it loads the weights (no sleep: a busy machine
        # may take longer than any fixed wait to get there).
        while True:
            line = p.stderr.readline().decode(errors="replace")
            self.assertNotEqual(line, "", "fake_vllm ended before loading the weights")
            if "loading weights" in line:
                break
        p.send_signal(signal.SIGTERM)
        # A hang guard, not a speed check: a lost signal would leave it asleep for 30 s, then
        # serving. 5 s was once too short for a CI machine busy with the sandboxed e2e tests.
        self.assertEqual(self.finish(p, timeout=20.0)[0], 0)

    def test_make_model_writes_valid_safetensors(self):
        with open(os.path.join(self.model, "model-00001-of-00002.safetensors"), "rb") as f:
            data = f.read()
        n = int.from_bytes(data[:8], "little")
        self.assertEqual(n % 8, 0)
        header = json.loads(data[8:8 + n])
        begin, end = header["model.layers.0.weight"]["data_offsets"]
        self.assertEqual(len(data) - 8 - n, end - begin)


CHECK = os.path.join(HERE, "..", "..", "engine", "dist", "engine-check", "vllm_check.py")
PKG = os.path.join(HERE, "pkg")
MTP = '{"method": "mtp", "num_speculative_tokens": 3}'


class EngineRefusalTest(FakeVllmFixture):
    """The fake engine refuses what vLLM refuses, at its start as in berth's engine check (the
    fake vllm package on PYTHONPATH), with vLLM's own words."""

    def check(self, extra, env=None):
        full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PKG}
        full_env.update(env or {})
        r = subprocess.run([PYTHON, CHECK, "serve", self.model, "--port", "1"] + list(extra),
                           env=full_env, capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout.strip().splitlines()[-1]

    def refused_at_start(self, extra, words):
        p = self.start(["serve", self.model, "--port", str(free_port())] + list(extra))
        code, err = self.finish(p)
        self.assertEqual(code, 1, err)
        self.assertIn(words, err)
        code, line = self.check(extra)
        self.assertEqual(code, 1, line)
        self.assertTrue(line.startswith("berth-engine-check: refused: " + words), line)

    def test_a_configuration_vllm_accepts_passes_the_check(self):
        self.assertEqual(self.check(["--served-model-name", "x", "--enable-auto-tool-choice",
                                     "--tool-call-parser", "hermes", "--reasoning-parser",
                                     "qwen3"]), (0, "berth-engine-check: ok"))

    def test_mtp_for_a_model_type_without_mtp(self):
        self.refused_at_start(["--speculative-config", MTP],
                              "NotImplementedError: Unsupported speculative method: 'mtp'")

    def test_mtp_for_a_model_type_with_mtp_passes(self):
        with open(os.path.join(self.model, "config.json")) as f:
            config = json.load(f)
        config["model_type"] = "deepseek_v3"
        config["architectures"] = ["DeepseekV3ForCausalLM"]
        with open(os.path.join(self.model, "config.json"), "w") as f:
            json.dump(config, f)
        self.assertEqual(self.check(["--speculative-config", MTP]), (0, "berth-engine-check: ok"))

    def test_unknown_tool_call_parser(self):
        self.refused_at_start(["--enable-auto-tool-choice", "--tool-call-parser", "minimax-m2"],
                              "KeyError: 'invalid tool call parser: minimax-m2 (chose from {")

    def test_unknown_reasoning_parser(self):
        self.refused_at_start(["--reasoning-parser", "minimax-append-think"],
                              "KeyError: 'invalid reasoning parser: minimax-append-think")

    def test_unknown_architecture(self):
        make_model.make_model(self.model, architecture="NoSuchForCausalLM")
        self.refused_at_start([], "ValueError: Model architectures ['NoSuchForCausalLM'] are "
                                  "not supported for now.")

    def test_an_interpreter_without_vllm_is_an_error_not_a_refusal(self):
        code, line = self.check([], env={"PYTHONPATH": ""})
        self.assertEqual(code, 2)
        self.assertIn("berth-engine-check: error: this interpreter", line)
        self.assertIn("cannot import vLLM: ModuleNotFoundError", line)

    def test_sglang_check_refuses_what_its_parser_refuses(self):
        sglang = os.path.join(os.path.dirname(CHECK), "sglang_check.py")

        def run(*extra):
            r = subprocess.run([PYTHON, sglang, "--model-path", self.model] + list(extra),
                               env={"PATH": "/usr/bin:/bin", "PYTHONPATH": PKG},
                               capture_output=True, text=True, timeout=60)
            return r.returncode, r.stdout.strip().splitlines()[-1]
        self.assertEqual(run("--tool-call-parser", "minimax-m2", "--reasoning-parser",
                             "minimax-append-think"), (0, "berth-engine-check: ok"))
        code, line = run("--tool-call-parser", "minimax_m2")  # vLLM's spelling
        self.assertEqual(code, 1)
        self.assertIn("refused: ArgumentError: sglang serve: error: argument --tool-call-parser: "
                      "invalid choice: 'minimax_m2'", line)

    def test_version_like_llama_server(self):
        r = subprocess.run([PYTHON, FAKE, "--version"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("version:", r.stdout)



def streamed_tokens_per_second(port, streams, seconds, warmup=0.25):
    """Opens `streams` streamed completions on `port` at once and counts the tokens the client
    receives from all of them between `warmup` and `warmup + seconds` after they start; returns
    (tokens/s, errors)."""
    barrier = threading.Barrier(streams + 1)
    stop = threading.Event()
    stamps = [[] for _ in range(streams)]
    errors = []

    def one(out):
        barrier.wait()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
                         body=json.dumps({"model": "berth-test", "prompt": "x", "stream": True,
                                          "max_tokens": 1000000}))
            r = conn.getresponse()
            if r.status != 200:
                errors.append("status %d" % r.status)
                return
            while not stop.is_set():
                line = r.readline()
                if not line:
                    errors.append("the stream ended")
                    return
                if line.startswith(b'data: {"id"'):
                    out.append(time.monotonic())
        except OSError as e:
            errors.append(repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(out,)) for out in stamps]
    for t in threads:
        t.start()
    barrier.wait()
    begin = time.monotonic() + warmup
    time.sleep(warmup + seconds)
    stop.set()
    for t in threads:
        t.join(15)
    counted = sum(1 for out in stamps for t in out if begin <= t < begin + seconds)
    return counted / seconds, errors


def get_json(port, path):
    status, body = request(port, "GET", path)
    return status, json.loads(body)


class SpeedModelTest(FakeVllmFixture):
    """FAKE_VLLM_SPEED_MODEL: the pacing chosen from the server's own command line."""

    MODEL = "tp=4:400/stream=100;tp=8:800;tp=8,ep:1600;default:50"

    def serve_all(self, extras, env):
        """Starts one server per command line at once; returns their ports once all serve."""
        started = []
        for extra in extras:
            port = free_port()
            started.append((self.start(["serve", self.model, "--port", str(port), "--host",
                                        "127.0.0.1", "--served-model-name", "berth-test"]
                                       + list(extra), env), port))
        for p, port in started:
            self.wait_healthy(p, port)
        return [port for _, port in started]

    def test_three_command_lines_stream_at_their_rules_aggregate(self):
        ports = self.serve_all([["--tensor-parallel-size", "4"], ["-tp", "8"],
                                ["--tensor-parallel-size=8", "--enable-expert-parallel"]],
                               {"FAKE_VLLM_SPEED_MODEL": self.MODEL})
        expected = [(100.0, 400.0, "tp=4"), (0.0, 800.0, "tp=8"), (0.0, 1600.0, "tp=8,ep")]
        for port, (rate, cap, rule) in zip(ports, expected):
            self.assertEqual(get_json(port, "/_fake/pacing"),
                             (200, {"tokens_per_second": rate, "speed_rule": rule,
                                    "max_aggregate_tokens_per_second": cap}))
        measured = []
        for port in ports:
            # 6 streams want more than any cap (tp=4's 100 each is 600 > 400): the aggregate
            # cap is what each measures.
            tps, errors = streamed_tokens_per_second(port, streams=6, seconds=1.0)
            self.assertEqual(errors, [])
            measured.append(tps)
        tp4, tp8, ep = measured
        why = "measured tok/s: tp4 %.0f, tp8 %.0f, tp8+ep %.0f" % (tp4, tp8, ep)
        self.assertLess(tp4, tp8, why)
        self.assertLess(tp8, ep, why)
        # Generous: a shared 2-core machine may run late (slower), never faster than the cap.
        for tps, (_, cap, _) in zip(measured, expected):
            self.assertGreater(tps, 0.5 * cap, why)
            self.assertLess(tps, 1.15 * cap, why)
        self.assertGreater(ep / tp4, 2.5, why)  # 4 nominal

    def test_stream_rate_caps_one_stream(self):
        [port] = self.serve_all([[]], {"FAKE_VLLM_SPEED_MODEL": "tp=8:800;default:1000/stream=40"})
        self.assertEqual(get_json(port, "/_fake/pacing")[1]["speed_rule"], "default")
        tps, errors = streamed_tokens_per_second(port, streams=1, seconds=1.0)
        self.assertEqual(errors, [])
        self.assertGreater(tps, 20)
        self.assertLess(tps, 47)

    def test_rules_match_the_whole_command_line_first_match_wins(self):
        sys.path.insert(0, HERE)
        import fake_vllm  # noqa: E402 - in-process: only its parsing and matching
        rules = fake_vllm.parse_speed_model(
            "tp=8:1;tp=8,ep:2;tp=8,ep=*:3;spec=mtp,tp=*:4/stream=9;max_num_seqs=*,pp=2:5;"
            "dp=2,spec=*:6;default:7")

        def chosen(*args, env=None):
            old = dict(os.environ)
            os.environ.update(env or {})
            try:
                opts, _ = fake_vllm.parse_args(["serve", self.model] + list(args))
            finally:
                os.environ.clear()
                os.environ.update(old)
            rate, cap, rule = fake_vllm.pacing(opts, rules)
            return rate, cap, rule and rule["text"]
        self.assertEqual(chosen("-tp", "8"), (0, 1, "tp=8"))
        self.assertEqual(chosen("-tp", "8", "--enable-expert-parallel"), (0, 2, "tp=8,ep"))
        self.assertEqual(chosen("-tp", "8", "--max-num-seqs", "64"), (0, 7, "default"))
        self.assertEqual(chosen("-tp", "8", "-pp", "1"), (0, 1, "tp=8"))  # 1 is the default
        self.assertEqual(chosen("--speculative-config", MTP, "-tp", "2"),
                         (9, 4, "spec=mtp,tp=*"))
        self.assertEqual(chosen("--speculative-config", '{"method": "ngram"}'), (0, 7, "default"))
        self.assertEqual(chosen("-pp", "2"), (0, 5, "max_num_seqs=*,pp=2"))
        self.assertEqual(chosen("-pp", "2", "--max-num-seqs=8"), (0, 5, "max_num_seqs=*,pp=2"))
        self.assertEqual(chosen("-dp", "2", "--speculative-config", "{}"), (0, 6, "dp=2,spec=*"))
        self.assertEqual(chosen("--data-parallel-size", "2"), (0, 6, "dp=2,spec=*"))
        # The environment's pacing under a rule without /stream; a flag wins over the rule.
        self.assertEqual(chosen("-tp", "8", env={"FAKE_VLLM_TOKENS_PER_SECOND": "3",
                                                 "FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND": "4"}),
                         (3, 1, "tp=8"))
        self.assertEqual(chosen("-tp", "8", "--max-aggregate-tokens-per-second", "11",
                                "--tokens-per-second", "12"), (12, 11, "tp=8"))
        self.assertEqual(fake_vllm.pacing(fake_vllm.parse_args(["serve", "m", "-tp", "3"])[0],
                                          rules[:1]), (0, 0, None))  # no rule matches

    def test_grammar_errors_exit_2_naming_the_variable(self):
        for model, words in [
                ("tp=4", "rule 1 'tp=4': a rule is CONDITIONS:TOKENS_PER_SECOND"),
                ("tp=4:fast", "the aggregate tokens/s must be a number >= 0, got 'fast'"),
                ("tp=4:-1", "must be a number >= 0, got '-1'"),
                ("tp=4:100/stream=0", "stream must be a positive number, got '0'"),
                ("tp=4:100/per=5", "after '/' comes stream=R"),
                ("tp=8:1;tq=8:2", "rule 2 'tq=8:2': unknown key 'tq'"),
                ("tp=four:1", "tp must be a positive integer or *, got 'four'"),
                ("tp=0:1", "tp must be a positive integer or *, got '0'"),
                ("tp=8,tp=4:1", "tp given twice"),
                ("ep=1:1", "ep is a flag"),
                ("spec:1", "spec needs a value"),
                ("default:1;tp=8:2", "rule 2 'tp=8:2': it comes after `default`"),
                ("tp=8:1;", "rule 2 '': a rule is"),
        ]:
            p = self.start(["serve", self.model, "--port", str(free_port())],
                           {"FAKE_VLLM_SPEED_MODEL": model})
            code, err = self.finish(p)
            self.assertEqual(code, 2, (model, err))
            self.assertIn("FAKE_VLLM_SPEED_MODEL: ", err, model)
            self.assertIn(words, err, model)

    def test_the_engine_check_still_refuses_mtp_for_a_model_without_it(self):
        env = {"FAKE_VLLM_SPEED_MODEL": "spec=mtp:900;default:100"}
        p = self.start(["serve", self.model, "--port", str(free_port()),
                        "--speculative-config", MTP], env)
        code, err = self.finish(p)
        self.assertEqual(code, 1, err)
        self.assertIn("NotImplementedError: Unsupported speculative method: 'mtp'", err)
        make_model.make_model(self.model, architecture="DeepseekV3ForCausalLM")
        with open(os.path.join(self.model, "config.json")) as f:
            config = json.load(f)
        config["model_type"] = "deepseek_v3"
        with open(os.path.join(self.model, "config.json"), "w") as f:
            json.dump(config, f)
        _, port = self.serve(["--speculative-config", MTP], env)
        self.assertEqual(get_json(port, "/_fake/pacing")[1]["speed_rule"], "spec=mtp")


if __name__ == "__main__":
    unittest.main()
