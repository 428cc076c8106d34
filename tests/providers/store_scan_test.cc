#include "providers/store/store_scan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "tests/providers/temp_dir.h"
#include "tests/support/gguf_writer.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kC1 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
const std::string kC2 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
const std::string kC3 = "ccccccccccccccccccccccccccccccccccccccc3";

/// A Hugging Face cache in a scratch directory.
class Cache {
 public:
  void Blob(const std::string& repo, const std::string& name, size_t size) {
    dir.Write(repo + "/blobs/" + name, std::string(size, 'x'));
  }
  /// snapshots/<commit>/<file> -> ../../blobs/<blob>, as huggingface_hub writes it.
  void File(const std::string& repo, const std::string& commit, const std::string& file,
            const std::string& blob) {
    std::string up = "../../";
    for (char c : file)
      if (c == '/') up += "../";
    dir.Link(up + "blobs/" + blob, repo + "/snapshots/" + commit + "/" + file);
  }
  void Ref(const std::string& repo, const std::string& name, const std::string& content) {
    dir.Write(repo + "/refs/" + name, content);
  }
  Result<ObservedStore> Scan() { return ScanStore(dir.path()); }

  testing::TempDir dir;
};

const ObservedRevision* Find(const ObservedStore& s, const std::string& repo,
                             const std::string& commit) {
  for (const auto& r : s.repos)
    if (r.repo_id == repo)
      for (const auto& rev : r.revisions)
        if (rev.commit == commit) return &rev;
  return nullptr;
}

TEST(ScanStore, ACompleteRevisionAndABrokenOneSharingABlob) {
  Cache c;
  const std::string repo = "models--org--tiny";
  c.Blob(repo, "config", 10);
  c.Blob(repo, "weights1", 100);
  c.Blob(repo, "weights2", 1000);
  c.Blob(repo, "weights3.incomplete", 7);  // a download in progress
  c.Ref(repo, "main", kC1);                // no newline, as huggingface_hub writes it
  c.Ref(repo, "pr/1", kC2 + "\n");         // nested, one newline tolerated
  c.File(repo, kC1, "config.json", "config");
  c.File(repo, kC1, "model.safetensors", "weights1");
  c.File(repo, kC1, "sub/dir/config.json", "config");  // the same blob twice: counted once
  c.File(repo, kC2, "config.json", "config");          // shared with kC1: counted in both
  c.File(repo, kC2, "model.safetensors", "weights2");
  c.File(repo, kC2, "extra.safetensors", "weights3");  // dangling: only the .incomplete exists

  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->exists);
  EXPECT_GT(s->total_bytes, 0u);
  EXPECT_LE(s->free_bytes, s->total_bytes);
  ASSERT_EQ(s->repos.size(), 1u);
  EXPECT_EQ(s->repos[0].repo_id, "org/tiny");
  ASSERT_EQ(s->repos[0].revisions.size(), 2u);

  const ObservedRevision& r1 = s->repos[0].revisions[0];
  EXPECT_EQ(r1.commit, kC1);
  EXPECT_THAT(r1.refs, ElementsAre("main"));
  EXPECT_TRUE(r1.complete);
  EXPECT_EQ(r1.bytes_present, 110u);
  EXPECT_EQ(r1.bytes_total, 110u);

  const ObservedRevision& r2 = s->repos[0].revisions[1];
  EXPECT_EQ(r2.commit, kC2);
  EXPECT_THAT(r2.refs, ElementsAre("pr/1"));
  EXPECT_FALSE(r2.complete);
  EXPECT_EQ(r2.bytes_present, 10u + 1000u + 7u) << "the partial goes to the incomplete revision";
  EXPECT_EQ(r2.bytes_total, std::nullopt);
}

