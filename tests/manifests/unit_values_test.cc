// Manifest values that end up in a systemd unit: a control character where systemd takes the
// value as written (a newline that would add an ExecStartPre= line) is refused at its position,
// naming the field; env cannot override the variables berth sets itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::Problems;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A newline followed by a directive, written as a YAML double-quoted scalar.
constexpr const char* kInjected = "\"x\\nExecStartPre=/bin/touch /tmp/pwned\"";

std::string Vllm(const std::string& extra, const std::string& vllm_extra = "") {
  return std::string(R"(berth: 1
models:
  m:
    source: hf://org/m
services:
  svc:
    model: m
    engine: vllm
    gpus: [0]
    port: 8000
    vllm: {tensor_parallel_size: 1)") +
         vllm_extra + "}\n" + extra;
}

std::string Llama(const std::string& llama_block) {
  return std::string(R"(berth: 1
models:
  m:
    source: hf://org/m
services:
  svc:
    model: m
    engine: llama-server
    port: 8000
    llama_server: )") +
         llama_block + "\n";
}

const char* kNewline = "contains a newline; a unit file value cannot";

TEST(UnitValues, ANewlineInServedModelNameIsRefusedAtItsPosition) {
  auto p = Problems(Vllm("", std::string(", served_model_name: ") + kInjected));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], HasSubstr("berth.yaml:11:56: 'served_model_name' "));
  EXPECT_THAT(p[0], HasSubstr(kNewline));
}

TEST(UnitValues, ANewlineInSglangServedModelNameIsRefused) {
  auto p = Problems(std::string(R"(berth: 1
models:
  m:
    source: hf://org/m
services:
  svc:
    model: m
    engine: sglang
    gpus: [0]
    port: 8000
    sglang:
      tp_size: 1
      served_model_name: )") +
                    kInjected + "\n");
  EXPECT_THAT(
      p, ElementsAre(HasSubstr("berth.yaml:13:26: 'served_model_name' " + std::string(kNewline))));
}

TEST(UnitValues, ANewlineInTheLlamaAliasOrModelFileIsRefused) {
  EXPECT_THAT(Problems(Llama(std::string("{alias: ") + kInjected + ", model_file: m.gguf}")),
              ElementsAre(HasSubstr("berth.yaml:10:27: 'alias' " + std::string(kNewline))));
  EXPECT_THAT(Problems(Llama("{model_file: \"a\\nb.gguf\"}")),
              ElementsAre(HasSubstr("berth.yaml:10:32: 'model_file' " + std::string(kNewline))));
}

TEST(UnitValues, ANewlineInEnvFileIsRefused) {
  auto p = Problems(Vllm(std::string("    env_file: \"/etc/x\\nExecStartPre=/bin/touch /x\"\n")));
  EXPECT_THAT(p, ElementsAre(HasSubstr("berth.yaml:12:15: 'env_file' " + std::string(kNewline))));
}

TEST(UnitValues, EnvFileMustNotEndWithABackslashOrASpace) {
  EXPECT_THAT(Problems(Vllm("    env_file: '/etc/x\\'\n")),
              ElementsAre(HasSubstr("berth.yaml:12:15: 'env_file' must not end with")));
  EXPECT_THAT(Problems(Vllm("    env_file: '/etc/x '\n")),
              ElementsAre(HasSubstr("berth.yaml:12:15: 'env_file' must not end with")));
}

// An env value or an argument is a quoted word in the unit: a newline is escaped there and
// reaches the process as written, so only NUL (which systemd cannot unescape) is refused.
TEST(UnitValues, ANulInAnEnvValueIsRefusedANewlineIsNot) {
  auto p = Problems(Vllm("    env:\n      A: \"x\\0y\"\n      B: \"x\\ny\"\n"));
  EXPECT_THAT(p, ElementsAre(HasSubstr("berth.yaml:13:10: 'A' contains a NUL byte; a unit file "
                                       "value cannot")));
}

TEST(UnitValues, ANulInArgsIsRefusedAtItsItem) {
  auto p = Problems(Vllm("    args: [--ok, \"a\\rb\", \"c\\x00d\", \"e\\tf\", \"g\\x7fh\", " +
                         std::string(kInjected) + "]\n"));
  EXPECT_THAT(p, ElementsAre(HasSubstr("berth.yaml:12:26: 'args' contains a NUL byte")));
}

TEST(UnitValues, ANewlineInTheCommandsExecutableBindOrStoreIsRefused) {
  auto command = Problems(std::string(R"(berth: 1
services:
  svc:
    engine: command
    command: ["/bin/server\nExecStartPre=/bin/touch /tmp/pwned", )") +
                          kInjected + "]\n");
  EXPECT_THAT(command,
              ElementsAre(HasSubstr("berth.yaml:5:15: 'command' " + std::string(kNewline))));
  EXPECT_THAT(Problems(Vllm("    executable: \"/opt/vllm\\n\"\n")),
              ElementsAre(HasSubstr("berth.yaml:12:17: 'executable' " + std::string(kNewline))));
  EXPECT_THAT(Problems(Vllm("    bind: \"0.0.0.0\\n\"\n")),
              ElementsAre(HasSubstr("berth.yaml:12:11: 'bind' " + std::string(kNewline))));
  EXPECT_THAT(Problems("berth: 1\nhost:\n  store: \"/models\\nX=1\"\n"),
              ElementsAre(HasSubstr("berth.yaml:3:10: 'store' " + std::string(kNewline))));
  EXPECT_THAT(Problems("berth: 1\nhost:\n  executables: {vllm: \"/opt/vllm\\n\"}\n"),
              ElementsAre(HasSubstr("berth.yaml:3:23: 'vllm' " + std::string(kNewline))));
}

TEST(UnitValues, SpecifiersAndDollarsAreAcceptedAndLeftToTheUnitWriter) {
  EXPECT_THAT(Problems(Vllm("    args: ['%h', '%n', '$HOME', '${X}']\n    env: {A: '%h $X'}\n",
                            ", served_model_name: '%n$X'")),
              IsEmpty());
}

TEST(UnitValues, EnvCannotSetWhatBerthSetsItself) {
  auto p =
      Problems(Vllm("    env:\n      CUDA_VISIBLE_DEVICES: '3'\n      HF_HUB_OFFLINE: '0'\n"
                    "      HF_HUB_CACHE: /tmp\n      OTHER: '1'\n"));
  EXPECT_THAT(p, ElementsAre(HasSubstr("berth.yaml:13:7: 'CUDA_VISIBLE_DEVICES' is set by berth"),
                             HasSubstr("berth.yaml:14:7: 'HF_HUB_OFFLINE' is set by berth"),
                             HasSubstr("berth.yaml:15:7: 'HF_HUB_CACHE' is set by berth")));
  EXPECT_THAT(p[0], HasSubstr("from 'gpus'"));
  EXPECT_THAT(p[2], HasSubstr("from the store"));
}

}  // namespace
}  // namespace berth
