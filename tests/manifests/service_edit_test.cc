// SetServiceSettings and DeclaringFile: a candidate's settings written into the manifest file that
// declares the service as the smallest text edit (comments, blank lines and other services kept
// byte for byte), places it cannot edit refused by name, and the edited file loading with the
// service changed.
#include "manifests/service_edit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Two services in block style and one in flow style, with comments and a blank line between.
constexpr const char* kManifest = R"(# the test host
berth: 1
models:
  qwen:
    source: hf://Qwen/Qwen3-8B  # the chat model
  small:
    source: hf://ggml-org/tiny
services:
  chat:
    model: qwen
    engine: vllm
    gpus: [0, 1]  # two cards
    port: 8001
    vllm:
      tensor_parallel_size: 2   # one per card
      gpu_memory_utilization: 0.9

  # a small llama-server beside it
  tiny:
    model: small
    engine: llama-server
    gpus: [2]
    port: 8002
    llama_server: {model_file: model.gguf, n_gpu_layers: 0, ctx_size: 2048, parallel: 4, alias: a}
  embed: {model: small, engine: llama-server, gpus: [3], port: 8003, llama_server: {model_file: e.gguf}}
)";

// kManifest with `from` (which must be there once) replaced by `to`.
std::string With(const std::string& from, const std::string& to, std::string text = kManifest) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

Result<std::string> Set(const std::string& service, std::vector<TuneSetting> settings,
                        const std::string& text = kManifest) {
  return SetServiceSettings(text, "berth.yaml", service, settings);
}