// The preflight's facts: config.json's architectures (or what is wrong with it) and the bytes of
// the safetensors, for a complete snapshot.
TEST(ScanStore, ReadsConfigArchitecturesAndSumsTheSafetensors) {
  Cache c;
  const std::string repo = "models--org--tiny";
  c.dir.Write(repo + "/blobs/cfg", R"({"architectures": ["LlamaForCausalLM"]})");
  c.Blob(repo, "w1", 100);
  c.Blob(repo, "w2", 1000);
  c.Blob(repo, "tok", 10);
  c.File(repo, kC1, "config.json", "cfg");
  c.File(repo, kC1, "model-1.safetensors", "w1");
  c.File(repo, kC1, "sub/model-2.safetensors", "w2");
  c.File(repo, kC1, "tokenizer.json", "tok");
  c.dir.Write(repo + "/blobs/bad", "{\"architectures\": ");
  c.File(repo, kC2, "config.json", "bad");
  c.File(repo, kC3, "tokenizer.json", "tok");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ObservedRevision* good = Find(*s, "org/tiny", kC1);
  ASSERT_TRUE(good && good->config);
  EXPECT_THAT(good->config->architectures, ElementsAre("LlamaForCausalLM"));
  EXPECT_EQ(good->config->problem, "");
  EXPECT_EQ(good->weights_bytes, 1100u);
  const ObservedRevision* bad = Find(*s, "org/tiny", kC2);
  ASSERT_TRUE(bad && bad->config);
  EXPECT_EQ(bad->config->problem, "is not JSON");
  EXPECT_FALSE(bad->weights_bytes.has_value());
  const ObservedRevision* none = Find(*s, "org/tiny", kC3);
  ASSERT_TRUE(none && none->config);
  EXPECT_EQ(none->config->problem, "is missing from the snapshot");
}

// llama.cpp's files: the header of each .gguf file of a complete snapshot, read through the real
// file system as far as its first MiB (a large file is not refused for its size).
TEST(ScanStore, ReadsTheHeaderOfEachGgufFile) {
  Cache c;
  const std::string repo = "models--org--gguf";
  std::string gguf = std::string("GGUF") + std::string("\x03\0\0\0", 4) + std::string(8, '\0') +
                     std::string("\x01\0\0\0\0\0\0\0", 8) + std::string("\x14\0\0\0\0\0\0\0", 8) +
                     "general.architecture" + std::string("\x08\0\0\0", 4) +
                     std::string("\x05\0\0\0\0\0\0\0", 8) + "llama";
  c.dir.Write(repo + "/blobs/q4", gguf + std::string(3 << 20, 'w'));  // 3 MiB of "weights"
  c.dir.Write(repo + "/blobs/html", "<html>rate limited</html>");
  c.File(repo, kC1, "Q4/m.gguf", "q4");
  c.File(repo, kC1, "m-f16.gguf", "html");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ObservedRevision* r = Find(*s, "org/gguf", kC1);
  ASSERT_TRUE(r && r->gguf) << "no headers read";
  ASSERT_EQ(r->gguf->size(), 2u);
  EXPECT_EQ(r->gguf->at("Q4/m.gguf"), (GgufHeader{3, "llama", "", {}}));
  EXPECT_THAT(r->gguf->at("m-f16.gguf").problem, ::testing::HasSubstr("is not a GGUF file"));
}

// The figures of a llama-server's model file (ReadGgufModels): its metadata runs past the first
// MiB (a tokenizer of 150,000 tokens), so berth reads further, for the file named only.
TEST(ScanStore, ReadsTheGgufModelOfTheNamedFileBeyondItsFirstMiB) {
  Cache c;
  const std::string repo = "models--org--gguf";
  testing::GgufWriter w = testing::LlamaShaped(256, 4, 512, 4, 2, 150000, 2048, 0);
  const std::string head = w.Bytes();
  ASSERT_GT(head.size(), size_t{1} << 20);
  c.dir.Write(repo + "/blobs/f32", head + std::string(1 << 20, 'w'));
  c.File(repo, kC1, "m.gguf", "f32");
  c.File(repo, kC1, "other.gguf", "f32");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  ReadGgufModels({{"org/gguf", {"m.gguf", "absent.gguf"}}}, PosixStoreFs(), &*s);
  const ObservedRevision* r = Find(*s, "org/gguf", kC1);
  ASSERT_TRUE(r && r->gguf);
  ASSERT_TRUE(r->gguf->at("m.gguf").model);
  const GgufModel& m = *r->gguf->at("m.gguf").model;
  EXPECT_EQ(m.problem, "");
  EXPECT_EQ(m.vocab_size, 150000u);
  EXPECT_EQ(m.input_bytes, 256u * 150000 * 4);
  EXPECT_FALSE(r->gguf->at("other.gguf").model);
  EXPECT_FALSE(r->gguf->count("absent.gguf"));
}

