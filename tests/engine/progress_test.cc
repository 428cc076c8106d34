#include "engine/output/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

namespace berth {
namespace {

using ::testing::HasSubstr;

PullProgress P(const std::string& repo, uint64_t done, uint64_t total, int files, int of) {
  PullProgress p;
  p.repo_id = repo;
  p.bytes_done = done;
  p.bytes_fetched = done;
  p.bytes_total = total;
  p.files_done = files;
  p.files_total = of;
  p.seconds = 2;
  return p;
}

TEST(Progress, LogLinesShowEachModelAndTheTotal) {
  std::ostringstream out;
  ProgressPrinter printer(out, /*tty=*/false, std::chrono::milliseconds(0));
  printer.Update(P("org/a", 500'000'000, 1'000'000'000, 1, 4));
  printer.Update(P("org/b", 100'000'000, 400'000'000, 0, 2));
  EXPECT_THAT(out.str(), HasSubstr("org/a  50% 500 MB / 1 GB, 250 MB/s, 1/4 files, ETA 2s"));
  EXPECT_THAT(out.str(), HasSubstr("org/b  25% 100 MB / 400 MB, 50 MB/s, 0/2 files, ETA 6s"));
  EXPECT_THAT(out.str(), HasSubstr("total  43% 600 MB / 1.4 GB, 300 MB/s, 1/6 files, ETA 2s"));
  out.str("");
  printer.Done(P("org/b", 400'000'000, 400'000'000, 2, 2));
  EXPECT_THAT(out.str(), HasSubstr("org/b 100% 400 MB / 400 MB"));
  EXPECT_THAT(out.str(), HasSubstr("total  64%"));
}

TEST(Progress, OnATerminalBarsAreRedrawnInPlace) {
  std::ostringstream out;
  ProgressPrinter printer(out, /*tty=*/true);
  printer.Update(P("org/a", 250, 1000, 0, 1));
  EXPECT_THAT(out.str(), HasSubstr("org/a [#######.......................]  25%"));
  EXPECT_THAT(out.str(), HasSubstr("\033[J"));
}

}  // namespace
}  // namespace berth
