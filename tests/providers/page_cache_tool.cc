// page_cache_tool evict|prewarm|residency FILE...: berth's page-cache code
// (providers/host/page_cache.h) from the command line, for tests/bench/switch/prewarm.sh. Prints
// one line: what it did, the bytes, the seconds.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "providers/host/page_cache.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s evict|prewarm|residency FILE...\n", argv[0]);
    return 2;
  }
  std::string what = argv[1];
  std::vector<std::string> files(argv + 2, argv + argc);
  auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (what == "evict") {
    berth::Status s = berth::Evict(files);
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
    std::printf("evicted %zu files in %.3f s\n", files.size(), seconds());
  } else if (what == "prewarm") {
    auto read = berth::Prewarm(files);
    if (!read.ok()) return std::fprintf(stderr, "%s\n", read.status().message().c_str()), 1;
    std::printf("prewarmed %llu bytes in %.3f s\n", static_cast<unsigned long long>(*read),
                seconds());
  } else if (what == "residency") {
    auto r = berth::PageCacheResidency(files);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().message().c_str()), 1;
    std::printf("resident %llu of %llu bytes\n", static_cast<unsigned long long>(r->resident_bytes),
                static_cast<unsigned long long>(r->bytes));
  } else {
    std::fprintf(stderr, "unknown command '%s' (evict, prewarm, residency)\n", what.c_str());
    return 2;
  }
  return 0;
}