TEST(ScanStore, RepoIdsComeFromDirectoryNamesAndOtherKindsAreIgnored) {
  Cache c;
  c.Blob("models--meta-llama--Llama-3.1-8B", "b", 1);
  c.File("models--meta-llama--Llama-3.1-8B", kC1, "config.json", "b");
  c.Blob("models--gpt2", "b", 2);
  c.File("models--gpt2", kC1, "config.json", "b");
  c.Blob("datasets--org--data", "b", 3);
  c.Blob("spaces--org--app", "b", 3);
  c.dir.MkDir(".locks/models--gpt2");
  c.dir.Write("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->repos.size(), 2u);
  EXPECT_EQ(s->repos[0].repo_id, "gpt2");
  EXPECT_EQ(s->repos[1].repo_id, "meta-llama/Llama-3.1-8B");
}

TEST(ScanStore, ADownloadThatHasNotMadeItsSnapshotYetShowsUpUnderItsRef) {
  Cache c;
  const std::string repo = "models--org--big";
  c.Blob(repo, "w.incomplete", 4096);
  c.Ref(repo, "main", kC3);  // huggingface_hub writes the ref before the first blob completes
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ObservedRevision* r = Find(*s, "org/big", kC3);
  ASSERT_NE(r, nullptr);
  EXPECT_THAT(r->refs, ElementsAre("main"));
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->bytes_present, 4096u);
}

TEST(ScanStore, PartialsWithNoIncompleteRevisionGoToARevisionWithoutCommit) {
  Cache c;
  const std::string repo = "models--org--big";
  c.Blob(repo, "w.incomplete", 50);
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->repos.size(), 1u);
  ASSERT_EQ(s->repos[0].revisions.size(), 1u);
  EXPECT_EQ(s->repos[0].revisions[0].commit, "");
  EXPECT_FALSE(s->repos[0].revisions[0].complete);
  EXPECT_EQ(s->repos[0].revisions[0].bytes_present, 50u);

  c.Blob(repo, "cfg", 5);
  c.File(repo, kC1, "config.json", "cfg");  // complete: partials are not its bytes
  s = c.Scan();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->repos[0].revisions.size(), 2u);
  EXPECT_EQ(Find(*s, "org/big", kC1)->bytes_present, 5u);
  EXPECT_EQ(Find(*s, "org/big", "")->bytes_present, 50u);
}

TEST(ScanStore, BerthsRecordDecidesCompletenessAndTotal) {
  Cache c;
  const std::string repo = "models--org--rec";
  const std::string cfg(40, 'c'), w(64, 'e'), t(40, 'f');  // a git blob id, an LFS sha256
  c.Blob(repo, cfg, 5);
  c.Blob(repo, w, 20);
  c.File(repo, kC1, "config.json", cfg);
  c.File(repo, kC1, "model.safetensors", w);
  auto record = [&](const std::string& files, const std::string& extra) {
    c.dir.Write(repo + "/.berth/" + kC1 + ".json",
                R"({"commit":")" + kC1 + R"(","files":[)" + files + "]" + extra + "}");
  };
  const std::string both = R"({"path":"config.json","size":5,"blob":")" + cfg + R"("},)" +
                           R"({"path":"model.safetensors","size":20,"blob":")" + w + R"("})";

  record(both, R"(,"bytes_total":25)");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(Find(*s, "org/rec", kC1)->complete);
  EXPECT_EQ(Find(*s, "org/rec", kC1)->bytes_total, 25u);

  // The links are all fine, but the record wants one more file.
  record(both + R"(,{"path":"tokenizer.json","size":3,"blob":")" + t + R"("})",
         R"(,"bytes_total":28)");
  s = c.Scan();
  EXPECT_FALSE(Find(*s, "org/rec", kC1)->complete);
  EXPECT_EQ(Find(*s, "org/rec", kC1)->bytes_total, 28u);
  EXPECT_EQ(Find(*s, "org/rec", kC1)->bytes_present, 25u);

  // A size that does not match what is on disk.
  record(R"({"path":"config.json","size":6,"blob":")" + cfg + R"("})", "");
  s = c.Scan();
  EXPECT_FALSE(Find(*s, "org/rec", kC1)->complete);
  EXPECT_EQ(Find(*s, "org/rec", kC1)->bytes_total, 6u) << "without bytes_total: sum of sizes";

  // A record berth cannot parse: incomplete, so the download provider verifies again.
  c.dir.Write(repo + "/.berth/" + kC1 + ".json", "{truncated");
  s = c.Scan();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(Find(*s, "org/rec", kC1)->complete);

  // Records that parse but lie are refused the same way: a path out of the snapshot, a blob
  // that is no etag, the record of another commit.
  record(R"({"path":"../../blobs/x","size":5,"blob":")" + cfg + R"("})", "");
  EXPECT_FALSE(c.Scan()->repos[0].revisions[0].complete);
  record(R"({"path":"config.json","size":5,"blob":"cfg"})", "");
  EXPECT_FALSE(c.Scan()->repos[0].revisions[0].complete);
  c.dir.Write(repo + "/.berth/" + kC1 + ".json",
              R"({"commit":")" + kC2 + R"(","files":[{"path":"config.json","size":5,"blob":")" +
                  cfg + R"("}]})");
  EXPECT_FALSE(c.Scan()->repos[0].revisions[0].complete);
  // The record of the good case, as berth writes it, is accepted.
  record(R"({"path":"config.json","size":5,"blob":")" + cfg + R"("})", "");
  EXPECT_TRUE(c.Scan()->repos[0].revisions[0].complete);
}

