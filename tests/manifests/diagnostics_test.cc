// The manifest loader on in-memory files: one scenario per class of mistake, with the exact
// FILE:LINE:COL and message an operator sees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::kBase;
using ::berth::testing::Problems;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(Diagnostics, UnknownKeySuggestsTheClosestKnownKey) {
  EXPECT_THAT(Problems(R"(berth: 1
models:
  minimax-m25:
    source: hf://MiniMaxAI/MiniMax-M2.5
services:
  vllm-minimax-m25:
    model: minimax-m25
    engine: vllm
    gpus: [0]
    port: 8000
    vllm:
      gpu_memory_utilisation: 0.9
)"),
              ElementsAre("berth.yaml:12:7: unknown key 'gpu_memory_utilisation' in vllm (did you "
                          "mean 'gpu_memory_utilization'?)"));
}

TEST(Diagnostics, UnknownKeysAtEveryLevel) {
  EXPECT_THAT(Problems(R"(berth: 1
hosts: {}
host: {stor: /x, match: {host: a}}
models:
  m: {source: hf://a/b, revison: main}
services:
  s: {prot: 1, state: running, xyzzy: 1}
)"),
              ElementsAre("berth.yaml:2:1: unknown key 'hosts' at the top level (did you mean "
                          "'host'?)",
                          "berth.yaml:3:8: unknown key 'stor' in host (did you mean 'store'?)",
                          "berth.yaml:3:26: unknown key 'host' in match (did you mean "
                          "'hostname'?)",
                          "berth.yaml:5:25: unknown key 'revison' in model 'm' (did you mean "
                          "'revision'?)",
                          "berth.yaml:7:7: unknown key 'prot' in service 's' (did you mean "
                          "'port'?)",
                          "berth.yaml:7:32: unknown key 'xyzzy' in service 's'"));
}

TEST(Diagnostics, WrongTypesNameWhatWasExpectedAndWhatWasGiven) {
  EXPECT_THAT(
      Problems(R"(berth: 1
models:
  m:
    source: hf://a/b
    keep: yes
    include: {a: 1}
services:
  s:
    model: m
    engine: vllm
    gpus: "0,1"
    port: "8000"
    vllm: [1]
    env: {A: [1]}
    args: [a, {b: c}]
  t:
    model: [m]
    engine: command
    command: /bin/true
)"),
      ElementsAre("berth.yaml:5:11: expected a boolean (true or false) for 'keep', got a string",
                  "berth.yaml:6:14: expected a string or a list of strings for 'include', got a "
                  "map",
                  "berth.yaml:11:11: expected a list of integers for 'gpus', got a string",
                  "berth.yaml:12:11: expected an integer for 'port', got a string",
                  "berth.yaml:13:11: expected a map for 'vllm', got a list",
                  "berth.yaml:14:14: expected a string for 'A', got a list",
                  "berth.yaml:15:15: expected a string in 'args', got a map",
                  "berth.yaml:17:12: expected a string for 'model', got a list",
                  "berth.yaml:19:14: expected a list of strings for 'command', got a string"));
}

TEST(Diagnostics, GpusMustBeDistinctNonNegativeIntegers) {
  EXPECT_THAT(
      Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  s:
    model: m
    engine: vllm
    gpus: [0, -1, x, 0]
    port: 8000
)"),
      ElementsAre("berth.yaml:7:15: 'gpus' must be at least 0, got -1",
                  "berth.yaml:7:19: expected an integer in 'gpus', got a string",
                  "berth.yaml:7:22: 0 is listed twice in 'gpus', first at berth.yaml:7:12"));
}