TEST(ServiceEdit, AScalarInABlockMapIsReplacedAndItsCommentKept) {
  Result<std::string> out = Set("chat", {{"vllm.tensor_parallel_size", "4"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("tensor_parallel_size: 2   # one", "tensor_parallel_size: 4   # one"));
}

TEST(ServiceEdit, AScalarInAFlowMapIsReplacedInItsLine) {
  Result<std::string> out = Set("tiny", {{"llama_server.parallel", "1"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("parallel: 4, alias", "parallel: 1, alias"));
}

TEST(ServiceEdit, AFlowListIsReplacedAsAnOperatorWritesIt) {
  Result<std::string> out = Set("chat", {{"gpus", " [0, 1, 2, 3] "}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("gpus: [0, 1]  # two cards", "gpus: [0, 1, 2, 3]  # two cards"));
}

TEST(ServiceEdit, ANewKeyGoesAfterTheBlockMapsLastLineBeforeTheCommentOfTheNextService) {
  Result<std::string> out =
      Set("chat", {{"vllm.enable_expert_parallel", "true"}, {"vllm.served_model_name", "\"q\""}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("gpu_memory_utilization: 0.9\n",
                       "gpu_memory_utilization: 0.9\n"
                       "      enable_expert_parallel: true\n"
                       "      served_model_name: \"q\"\n"));
}

TEST(ServiceEdit, ANewKeyGoesBeforeAFlowMapsBrace) {
  Result<std::string> out = Set("tiny", {{"llama_server.jinja", "true"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("alias: a}", "alias: a, jinja: true}"));
}

TEST(ServiceEdit, AMissingMapIsMadeInBlockStyleUnderABlockEntry) {
  Result<std::string> out = Set("chat", {{"health.timeout", "30m"}, {"health.interval", "2s"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("gpu_memory_utilization: 0.9\n",
                       "gpu_memory_utilization: 0.9\n"
                       "    health:\n"
                       "      timeout: 30m\n"
                       "      interval: 2s\n"));
}

TEST(ServiceEdit, AMissingMapIsMadeInFlowStyleUnderAFlowEntry) {
  Result<std::string> out = Set("embed", {{"llama_server.threads", "2"}, {"health.timeout", "5m"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("{model_file: e.gguf}}",
                       "{model_file: e.gguf, threads: 2}, health: {timeout: 5m}}"));
}

TEST(ServiceEdit, ANestedMapIsInsertedAndABlockMapReplacedByItsFlowLine) {
  Result<std::string> out =
      Set("chat", {{"vllm.speculative", "{method: mtp, num_speculative_tokens: 1}"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, With("gpu_memory_utilization: 0.9\n",
                       "gpu_memory_utilization: 0.9\n"
                       "      speculative: {method: mtp, num_speculative_tokens: 1}\n"));

  const std::string block = R"(berth: 1
services:
  chat:
    gpus:
    - 0
    - 1
    vllm:
      speculative:  # drafts
        method: eagle3
        # three tokens
        num_speculative_tokens: 3

      tensor_parallel_size: 2
)";
  out = Set(
      "chat",
      {{"vllm.speculative", "{method: mtp, num_speculative_tokens: 1}"}, {"gpus", "[0, 1, 2, 3]"}},
      block);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, R"(berth: 1
services:
  chat:
    gpus: [0, 1, 2, 3]
    vllm:
      speculative: {method: mtp, num_speculative_tokens: 1}  # drafts

      tensor_parallel_size: 2
)");
}

TEST(ServiceEdit, AnEmptyValueAndAnEmptyIntermediateAreFilledIn) {
  const std::string text = "services:\n  s:\n    vllm:  # later\n    args:\n";
  Result<std::string> out =
      Set("s", {{"vllm.tensor_parallel_size", "2"}, {"args", "[--enforce-eager]"}}, text);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out,
            "services:\n  s:\n    vllm: {tensor_parallel_size: 2}  # later\n"
            "    args: [--enforce-eager]\n");
}

TEST(ServiceEdit, ALineAddedToAFileWithCrLfEndsItsLinesTheSame) {
  Result<std::string> out =
      Set("s", {{"port", "2"}, {"vllm.x", "1"}}, "services:\r\n  s:\r\n    port: 1\r\n# end\r\n");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "services:\r\n  s:\r\n    port: 2\r\n    vllm:\r\n      x: 1\r\n# end\r\n");
}

TEST(ServiceEdit, TheEditedFileLoadsWithTheServiceChanged) {
  Result<std::string> out = Set("tiny", {{"llama_server.parallel", "1"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  LoadResult loaded = LoadManifestTexts({{"berth.yaml", *out}});
  ASSERT_THAT(testing::ToStrings(loaded), IsEmpty());
  EXPECT_EQ(loaded.desired.services.at("tiny").llama.parallel, 1);
  EXPECT_EQ(loaded.desired.services.at("embed").llama.model_file, "e.gguf");

  out = Set("chat", {{"gpus", "[0, 1, 4, 5]"},
                     {"vllm.tensor_parallel_size", "4"},
                     {"vllm.served_model_name", "'qwen-chat'"}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  loaded = LoadManifestTexts({{"berth.yaml", *out}});
  ASSERT_THAT(testing::ToStrings(loaded), IsEmpty());
  const ServiceSpec& chat = loaded.desired.services.at("chat");
  EXPECT_EQ(chat.vllm.tensor_parallel_size, 4);
  EXPECT_EQ(chat.gpus, (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(chat.vllm.served_model_name, "qwen-chat");
  EXPECT_EQ(loaded.desired.services.at("tiny").llama.parallel, 4);
}

TEST(ServiceEdit, NoSettingsIsTheSameText) {
  Result<std::string> out = Set("chat", {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, kManifest);
}

// The message of the error `out` holds, with its code checked.
std::string Refusal(const Result<std::string>& out, Status::Code code) {
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), code) << out.status().message();
  return out.status().message();
}

TEST(ServiceEdit, PlacesItCannotEditAreRefusedByNameAndLine) {
  EXPECT_EQ(Refusal(Set("nope", {{"gpus", "[0]"}}), Status::Code::kNotFound),
            "service 'nope' is not declared in berth.yaml");
  EXPECT_EQ(Refusal(Set("chat", {{"gpus.first", "0"}}), Status::Code::kInvalidArgument),
            "berth.yaml:12: cannot set 'gpus.first' of service 'chat': 'gpus' is a list; a "
            "setting's path goes through maps only");
  EXPECT_EQ(Refusal(Set("chat", {{"port.x", "0"}}), Status::Code::kInvalidArgument),
            "berth.yaml:13: cannot set 'port.x' of service 'chat': 'port' is an integer; a "
            "setting's path goes through maps only");

  EXPECT_EQ(Refusal(Set("s", {{"port", "1"}}, "services:\n  s: {}\n  s: {}\n"),
                    Status::Code::kInvalidArgument),
            "berth.yaml:3: service 's' is written twice");
  const std::string twice = "services:\n  s:\n    vllm: {a: 1}\n    vllm: {b: 2}\n";
  EXPECT_EQ(Refusal(Set("s", {{"vllm.a", "2"}}, twice), Status::Code::kInvalidArgument),
            "berth.yaml:4: cannot set 'vllm.a' of service 's': 'vllm' is written twice, first "
            "at berth.yaml:3");
  const std::string alias = "x: &v {a: 1}\nservices:\n  s:\n    vllm: *v\n";
  EXPECT_EQ(Refusal(Set("s", {{"vllm.a", "2"}}, alias), Status::Code::kInvalidArgument),
            "berth.yaml:4: cannot set 'vllm.a' of service 's': 'vllm' is an alias (*name); write "
            "the value out");
  const std::string anchor = "services:\n  s:\n    vllm: &v {a: 1}\n  t:\n    vllm: *v\n";
  EXPECT_EQ(Refusal(Set("s", {{"vllm.a", "2"}}, anchor), Status::Code::kInvalidArgument),
            "berth.yaml:3: cannot set 'vllm.a' of service 's': 'vllm' carries an anchor or a tag");
  EXPECT_THAT(Refusal(Set("s", {{"vllm.a", "2"}}, "services:\n  s: {}\n---\nx: 1\n"),
                      Status::Code::kInvalidArgument),
              HasSubstr("berth.yaml:3:1: a second YAML document in one file"));
}

TEST(ServiceEdit, AValueThatIsNotOneFlowNodeIsRefusedNamingTheSetting) {
  EXPECT_THAT(Refusal(Set("chat", {{"gpus", "[0, 1"}}), Status::Code::kInvalidArgument),
              HasSubstr("setting 'gpus': '[0, 1' is not one YAML flow value (value:1:"));
  EXPECT_EQ(
      Refusal(Set("chat", {{"vllm.speculative", "method: mtp"}}), Status::Code::kInvalidArgument),
      "setting 'vllm.speculative': 'method: mtp' is not one YAML flow value (a block "
      "collection; write it in flow style, [a, b] or {k: v})");
  EXPECT_EQ(
      Refusal(Set("chat", {{"vllm.served_model_name", "a, b"}}), Status::Code::kInvalidArgument),
      "setting 'vllm.served_model_name': 'a, b' is not one YAML flow value (it does not end "
      "as one value; quote it)");
  EXPECT_EQ(Refusal(Set("chat", {{"gpus", ""}}), Status::Code::kInvalidArgument),
            "setting 'gpus': '' is not one YAML flow value (it is empty)");
  EXPECT_EQ(Refusal(Set("chat", {{"vllm..x", "1"}}), Status::Code::kInvalidArgument),
            "setting 'vllm..x': not a dotted path of keys (vllm.tensor_parallel_size)");
  EXPECT_EQ(Refusal(Set("chat", {{"vllm", "{}"}, {"vllm.x", "1"}}), Status::Code::kInvalidArgument),
            "settings 'vllm' and 'vllm.x' overlap");
}

// Two texts the edit gets wrong, and the check of the parsed result says so instead of returning
// them: an insertion before a flow map's '}' that a comment hides (the new key is inside the
// comment), and one after a block scalar's last line that looks like a comment (the scalar
// loses that line).
TEST(ServiceEdit, AnEditThatMissesOrChangesMoreIsAnInternalError) {
  const std::string hidden = "services:\n  s:\n    vllm: {a: 1  # one\n      }\n";
  EXPECT_EQ(Refusal(Set("s", {{"vllm.b", "2"}}, hidden), Status::Code::kInternal),
            "the edited file does not hold 'vllm.b' as given");
  const std::string script = "services:\n  s:\n    cmd: |\n      run\n      # not a comment\n";
  EXPECT_EQ(Refusal(Set("s", {{"port", "8000"}}, script), Status::Code::kInternal),
            "the edit changed more than the settings: 'services.s.cmd' differs");
}

// A fresh folder under the system temp dir, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("berth-service-edit-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return (path_ / name).string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(DeclaringFile, IsTheFolderFileWhoseServicesNameIt) {
  TempDir dir;
  dir.Write("10-models.yaml", "berth: 1\nmodels:\n  m: {source: hf://a/b}\n");
  const std::string services = dir.Write(
      "20-services.yml", "berth: 1\nservices:\n  s: {model: m, engine: vllm, port: 8000}\n");
  dir.Write("notes.txt", "services:\n  t: {}\n");
  Result<std::string> file = DeclaringFile(dir.path(), "s");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(*file, services);
  EXPECT_EQ(DeclaringFile(services, "s").value(), services);

  EXPECT_EQ(Refusal(DeclaringFile(dir.path(), "t"), Status::Code::kNotFound),
            "service 't' is not declared in " + dir.path());
  EXPECT_EQ(Refusal(DeclaringFile(dir.path() + "/none", "s"), Status::Code::kInvalidArgument),
            dir.path() + "/none: no such file or folder (pass a manifest file or a folder)");
  const std::string again = dir.Write("30-again.yaml", "berth: 1\nservices:\n  s: {}\n");
  EXPECT_EQ(Refusal(DeclaringFile(dir.path(), "s"), Status::Code::kInvalidArgument),
            "service 's' is declared in both " + services + " and " + again);
}

}  // namespace
}  // namespace berth