TEST(ScanStore, PlainFilesInASnapshotCountAsPresent) {
  Cache c;  // HF_HUB_DISABLE_SYMLINKS: blobs are moved into the snapshot
  c.dir.Write("models--org--copy/snapshots/" + kC1 + "/config.json", "12345");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok());
  const ObservedRevision* r = Find(*s, "org/copy", kC1);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(r->bytes_present, 5u);
}

// A snapshot link (or a blob that is a link) leading out of the repo's blobs is nothing berth
// downloaded: it is not counted as part of the model, as a dangling link is not, so the
// revision is not complete and nothing reads it as weights (issue 37, 7: a link to /proc/kmsg
// blocked apply forever in a prewarm; one to /etc/shadow was read).
TEST(ScanStore, ALinkThatLeavesTheStoreIsNotPartOfTheModel) {
  for (const char* target : {"/etc/shadow", "/proc/kmsg", "../../../../outside"}) {
    SCOPED_TRACE(target);
    Cache c;
    const std::string repo = "models--org--evil";
    c.dir.Write("outside", std::string(50, 'o'));
    c.Blob(repo, "weights", 100);
    c.File(repo, kC1, "model-00001.safetensors", "weights");
    c.dir.Link(target, repo + "/snapshots/" + kC1 + "/model-00002.safetensors");
    Result<ObservedStore> s = c.Scan();
    ASSERT_TRUE(s.ok()) << s.status().message();
    const ObservedRevision* r = Find(*s, "org/evil", kC1);
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(r->complete);
    EXPECT_EQ(r->bytes_present, 100u) << "only the blob berth's download wrote";
  }
  Cache c;
  const std::string repo = "models--org--evil";
  c.dir.Link("/etc/passwd", repo + "/blobs/linked");
  c.File(repo, kC1, "model.safetensors", "linked");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ObservedRevision* r = Find(*s, "org/evil", kC1);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->complete) << "a blob that is a link is not a blob";
  EXPECT_EQ(r->bytes_present, 0u);
}

TEST(ScanStore, AnEmptySnapshotIsNotComplete) {
  Cache c;
  c.dir.MkDir("models--org--empty/snapshots/" + kC1);
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(Find(*s, "org/empty", kC1)->complete);
}

TEST(ScanStore, AMissingStoreIsNotAnErrorAndStillTellsTheDiskSpace) {
  testing::TempDir tmp;
  Result<ObservedStore> s = ScanStore(tmp / "not/yet/created");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->exists);
  EXPECT_EQ(s->path, tmp / "not/yet/created");
  EXPECT_GT(s->total_bytes, 0u) << "from " << tmp.path();
  EXPECT_THAT(s->repos, IsEmpty());
}

TEST(ScanStore, AStorePathThatIsAFileIsAnError) {
  testing::TempDir tmp;
  tmp.Write("store", "oops");
  Result<ObservedStore> s = ScanStore(tmp / "store");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("is not a directory"));
}

/// The real file system, with every call recorded; optionally failing listings of one path.
class RecordingFs : public StoreFs {
 public:
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    lists.push_back(dir);
    if (!deny.empty() && dir.find(deny) != std::string::npos)
      return Status::PermissionDenied("cannot list " + dir + ": Permission denied");
    return PosixStoreFs().ListDir(dir);
  }
  Result<FileStat> Stat(const std::string& path, bool follow) override {
    stats.push_back(path);
    return PosixStoreFs().Stat(path, follow);
  }
  Result<std::string> ReadLink(const std::string& path) override {
    links.push_back(path);
    return PosixStoreFs().ReadLink(path);
  }
  Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                    bool follow) override {
    reads.push_back(path);
    return PosixStoreFs().ReadSmallFile(path, max_bytes, follow);
  }
  Result<DiskSpace> SpaceOf(const std::string& path) override {
    return PosixStoreFs().SpaceOf(path);
  }

  std::string deny;
  std::vector<std::string> lists, stats, links, reads;
};