TEST(Diagnostics, NumbersOutOfRange) {
  EXPECT_THAT(
      Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0]
    port: 70000
    vllm: {gpu_memory_utilization: 0, max_model_len: 0}
  b:
    model: m
    engine: sglang
    gpus: [1]
    port: 0
    sglang: {mem_fraction_static: 1.5}
  c:
    model: m
    engine: llama-server
    port: 8080
    llama_server: {n_gpu_layers: -1, ctx_size: 99999999999, model_file: m.gguf}
)"),
      ElementsAre("berth.yaml:8:11: 'port' must be between 1 and 65535, got 70000",
                  "berth.yaml:9:36: 'gpu_memory_utilization' must be greater than 0 and "
                  "at most 1, got 0",
                  "berth.yaml:9:54: 'max_model_len' must be at least 1, got 0",
                  "berth.yaml:14:11: 'port' must be between 1 and 65535, got 0",
                  "berth.yaml:15:35: 'mem_fraction_static' must be greater than 0 and at "
                  "most 1, got 1.5",
                  "berth.yaml:20:34: 'n_gpu_layers' -1 is llama.cpp's 'auto' now, not 'all' (write "
                  "n_gpu_layers: all to put every layer on the GPU, or auto to let "
                  "llama-server fit them to the free memory)",
                  "berth.yaml:20:48: 'ctx_size' must be at least 1, got 99999999999"));
}

// .nan compares false with every figure: a floor of .nan would check nothing and pass.
TEST(Diagnostics, NumbersMustBeFinite) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
    vllm: {gpu_memory_utilization: .NaN}
    gates: {floor: {output_tps: .nan, concurrency: 1}}
  b:
    model: m
    engine: vllm
    gpus: [1]
    port: 8001
    gates: {floor: {output_tps: -.inf}}
  c:
    model: m
    engine: vllm
    gpus: [2]
    port: 8002
    vllm: {gpu_memory_utilization: .5}
    gates: {floor: {output_tps: 1e400}}
)"),
              ElementsAre("berth.yaml:9:36: 'gpu_memory_utilization' must be a finite number, "
                          "got '.NaN' (.nan and .inf are not limits; write the number itself)",
                          "berth.yaml:10:13: gates.floor sets no limit (add output_tps, ttft_p50, "
                          "ttft_p99, goodput.min_rps or relative:, e.g. floor: {concurrency: "
                          "32, output_tps: 1000} or floor: {relative: {output_tps: 0.9}})",
                          "berth.yaml:10:33: 'output_tps' must be a finite number, got '.nan' "
                          "(.nan and .inf are not limits; write the number itself)",
                          "berth.yaml:16:13: gates.floor sets no limit (add output_tps, ttft_p50, "
                          "ttft_p99, goodput.min_rps or relative:, e.g. floor: {concurrency: "
                          "32, output_tps: 1000} or floor: {relative: {output_tps: 0.9}})",
                          "berth.yaml:16:33: 'output_tps' must be a finite number, got '-.inf' "
                          "(.nan and .inf are not limits; write the number itself)",
                          "berth.yaml:23:13: gates.floor sets no limit (add output_tps, ttft_p50, "
                          "ttft_p99, goodput.min_rps or relative:, e.g. floor: {concurrency: "
                          "32, output_tps: 1000} or floor: {relative: {output_tps: 0.9}})",
                          "berth.yaml:23:33: 'output_tps' must be a finite number, got '1e400' "
                          "(.nan and .inf are not limits; write the number itself)"));
}

// A soak gate's limits are checked where they are written; it needs the port it probes.
TEST(Diagnostics, SoakLimitsAreCheckedWhereTheyAreWritten) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
    gates: {soak: {duration: 2d, max_error_rate: 1.5, max_restarts: -1, colour: red}}
  b:
    model: m
    engine: vllm
    gpus: [1]
    gates: {soak: {}}
)"),
              ElementsAre("berth.yaml:9:30: soak 'duration' must be between 1s and 24h",
                          "berth.yaml:9:50: soak 'max_error_rate' must be between 0 and 1 (a "
                          "share of the requests, 0.05 for 5%)",
                          "berth.yaml:9:69: 'max_restarts' must be between 0 and 1000, got -1",
                          HasSubstr("berth.yaml:9:73: unknown key 'colour' in gates.soak"),
                          "berth.yaml:10:3: gates.soak needs the service's 'port': it probes "
                          "the server there (add port:, or remove gates.soak)",
                          "berth.yaml:10:3: engine vllm needs 'port'"));
}

