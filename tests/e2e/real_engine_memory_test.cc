// What berth derives of a llama-server's memory from its GGUF file (planners/llama_claim.h)
// against llama.cpp's own figures: llama-fit-params (built beside llama-server) loads the same
// generated model on the CPU and prints its memory breakdown (model, context = KV cache,
// compute, MiB); berth's model and KV figures must agree with it at several -c/-np settings.
// No systemd, no GPU: the real llama.cpp's arithmetic on the real file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/gguf_header.h"
#include "planners/llama_claim.h"
#include "tests/support/systemd_sandbox.h"

namespace berth::testing {
namespace {

constexpr double kMiB = 1 << 20;

struct Breakdown {
  double model = -1, context = -1, compute = -1;  // MiB
};

// "common_memory_breakdown_print: |   - Host   |   141 =    71 +       4 +      66   |"
Breakdown HostBreakdown(const std::string& output) {
  static const std::regex line(R"(- Host\s*\|\s*(\d+)\s*=\s*(\d+)\s*\+\s*(\d+)\s*\+\s*(\d+))");
  std::smatch m;
  Breakdown b;
  if (std::regex_search(output, m, line)) {
    b.model = std::stod(m[2]);
    b.context = std::stod(m[3]);
    b.compute = std::stod(m[4]);
  }
  return b;
}

class RealEngineMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fit_ = std::filesystem::path(LLAMA_SERVER_BIN).parent_path() / "llama-fit-params";
    ASSERT_TRUE(std::filesystem::exists(fit_))
        << fit_ << " is missing: .ci/setup --tests builds it with llama-server";
    dir_ = std::filesystem::temp_directory_path() / ("berth-memory-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string MakeGguf(const std::vector<std::string>& shape) {
    std::string out = (dir_ / "m.gguf").string();
    std::vector<std::string> argv = {
        "/usr/bin/python3",
        std::string(BERTH_SOURCE_DIR) + "/tests/real_engine/make_gguf.py",
        "--llama-src",
        LLAMA_SRC,
        "--out",
        out};
    argv.insert(argv.end(), shape.begin(), shape.end());
    CommandResult r = RunCommand(argv, {}, std::chrono::seconds(120));
    EXPECT_TRUE(r.ok()) << r.output << r.error;
    return out;
  }

  static GgufModel Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string head(kMaxGgufModelBytes, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    return ParseGgufModel(head);
  }

  std::filesystem::path fit_, dir_;
};

TEST_F(RealEngineMemoryTest, ModelAndKvBytesAgreeWithLlamaFitParamsOnTheCpu) {
  // 8 layers, embd 512, 8 heads of 64, 2 KV heads (GQA), vocab 32,000: 8 KiB of f16 KV per
  // token; contexts whose per-slot padding shows (9000 over 7 slots holds 10,752 tokens).
  const std::string file = MakeGguf({"--embd", "512", "--layers", "8", "--ff", "1024", "--heads",
                                     "8", "--kv", "2", "--ctx", "4096"});
  const GgufModel m = Read(file);
  ASSERT_EQ(m.problem, "");
  struct Setting {
    uint64_t ctx;
    int parallel;
  };
  for (const Setting& s : std::vector<Setting>{{2048, 2}, {16384, 1}, {9000, 7}, {32768, 4}}) {
    CommandResult r = RunCommand({fit_.string(), "-m", file, "-c", std::to_string(s.ctx), "-np",
                                  std::to_string(s.parallel), "-v"},
                                 {}, std::chrono::seconds(60));
    ASSERT_TRUE(r.ok()) << r.output << r.error;
    const Breakdown fit = HostBreakdown(r.output);
    ASSERT_GE(fit.model, 0) << "no memory breakdown in:\n" << r.output;
    LlamaServerOptions o;
    o.ctx_size = s.ctx;
    o.parallel = s.parallel;
    std::string why;
    std::optional<LlamaClaim> c = DeriveLlamaClaim(o, m, 1, &why);
    ASSERT_TRUE(c) << why;
    // llama-fit-params prints whole MiB (rounded down): within 3% or 1 MiB.
    const double model = static_cast<double>(c->model_bytes) / kMiB;
    const double kv = static_cast<double>(c->all_kv) / kMiB;
    const std::string at = "-c " + std::to_string(s.ctx) + " -np " + std::to_string(s.parallel);
    EXPECT_NEAR(model, fit.model, std::max(1.0, fit.model * 0.03)) << at;
    EXPECT_NEAR(kv, fit.context, std::max(1.0, fit.context * 0.03)) << at;
    // The compute buffer on the CPU is mostly the logits (n_ubatch × n_vocab floats), which
    // berth counts; the rest grows with the context (a few MiB here).
    const double logits = 512.0 * static_cast<double>(m.vocab_size) * 4 / kMiB;
    EXPECT_GE(fit.compute + 1, logits) << at;
    EXPECT_LE(fit.compute, logits * 1.25) << at;
    std::cout << at << ": berth model " << model << " MiB, KV " << kv
              << " MiB; llama-fit-params model " << fit.model << ", context " << fit.context
              << ", compute " << fit.compute << "\n";
  }
}

}  // namespace
}  // namespace berth::testing
