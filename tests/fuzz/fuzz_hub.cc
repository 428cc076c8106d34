// libFuzzer target for what berth reads from the Hub (providers/hub/hub_parse.h): the revision
// info, a tree page, the Link header and the /resolve size and etag headers. The first byte picks
// the parser, the rest is the answer. Beyond "no crash, no exception, no sanitizer report", it
// checks the promise the store relies on: whatever is accepted can only name a blob of the right
// kind below a snapshot and has a bounded size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/hf_cache.h"
#include "providers/hub/hub_parse.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      berth::Result<std::string> commit = berth::ParseRevisionInfo(body);
      if (commit.ok())
        Check(berth::IsCommit(*commit));
      else
        Check(!commit.status().message().empty());
      break;
    }
    case 1: {
      std::vector<berth::HubFileEntry> out(1);  // what was there before stays
      out[0].path = "kept";
      berth::Status s = berth::ParseTreePage(body, &out);
      Check(!out.empty() && out[0].path == "kept");
      if (!s.ok()) {
        Check(out.size() == 1 && !s.message().empty());
        break;
      }
      for (size_t i = 1; i < out.size(); ++i) {
        const berth::HubFileEntry& f = out[i];
        Check(berth::IsSafeRepoPath(f.path));
        Check(f.size <= berth::kMaxRepoFileBytes);
        Check(f.is_lfs() ? berth::IsSha256Name(f.etag()) : berth::IsGitSha1Name(f.etag()));
        std::string target = berth::SnapshotLinkTarget(f.path, f.etag());
        Check(target.size() > f.etag().size() &&
              target.compare(target.size() - f.etag().size() - 6, std::string::npos,
                             "blobs/" + f.etag()) == 0);
      }
      break;
    }
    case 2: {
      std::string next = berth::ParseLinkNext(body);
      Check(next.size() <= body.size());
      break;
    }
    case 3: {
      berth::Result<uint64_t> n = berth::ParseSizeHeader(body);
      if (n.ok()) {
        Check(*n <= berth::kMaxRepoFileBytes);
        Check(!body.empty() && body.find_first_not_of("0123456789") == std::string_view::npos);
      }
      Check(berth::NormalizeEtag(body).size() <= body.size());
      break;
    }
  }
  return 0;
}