TEST(Diagnostics, BadSizesAndDurations) {
  EXPECT_THAT(Problems(R"(berth: 1
host: {reserve: 12XB}
models: {m: {source: hf://a/b, size: -5}}
services:
  s:
    engine: command
    command: [/bin/server]
    gpu_memory: [1]
    health: {timeout: 30 minutes, interval: 5}
)"),
              ElementsAre("berth.yaml:2:17: bad size '12XB' for 'reserve' (use e.g. 230GB, 96GiB)",
                          "berth.yaml:3:38: bad size '-5' for 'size' (use e.g. 230GB, 96GiB)",
                          "berth.yaml:8:17: expected a size for 'gpu_memory', got a list",
                          "berth.yaml:9:23: bad duration '30 minutes' for 'timeout' (use e.g. "
                          "30m, 1h30m, 45s, 500ms)",
                          "berth.yaml:9:45: bad duration '5' for 'interval' (use e.g. 30m, "
                          "1h30m, 45s, 500ms)"));
}

// stop_timeout becomes the unit's TimeoutStopSec: inside the 5 minutes berth waits for a stop.
TEST(Diagnostics, AStopTimeoutIsBetweenOneSecondAndFourMinutes) {
  EXPECT_THAT(Problems(std::string(kBase) + "    stop_timeout: 5m\n"),
              ElementsAre("berth.yaml:12:19: stop_timeout must be between 1s and 4m, got 5m "
                          "(berth waits 5m for systemd to stop a service; set a stop_timeout "
                          "inside it)"));
  EXPECT_THAT(Problems(std::string(kBase) + "    stop_timeout: 500ms\n"),
              ElementsAre(HasSubstr("stop_timeout must be between 1s and 4m, got 500ms")));
  LoadResult ok = berth::testing::Load(std::string(kBase) + "    stop_timeout: 45s\n");
  ASSERT_THAT(berth::testing::ToStrings(ok), IsEmpty());
  EXPECT_EQ(ok.desired.services.at("vllm-minimax-m25").stop_timeout_ms, 45'000u);
}

TEST(Diagnostics, BadEnumValuesSuggestOrList) {
  EXPECT_THAT(Problems(R"(berth: 1
services:
  a: {state: stoped}
  b: {state: paused}
  c: {engine: vlm}
  d: {engine: command, command: [/bin/x], strategy: start_first}
)"),
              ElementsAre("berth.yaml:3:14: bad state 'stoped' (did you mean 'stopped'?)",
                          "berth.yaml:4:14: bad state 'paused' (use running, stopped or absent)",
                          "berth.yaml:5:15: bad engine 'vlm' (did you mean 'vllm'?)",
                          "berth.yaml:6:53: bad strategy 'start_first' (did you mean "
                          "'start-first'?)"));
}

TEST(Diagnostics, ServiceNamesMustMakeSystemdUnitNames) {
  EXPECT_THAT(Problems(R"(berth: 1
services:
  foo bar: {state: stopped}
  vllm@kimi: {state: stopped}
  .hidden: {state: stopped}
  a/b: {state: stopped}
  ok:name_1.x-y: {state: stopped}
)"),
              ElementsAre("berth.yaml:3:3: 'foo bar' is not a valid systemd unit name: ' ' is not "
                          "allowed (use letters, digits, ':', '_', '.' and '-')",
                          "berth.yaml:4:3: 'vllm@kimi' is not a valid systemd unit name: '@' is "
                          "not allowed (template units are not supported) (use letters, digits, "
                          "':', '_', '.' and '-')",
                          "berth.yaml:5:3: '.hidden' is not a valid systemd unit name: it must "
                          "not start with '.' (use letters, digits, ':', '_', '.' and '-')",
                          "berth.yaml:6:3: 'a/b' is not a valid systemd unit name: '/' is not "
                          "allowed (use letters, digits, ':', '_', '.' and '-')"));
}

TEST(Diagnostics, ModelNamesSourcesAndRevisions) {
  EXPECT_THAT(Problems(R"(berth: 1
models:
  -bad:
    source: hf://a/b
  noslash:
    source: hf://MiniMaxAI
  dashes:
    source: hf://Qwen--Qwen3-8B/x
  space:
    source: hf://a/b
    revision: "a b"
  nosource:
    keep: false
)"),
              ElementsAre("berth.yaml:3:3: '-bad' is not a valid model name: it must start with a "
                          "letter or digit (use 1-64 letters, digits, '.', '_' or '-', starting "
                          "with a letter or digit)",
                          "berth.yaml:6:13: bad source 'hf://MiniMaxAI' (use hf://org/name, e.g. "
                          "hf://MiniMaxAI/MiniMax-M2.5)",
                          "berth.yaml:8:13: bad source 'hf://Qwen--Qwen3-8B/x' (use "
                          "hf://org/name, e.g. hf://MiniMaxAI/MiniMax-M2.5)",
                          "berth.yaml:11:15: bad revision 'a b' (use a branch, a tag or a 40-hex "
                          "commit)",
                          "berth.yaml:12:3: model 'nosource' needs 'source' (e.g. source: "
                          "hf://MiniMaxAI/MiniMax-M2.5)"));
}

TEST(Diagnostics, AStateOnlyEntryTakesWhereItServesButNothingOfAUnitBerthWouldWrite) {
  EXPECT_THAT(Problems(R"(berth: 1
services:
  vllm-kimi-k25:
    state: stopped
    adopt: true
    gpus: [0, 1]
    port: 8000
    gpu_memory: 70GiB
    health: {path: /ready, timeout: 10m}
    args: [--x]
    bind: 127.0.0.1
)"),
              ElementsAre("berth.yaml:10:5: 'args' needs an engine: add engine: "
                          "vllm|sglang|llama-server|trtllm-serve|command, or remove it",
                          "berth.yaml:11:5: 'bind' needs an engine: add engine: "
                          "vllm|sglang|llama-server|trtllm-serve|command, or remove it"));
}

TEST(Diagnostics, EngineBlocksMustMatchTheEngine) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
    sglang: {tp_size: 1}
    llama_server: {}
    command: [/bin/x]
  b:
    engine: command
    command: [/bin/x]
    executable: /bin/y
    vllm: {}
)"),
              ElementsAre("berth.yaml:9:5: 'sglang' options do not apply to engine vllm (remove "
                          "them, or set engine: sglang)",
                          "berth.yaml:10:5: 'llama_server' options do not apply to engine vllm "
                          "(remove them, or set engine: llama-server)",
                          "berth.yaml:11:5: 'command' does not apply to engine vllm (remove it, "
                          "or set engine: command)",
                          "berth.yaml:15:5: 'executable' does not apply to engine command (the "
                          "first element of 'command' is the executable)",
                          "berth.yaml:16:5: 'vllm' options do not apply to engine command "
                          "(remove them, or set engine: vllm)"));
}