TEST(ScanStore, TwoThousandFilesAreScannedWithoutReadingAnyContent) {
  Cache c;
  const std::string repo = "models--org--many";
  constexpr int kFiles = 2000;
  for (int i = 0; i < kFiles; ++i) {
    std::string blob = "blob" + std::to_string(i);
    c.Blob(repo, blob, static_cast<size_t>(i % 7));
    c.File(repo, kC1, "shard/" + std::to_string(i / 100) + "/f" + std::to_string(i), blob);
  }
  c.Ref(repo, "main", kC1);

  RecordingFs fs;
  auto start = std::chrono::steady_clock::now();
  Result<ObservedStore> s = ScanStore(c.dir.path(), fs);
  auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  std::cout << "ScanStore of " << kFiles << " files: " << took.count() << " ms\n";
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(Find(*s, "org/many", kC1)->complete);

  // Contents are read only from metadata: the ref, and the (absent) berth record.
  for (const std::string& r : fs.reads)
    EXPECT_TRUE(r.find("/refs/") != std::string::npos || r.find("/.berth/") != std::string::npos)
        << r;
  EXPECT_EQ(fs.reads.size(), 2u);
  // One readlink per snapshot file, one stat per blob; links resolve against the blob listing.
  EXPECT_EQ(fs.links.size(), static_cast<size_t>(kFiles));
  EXPECT_LE(fs.stats.size(), static_cast<size_t>(kFiles) + 5);
}

TEST(ScanStore, AHugeConfigJsonIsAProblemAndIsNotRead) {
  Cache c;
  const std::string repo = "models--org--tiny";
  c.Blob(repo, "cfg", kMaxModelConfigBytes + 1);
  c.File(repo, kC1, "config.json", "cfg");
  RecordingFs fs;
  Result<ObservedStore> s = ScanStore(c.dir.path(), fs);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ObservedRevision* r = Find(*s, "org/tiny", kC1);
  ASSERT_TRUE(r && r->config);
  EXPECT_THAT(r->config->problem, HasSubstr("is larger than 1048576 bytes"));
  for (const std::string& read : fs.reads) EXPECT_EQ(read.find("config.json"), std::string::npos);
}

TEST(ScanStore, AnUnreadableSnapshotDirectoryIsAnErrorNamingIt) {
  Cache c;
  c.Blob("models--org--tiny", "b", 1);
  c.File("models--org--tiny", kC1, "config.json", "b");
  RecordingFs fs;
  fs.deny = "/snapshots";
  Result<ObservedStore> s = ScanStore(c.dir.path(), fs);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kPermissionDenied);
  EXPECT_THAT(s.status().message(), HasSubstr("scanning the model store " + c.dir.path()));
  EXPECT_THAT(s.status().message(), HasSubstr("models--org--tiny/snapshots: Permission denied"));
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

// A pull makes snapshots/<commit>/ before its first byte; a full disk stops it with a chunked
// partial sized to the whole blob but holding less. The scan gives the commit what the disk
// holds, so the planner counts it against the download.
TEST(ScanStore, APartialCountsWhatItHoldsForTheCommitBeingDownloaded) {
  Cache c;
  const std::string repo = "models--org--big";
  c.dir.MkDir(repo + "/snapshots/" + kC3);
  c.dir.Write(repo + "/blobs/w.incomplete", std::string(64 << 10, 'x'));
  ASSERT_EQ(::truncate((c.dir.path() + "/" + repo + "/blobs/w.incomplete").c_str(), 256 << 20), 0);
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ObservedRevision* r = Find(*s, "org/big", kC3);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->complete);
  EXPECT_GE(r->bytes_present, 64u << 10);
  EXPECT_LT(r->bytes_present, 8u << 20) << "the holes of a sparse partial are not present bytes";
}

// Only a commit names a revision: a ref holding something else, or a snapshot folder of another
// name, is no revision (and never a path to act on).
TEST(ScanStore, RefsAndSnapshotFoldersThatAreNotCommitsAreIgnored) {
  Cache c;
  const std::string repo = "models--org--tiny";
  c.Blob(repo, "config", 10);
  c.File(repo, kC1, "config.json", "config");
  c.File(repo, "not-a-commit", "config.json", "config");
  c.Ref(repo, "main", kC1);
  c.Ref(repo, "evil", "../../../../etc");
  Result<ObservedStore> s = c.Scan();
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->repos.size(), 1u);
  ASSERT_EQ(s->repos[0].revisions.size(), 1u);
  EXPECT_EQ(s->repos[0].revisions[0].commit, kC1);
  EXPECT_THAT(s->repos[0].revisions[0].refs, ElementsAre("main"));
}

}  // namespace
}  // namespace berth