TEST(Diagnostics, EnginesNeedTheirKeys) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  v:
    engine: vllm
  s:
    engine: sglang
    model: m
    port: 30000
    gpus: []
  l:
    engine: llama-server
    model: m
  c:
    engine: command
  r:
    engine: command
    command: [bin/server]
)"),
              ElementsAre("berth.yaml:4:3: engine vllm needs 'model'",
                          "berth.yaml:4:3: engine vllm needs 'port'",
                          "berth.yaml:4:3: engine vllm needs 'gpus'",
                          "berth.yaml:10:11: engine sglang needs at least one GPU in 'gpus'",
                          "berth.yaml:11:3: engine llama-server needs 'port'",
                          "berth.yaml:11:3: engine llama-server needs 'llama_server.model_file' "
                          "(llama-server's --model takes a GGUF file, not the snapshot folder: "
                          "e.g. llama_server: {model_file: Q4_K_M/model-Q4_K_M.gguf})",
                          "berth.yaml:14:3: engine command needs 'command'",
                          "berth.yaml:18:15: the first element of 'command' must be an absolute "
                          "path, got 'bin/server'"));
}

TEST(Diagnostics, VllmParallelismMustCoverTheGpus) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: vllm
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    port: 8000
    vllm: {tensor_parallel_size: 4}
  b:
    model: m
    engine: vllm
    gpus: [0, 1]
    port: 8001
  c:
    model: m
    engine: vllm
    gpus: [0, 1, 2, 3]
    port: 8002
    vllm:
      tensor_parallel_size: 2
      pipeline_parallel_size: 2
)"),
              ElementsAre("berth.yaml:9:11: tensor_parallel_size 4 × pipeline_parallel_size 1 × "
                          "data_parallel_size 1 = 4, but gpus lists 8 devices (make "
                          "tensor_parallel_size × pipeline_parallel_size × data_parallel_size "
                          "equal the number of GPUs)",
                          "berth.yaml:13:11: tensor_parallel_size 1 × pipeline_parallel_size 1 × "
                          "data_parallel_size 1 = 1, but gpus lists 2 devices (make "
                          "tensor_parallel_size × pipeline_parallel_size × data_parallel_size "
                          "equal the number of GPUs)"));
}

TEST(Diagnostics, SglangTpSizeMustEqualTheGpus) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  a:
    model: m
    engine: sglang
    gpus: [0, 1, 2, 3]
    port: 30000
    sglang: {tp_size: 8}
)"),
              ElementsAre("berth.yaml:9:13: tp_size 8, but gpus lists 4 devices (make tp_size "
                          "equal the number of GPUs)"));
}

TEST(Diagnostics, ServicesMustNameADefinedModel) {
  EXPECT_THAT(Problems(R"(berth: 1
models:
  minimax-m25: {source: hf://MiniMaxAI/MiniMax-M2.5}
services:
  a:
    model: minimax-m2
    engine: vllm
    gpus: [0]
    port: 8000
  b:
    model: something-else
    engine: llama-server
    port: 8001
    llama_server: {model_file: m.gguf}
)"),
              ElementsAre("berth.yaml:6:12: model 'minimax-m2' is not defined in models (did you "
                          "mean 'minimax-m25'?)",
                          "berth.yaml:11:12: model 'something-else' is not defined in models"));
}

TEST(Diagnostics, TwoRunningServicesCannotShareAPort) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
services:
  new:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
  old:
    model: m
    engine: vllm
    gpus: [1]
    port: 8000
  switch-back:
    model: m
    engine: vllm
    gpus: [2]
    port: 8000
    state: stopped
)"),
              ElementsAre("berth.yaml:13:11: port 8000 is already used by running service 'new' "
                          "at berth.yaml:8:11 (give one of them another port, or set state: "
                          "stopped on one)"));
}

TEST(Diagnostics, DuplicateKeysNameBothPlaces) {
  EXPECT_THAT(Problems(R"(berth: 1
models:
  m: {source: hf://a/b}
  m: {source: hf://a/c}
services:
  s: {state: stopped, state: running}
  s: {state: stopped}
)"),
              ElementsAre("berth.yaml:4:3: model 'm' is defined twice, first at berth.yaml:3:3",
                          "berth.yaml:6:23: duplicate key 'state', first at berth.yaml:6:7",
                          "berth.yaml:7:3: service 's' is defined twice, first at "
                          "berth.yaml:6:3"));
}

// A big map (past the 16 keys looked through one by one) finds its repeats by name too.
TEST(Diagnostics, DuplicateKeysInABigMapNameBothPlaces) {
  std::string yaml = "berth: 1\nmodels:\n";
  for (int i = 0; i < 40; ++i)
    yaml += "  m" + std::to_string(i) + ": {source: hf://a/b" + std::to_string(i) + "}\n";
  yaml += "  m7: {source: hf://a/c}\n  m39: {source: hf://a/d}\n";
  EXPECT_THAT(
      Problems(yaml),
      ElementsAre("berth.yaml:43:3: model 'm7' is defined twice, first at berth.yaml:10:3",
                  "berth.yaml:44:3: model 'm39' is defined twice, first at berth.yaml:42:3"));
}

TEST(Diagnostics, EnvKeysPathsAndSnapshotFiles) {
  EXPECT_THAT(Problems(R"(berth: 1
host: {store: models, executables: {vllm: vllm, vlm: /x}}
models: {m: {source: hf://a/b}}
services:
  s:
    model: m
    engine: llama-server
    port: 8000
    executable: llama-server
    env: {VLLM-USE-V1: "1", OK: ~}
    env_file: relative.env
    llama_server: {model_file: /abs.gguf}
    health: {path: health}
)"),
              ElementsAre("berth.yaml:2:15: 'store' must be an absolute path, got 'models'",
                          "berth.yaml:2:43: 'vllm' must be an absolute path, got 'vllm'",
                          "berth.yaml:2:49: unknown key 'vlm' in executables (did you mean "
                          "'vllm'?)",
                          "berth.yaml:9:17: 'executable' must be an absolute path, got "
                          "'llama-server'",
                          "berth.yaml:10:11: 'VLLM-USE-V1' is not a valid environment variable "
                          "name (use letters, digits and '_', not starting with a digit)",
                          "berth.yaml:10:29: expected a string for 'OK', got null",
                          "berth.yaml:11:15: 'env_file' must be an absolute path, got "
                          "'relative.env'",
                          "berth.yaml:12:32: 'model_file' must be a path inside the model "
                          "snapshot, got '/abs.gguf' (e.g. model_file: "
                          "Q4_K_M/model-00001-of-00002.gguf)",
                          "berth.yaml:13:20: health 'path' must start with '/', got 'health'"));
}

// A CR/LF in the health path would end berth's probe request line early and add the manifest's
// own headers; the value is shown escaped, on one line.
TEST(Diagnostics, TheHealthPathMustBePrintableAscii) {
  EXPECT_THAT(Problems(std::string(kBase) + R"(    health: {path: "/health\r\nHost: evil"}
)"),
              ElementsAre("berth.yaml:12:20: health 'path' must be printable ASCII without "
                          "spaces or control characters (percent-encode anything else), got "
                          "'/health\\x0d\\x0aHost: evil'"));
  EXPECT_THAT(Problems(std::string(kBase) + "    health: {path: \"/a\\tb\"}\n"),
              ElementsAre(HasSubstr("got '/a\\x09b'")));
  EXPECT_THAT(Problems(std::string(kBase) + "    health: {path: \"/\\e[2J\"}\n"),
              ElementsAre(HasSubstr("got '/\\x1b[2J'")));
  EXPECT_THAT(Problems(std::string(kBase) + "    health: {path: \"/a b\"}\n"),
              ElementsAre(HasSubstr("got '/a b'")));
  EXPECT_THAT(Problems(std::string(kBase) + "    health: {path: \"/v1/health?probe=1\"}\n"),
              IsEmpty());
}

TEST(Diagnostics, TheBerthVersionIsRequiredInEveryFile) {
  EXPECT_THAT(Problems("models: {}\n"),
              ElementsAre("berth.yaml:1:1: missing 'berth: 1' (every manifest file starts with "
                          "berth: 1)"));
  EXPECT_THAT(Problems(""), ElementsAre("berth.yaml:1:1: missing 'berth: 1' (every manifest file "
                                        "starts with berth: 1)"));
  EXPECT_THAT(Problems("berth: 2\n"),
              ElementsAre("berth.yaml:1:8: unsupported berth version 2 (this berth reads version "
                          "1)"));
  EXPECT_THAT(Problems("berth: one\n"),
              ElementsAre("berth.yaml:1:8: expected an integer for 'berth', got a string"));
  EXPECT_THAT(Problems("- berth: 1\n"),
              ElementsAre("berth.yaml:1:1: expected a map at the top level, got a list (a "
                          "manifest maps berth, host, fleet, models and services)"));
}

TEST(Diagnostics, BrokenYamlIsOneDiagnosticAndOtherFilesAreStillChecked) {
  LoadResult r = LoadManifestTexts({
      {"a.yaml", "berth: 1\nmodels: {m: {source: hf://a/b}\nservices: {}\n"},
      {"b.yaml", "berth: 1\nservices:\n  s: {state: stoped}\n"},
  });
  EXPECT_THAT(testing::ToStrings(r),
              ElementsAre("a.yaml:3:1: YAML syntax error: end of map flow not found",
                          "b.yaml:3:14: bad state 'stoped' (did you mean 'stopped'?)"));
}

TEST(Diagnostics, OnlyOneYamlDocumentPerFile) {
  EXPECT_THAT(Problems("berth: 1\n---\nberth: 1\n"),
              ElementsAre("berth.yaml:2:1: a second YAML document in one file (put each document "
                          "in its own file)"));
  EXPECT_THAT(Problems("berth: 1\n---\n"), IsEmpty());  // an empty trailing document is harmless
  // After an explicit end ("...") and from a first line that is a document start, too: the
  // second read of the text (the events) runs whenever a line starts with "---" or "...".
  EXPECT_THAT(Problems("berth: 1\n...\nberth: 1\n"),
              ElementsAre("berth.yaml:3:1: a second YAML document in one file (put each document "
                          "in its own file)"));
  EXPECT_THAT(Problems("---\nberth: 1\n---\nberth: 1\n"),
              ElementsAre("berth.yaml:3:1: a second YAML document in one file (put each document "
                          "in its own file)"));
  EXPECT_THAT(Problems("--- {berth: 1}\n--- {berth: 1}\n"),
              ElementsAre(HasSubstr("a second YAML document in one file")));
}

// yaml-cpp 0.7 takes these for an empty document (and its LoadAll loops forever on them).
TEST(Diagnostics, StrayFlowIndicatorsAreSyntaxErrors) {
  EXPECT_THAT(Problems("# a comment\n  , timeout: 30m}\n"),
              ElementsAre("berth.yaml:2:3: YAML syntax error: unexpected ','"));
  EXPECT_THAT(Problems(",]"), ElementsAre("berth.yaml:1:1: YAML syntax error: unexpected ','"));
}

TEST(Diagnostics, EveryProblemIsReportedSortedByFileLineAndColumn) {
  LoadResult r = LoadManifestTexts({
      {"b.yaml", R"(berth: 1
models:
  m: {source: hf://a/b, keep: maybe}
services:
  s:
    model: n
    engine: vllm
    gpus: [0, 1]
    port: 8000
    vllm: {tensor_parallel_size: 4, gpu_memory_utilisation: 0.9}
)"},
      {"a.yaml", R"(berth: 1
host: {reserve: lots}
services:
  t:
    engine: command
    command: [/bin/x]
    port: 8000
)"},
  });
  EXPECT_THAT(testing::ToStrings(r),
              ElementsAre("b.yaml:3:31: expected a boolean (true or false) for 'keep', got a "
                          "string",
                          "b.yaml:6:12: model 'n' is not defined in models (did you mean 'm'?)",
                          "b.yaml:10:11: tensor_parallel_size 4 × pipeline_parallel_size 1 × "
                          "data_parallel_size 1 = 4, but gpus lists 2 devices (make "
                          "tensor_parallel_size × pipeline_parallel_size × data_parallel_size "
                          "equal the number of GPUs)",
                          "b.yaml:10:37: unknown key 'gpu_memory_utilisation' in vllm (did you "
                          "mean 'gpu_memory_utilization'?)",
                          "a.yaml:2:17: bad size 'lots' for 'reserve' (use e.g. 230GB, 96GiB)",
                          "a.yaml:7:11: port 8000 is already used by running service 's' at "
                          "b.yaml:9:11 (give one of them another port, or set state: stopped on "
                          "one)"));
}

TEST(Diagnostics, HostIsDefinedOnceAcrossFiles) {
  LoadResult r = LoadManifestTexts({
      {"a.yaml", "berth: 1\nhost: {store: /a}\n"},
      {"b.yaml", "berth: 1\nhost: {store: /b}\n"},
  });
  EXPECT_THAT(testing::ToStrings(r),
              ElementsAre("b.yaml:2:1: host is defined twice, first at a.yaml:2:1 (keep host in "
                          "one file)"));
  EXPECT_EQ(r.desired.host.store, "/a");
}

TEST(Robustness, AliasesThatReferToThemselvesDoNotHang) {
  std::vector<std::string> problems = Problems("berth: 1\nservices: &s {x: *s}\nmodels: &m [*m]\n");
  EXPECT_THAT(problems, ElementsAre("berth.yaml:2:15: unknown key 'x' in service 'x'",
                                    "berth.yaml:3:9: expected a map for 'models', got a list"));
}

TEST(Diagnostics, SizesAndDurationsHaveAnUpperBound) {
  EXPECT_THAT(Problems(R"(berth: 1
host: {reserve: 2EiB}
services:
  s:
    engine: command
    command: [/bin/server]
    gpu_memory: 99999999999999999999999999PB
    health: {timeout: 200000d, interval: 366d}
)"),
              ElementsAre("berth.yaml:2:17: bad size '2EiB' for 'reserve' (use e.g. 230GB, 96GiB)",
                          "berth.yaml:7:17: 'gpu_memory' must be at most 1 EiB, got "
                          "'99999999999999999999999999PB'",
                          "berth.yaml:8:23: 'timeout' must be at most 365d, got '200000d'",
                          "berth.yaml:8:42: 'interval' must be at most 365d, got '366d'"));
  EXPECT_THAT(Problems(R"(berth: 1
services:
  s:
    engine: command
    command: [/bin/server]
    gpu_memory: 1024PiB
    health: {timeout: 365d}
)"),
              IsEmpty());
}

// One anchored node of ~4 KB aliased 10000 times: about 40 MB once expanded. Refused from the
// events, before a tree is built or decoded; the test bounds the time, not the memory.
TEST(Robustness, AnAliasBombIsRefusedFast) {
  std::string yaml = "berth: 1\nx-big: &big [";
  for (int i = 0; i < 100; ++i) yaml += std::string(i ? ", " : "") + "arg-" + std::string(32, 'a');
  yaml += "]\nservices:\n  s:\n    engine: command\n    command: [/bin/server]\n    args: [";
  for (int i = 0; i < 10000; ++i) yaml += std::string(i ? ", " : "") + "*big";
  yaml += "]\n";
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> problems = Problems(yaml);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("YAML aliases expand to more than 16 MiB here"));
  EXPECT_LT(took, std::chrono::seconds(30)) << "a hang guard, not a speed test";
}

TEST(Robustness, NestedAliasesAreCountedAsExpanded) {
  // Each level doubles the one before: 2^40 nodes if expanded.
  std::string yaml = "berth: 1\nl0: &l0 [x, x]\n";
  for (int i = 1; i <= 40; ++i)
    yaml += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [*l" + std::to_string(i - 1) +
            ", *l" + std::to_string(i - 1) + "]\n";
  std::vector<std::string> problems = Problems(yaml);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("YAML aliases expand to more than"));
}

TEST(Robustness, AFewAliasesOfSmallAnchorsAreFine) {
  std::string yaml = R"(berth: 1
services:
  a:
    engine: command
    command: [/bin/server]
    env: &env {A: '1', B: '2'}
    args: &args [--x, --y]
)";
  for (int i = 0; i < 50; ++i)
    yaml += "  s" + std::to_string(i) +
            ":\n    engine: command\n    command: [/bin/server]\n    env: *env\n    args: *args\n";
  EXPECT_THAT(Problems(yaml), IsEmpty());
}

TEST(Diagnostics, StandbySleepIsVllmsOnLoopbackOrBehindAFront) {
  EXPECT_THAT(Problems(R"(berth: 1
models: {m: {source: hf://a/b}}
fronts: {9000: {hold: 1m}}
services:
  open: {model: m, engine: vllm, gpus: [0], port: 8000, standby: sleep}
  local: {model: m, engine: vllm, gpus: [1], port: 8001, bind: 127.0.0.1, standby: sleep}
  fronted: {model: m, engine: vllm, gpus: [2], port: 9000, standby: sleep}
  sg: {model: m, engine: sglang, gpus: [3], port: 8003, bind: ::1, standby: sleep}
  dev: {model: m, engine: vllm, gpus: [4], port: 8004, bind: ::1, standby: sleep,
        env: {VLLM_SERVER_DEV_MODE: '0'}}
  odd: {model: m, engine: vllm, gpus: [5], port: 8005, standby: hibernate}
  plain: {model: m, engine: vllm, gpus: [6], port: 8006, standby: stop}
)"),
              ElementsAre("berth.yaml:5:66: service 'open' has standby: sleep, which serves "
                          "vLLM's development routes (VLLM_SERVER_DEV_MODE=1: /sleep, /wake_up "
                          "and others that change the server) to whoever reaches its port, and it "
                          "binds 0.0.0.0 (set bind: 127.0.0.1, or put port 8000 behind a front "
                          "in fronts:)",
                          "berth.yaml:8:77: standby: sleep needs engine vllm (its sleep mode); "
                          "engine sglang has none berth can drive (remove standby, or set "
                          "standby: stop)",
                          "berth.yaml:9:76: standby: sleep needs VLLM_SERVER_DEV_MODE=1 (vLLM "
                          "serves its sleep routes only in dev mode), and env sets it to '0' "
                          "(remove VLLM_SERVER_DEV_MODE from env: berth sets it)",
                          "berth.yaml:11:65: bad standby 'hibernate' (use stop or sleep)"));
}

}  // namespace
}  // namespace berth
