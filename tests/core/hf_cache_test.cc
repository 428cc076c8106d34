#include "core/hf_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace berth {
namespace {

using ::testing::HasSubstr;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kSha1 = std::string(40, 'a');
const std::string kSha256 = std::string(64, 'b');

TEST(HfCache, ACommitIsExactlyFortyLowercaseHexDigits) {
  EXPECT_TRUE(IsCommit(kCommit));
  EXPECT_FALSE(IsCommit("main"));
  EXPECT_FALSE(IsCommit(kCommit.substr(1)));
  EXPECT_FALSE(IsCommit(kCommit + "0"));
  EXPECT_FALSE(IsCommit("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommit("g123456789abcdef0123456789abcdef01234567"));
}

TEST(HfCache, SourcesWithAndWithoutARevision) {
  Result<HfSource> plain = ParseHfSource("hf://MiniMaxAI/MiniMax-M2.5");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->repo_id, "MiniMaxAI/MiniMax-M2.5");
  EXPECT_EQ(plain->revision, "main");
  EXPECT_FALSE(plain->revision_given);

  Result<HfSource> pinned = ParseHfSource("hf://org/name@" + kCommit);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->repo_id, "org/name");
  EXPECT_EQ(pinned->revision, kCommit);
  EXPECT_TRUE(pinned->revision_given);

  Result<HfSource> pr = ParseHfSource("hf://org/name@refs/pr/1");
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ(pr->revision, "refs/pr/1");
}

TEST(HfCache, AMalformedSourceSaysWhatIsWrongAndHowToWriteIt) {
  auto why = [](const std::string& source) {
    Result<HfSource> r = ParseHfSource(source);
    EXPECT_FALSE(r.ok()) << source;
    if (r.ok()) return std::string();
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("write hf://org/name or hf://org/name@revision"));
    return r.status().message();
  };
  EXPECT_THAT(why("https://huggingface.co/a/b"), HasSubstr("does not start with hf://"));
  EXPECT_THAT(why("hf://MiniMaxAI"), HasSubstr("names no org"));
  EXPECT_THAT(why("hf://a/b/c"), HasSubstr("more than org/name"));
  EXPECT_THAT(why("hf://a--b/c"), HasSubstr("\"--\""));
  EXPECT_THAT(why("hf://a/b..c"), HasSubstr("\"..\""));
  EXPECT_THAT(why("hf://-a/b"), HasSubstr("start with a letter or digit"));
  EXPECT_THAT(why("hf://a/" + std::string(97, 'b')), HasSubstr("longer than 96"));
  EXPECT_THAT(why("hf:///b"), HasSubstr("org is empty"));
  EXPECT_THAT(why("hf://a/"), HasSubstr("name is empty"));
  EXPECT_THAT(why("hf://a/b@"), HasSubstr("revision"));
  EXPECT_THAT(why("hf://a/b@../x"), HasSubstr("revision"));
  EXPECT_THAT(why("hf://a b/c"), HasSubstr("only letters"));
}

TEST(HfCache, FolderNamesRoundTripAsHuggingfaceHubNamesThem) {
  EXPECT_EQ(RepoFolderName("meta-llama/Llama-3.1-8B"), "models--meta-llama--Llama-3.1-8B");
  EXPECT_EQ(RepoFolderName("gpt2"), "models--gpt2");
  EXPECT_EQ(RepoIdFromFolderName("models--meta-llama--Llama-3.1-8B"), "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(RepoIdFromFolderName("models--gpt2"), "gpt2");
  EXPECT_EQ(RepoIdFromFolderName("datasets--org--data"), std::nullopt);
  EXPECT_EQ(RepoIdFromFolderName("spaces--org--app"), std::nullopt);
  EXPECT_EQ(RepoIdFromFolderName(".locks"), std::nullopt);
  EXPECT_EQ(RepoIdFromFolderName("models--"), std::nullopt);
}

TEST(HfCache, EveryPathOfARepo) {
  HfCachePaths p("/srv/hf", "org/tiny");
  EXPECT_EQ(p.repo_dir(), "/srv/hf/models--org--tiny");
  EXPECT_EQ(p.BlobPath(kSha256), "/srv/hf/models--org--tiny/blobs/" + kSha256);
  EXPECT_EQ(p.IncompletePath(kSha256),
            "/srv/hf/models--org--tiny/blobs/" + kSha256 + ".incomplete");
  EXPECT_EQ(p.SnapshotDir(kCommit), "/srv/hf/models--org--tiny/snapshots/" + kCommit);
  EXPECT_EQ(p.RefPath("main"), "/srv/hf/models--org--tiny/refs/main");
  EXPECT_EQ(p.RefPath("refs/pr/1"), "/srv/hf/models--org--tiny/refs/refs/pr/1");
  EXPECT_EQ(p.RecordPath(kCommit), "/srv/hf/models--org--tiny/.berth/" + kCommit + ".json");
  EXPECT_EQ(p.LockPath(kSha1), "/srv/hf/.locks/models--org--tiny/" + kSha1 + ".lock");
  EXPECT_EQ(SnapshotPath("/srv/hf", "org/tiny", kCommit), p.SnapshotDir(kCommit));
  EXPECT_TRUE(IsSnapshotPath(p.SnapshotDir(kCommit)));
  EXPECT_TRUE(IsSnapshotPath(p.SnapshotDir(kCommit) + "/model.gguf"));
  EXPECT_FALSE(IsSnapshotPath("/srv/hf/models--org--tiny/blobs/" + kSha1));
  EXPECT_TRUE(IsPartialBlobName(kSha256 + ".incomplete"));
  EXPECT_FALSE(IsPartialBlobName(kSha256));
}

TEST(HfCache, SnapshotLinksClimbOneLevelPerFolder) {
  EXPECT_EQ(SnapshotLinkTarget("config.json", kSha1), "../../blobs/" + kSha1);
  EXPECT_EQ(SnapshotLinkTarget("a/b/w.safetensors", kSha256), "../../../../blobs/" + kSha256);
}

SnapshotRecord Tiny() {
  SnapshotRecord r;
  r.repo_id = "org/tiny";
  r.commit = kCommit;
  r.files = {{"config.json", 12, kSha1}, {"sub/model.safetensors", 4096, kSha256}};
  r.bytes_total = TotalBytes(r.files);
  return r;
}

TEST(HfCache, ARecordRoundTripsThroughItsJson) {
  SnapshotRecord r = Tiny();
  EXPECT_EQ(r.bytes_total, 4108u);
  std::string json = r.ToJson();
  EXPECT_EQ(json.back(), '\n');
  EXPECT_THAT(json, HasSubstr("\"format_version\": 1"));
  Result<SnapshotRecord> back = SnapshotRecord::FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->repo_id, r.repo_id);
  EXPECT_EQ(back->commit, r.commit);
  EXPECT_EQ(back->files, r.files);
  EXPECT_EQ(back->bytes_total, r.bytes_total);
  EXPECT_FALSE(back->files[0].is_lfs());
  EXPECT_TRUE(back->files[1].is_lfs());
}

TEST(HfCache, ARecordWrittenAsBerthDidBeforeIsRead) {
  // The exact bytes CacheLayout::Publish wrote before the record had a type of its own.
  const std::string old =
      "{\n \"format_version\": 1,\n \"repo_id\": \"org/tiny\",\n \"commit\": \"" + kCommit +
      "\",\n \"files\": [\n  {\n   \"path\": \"config.json\",\n" +
      "   \"size\": 12,\n   \"blob\": \"" + kSha1 + "\"\n  }\n ],\n \"bytes_total\": 12\n}\n";
  Result<SnapshotRecord> r = SnapshotRecord::FromJson(old);
  ASSERT_TRUE(r.ok()) << r.status().message();
  SnapshotRecord want;
  want.repo_id = "org/tiny";
  want.commit = kCommit;
  want.files = {{"config.json", 12, kSha1}};
  want.bytes_total = 12;
  EXPECT_EQ(want.ToJson(), old) << "the writer keeps the format byte for byte";
}

TEST(HfCache, ARecordWithoutBytesTotalSumsItsFiles) {
  Result<SnapshotRecord> r = SnapshotRecord::FromJson(
      R"({"commit":")" + kCommit + R"(","files":[{"path":"a","size":2,"blob":")" + kSha1 +
      R"("},{"path":"b","size":3,"blob":")" + kSha1 + R"("}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->bytes_total, 5u);
  EXPECT_EQ(r->repo_id, "");
}

// The names the Hub gives, as berth accepts them before they name anything in the store.
TEST(HfCache, OnlyHexHashesNameBlobsAndOnlyPlainPathsNameRepoFiles) {
  EXPECT_TRUE(IsGitSha1Name(kSha1));
  EXPECT_TRUE(IsBlobName(kSha1));
  EXPECT_TRUE(IsSha256Name(std::string(64, 'e')));
  for (const std::string& bad : {std::string("../../../x"), std::string(40, 'A'),
                                 std::string(41, 'a'), std::string(63, 'a'), std::string()})
    EXPECT_FALSE(IsBlobName(bad)) << bad;
  for (const char* ok : {"config.json", "sub/dir/tokenizer.json", "a..b/c", ".gitattributes"})
    EXPECT_TRUE(IsSafeRepoPath(ok)) << ok;
  for (const char* bad :
       {"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/", "./a", "a\\b", "a\nb", "a/."})
    EXPECT_FALSE(IsSafeRepoPath(bad)) << bad;
  EXPECT_FALSE(IsSafeRepoPath(std::string(4097, 'a')));
}

TEST(HfCache, ADamagedOrLyingRecordIsRefusedNeverThrown) {
  std::map<std::string, std::string> cases = {
      {"{truncated", "not JSON"},
      {"[]", "not a JSON object"},
      {R"({"format_version":2,"commit":"C","files":[]})", "format_version 2"},
      {R"({"files":[]})", "commit"},
      {R"({"commit":"main","files":[]})", "commit"},
      {R"({"commit":"C"})", "files"},
      {R"({"commit":"C","files":[1]})", "not an object"},
      {R"({"commit":"C","files":[{"path":"../x","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"/etc/passwd","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"a/../../x","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"a","size":-1,"blob":"S"}]})", "size"},
      {R"({"commit":"C","files":[{"path":"a","size":"1","blob":"S"}]})", "size"},
      {R"({"commit":"C","files":[{"path":"a","size":1}]})", "no blob"},
      {R"({"commit":"C","files":[{"path":"a","size":1,"blob":"abc"}]})", "blob"},
      {R"({"commit":"C","files":[{"path":"a//b","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"a\\b","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"./a","size":1,"blob":"S"}]})", "path"},
      {R"({"commit":"C","files":[{"path":"a","size":1,"blob":"../../../../etc/passwd"}]})", "blob"},
      {R"({"commit":"C","files":[{"path":"a","size":1125899906842625,"blob":"S"}]})", "2^50"},
      {R"({"commit":"C","files":[{"path":"a","size":1,"blob":"S"}],"bytes_total":-5})",
       "bytes_total"},
  };
  for (const auto& [pattern, why] : cases) {
    std::string json = pattern;
    for (size_t at; (at = json.find("\"C\"")) != std::string::npos;)
      json.replace(at, 3, "\"" + kCommit + "\"");
    for (size_t at; (at = json.find("\"S\"")) != std::string::npos;)
      json.replace(at, 3, "\"" + kSha1 + "\"");
    Result<SnapshotRecord> r = SnapshotRecord::FromJson(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(why)) << json;
  }
  // Uppercase hex is not what the Hub writes: refused too.
  std::string upper(40, 'A');
  EXPECT_FALSE(SnapshotRecord::FromJson(R"({"commit":")" + kCommit +
                                        R"(","files":[{"path":"a","size":1,"blob":")" + upper +
                                        R"("}]})")
                   .ok());
}

TEST(HfCache, TheFileFilterStarCrossesSlashesLikeHuggingfaceHub) {
  EXPECT_TRUE(FileWanted("sub/model.safetensors", {"*.safetensors"}, {}));
  EXPECT_FALSE(FileWanted("README.md", {"*.safetensors"}, {}));
}

TEST(HfCache, TheFileFilterExcludeWinsOverInclude) {
  EXPECT_FALSE(FileWanted("original/a.safetensors", {"*.safetensors"}, {"original/*"}));
  EXPECT_FALSE(FileWanted("original/a.safetensors", {}, {"original/"}));
}

TEST(HfCache, TheFileFilterFolderPatternMatchesEverythingBelowIt) {
  EXPECT_TRUE(FileWanted("tokenizer/vocab.json", {"tokenizer/"}, {}));
  EXPECT_FALSE(FileWanted("tokenizer.json", {"tokenizer/"}, {}));
}

TEST(HfCache, TheFileFilterWithNoIncludeKeepsEverything) {
  EXPECT_TRUE(FileWanted("x/y", {}, {}));
  EXPECT_TRUE(FileWanted("x/y", {"nothing", "x/*"}, {"z"}));
}

TEST(HfCache, TheDefaultStoreFollowsHuggingfaceHubsVariables) {
  std::map<std::string, std::string> env;
  auto lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(DefaultStorePath(lookup), "/root/.cache/huggingface/hub");
  env["HOME"] = "/home/ops";
  EXPECT_EQ(DefaultStorePath(lookup), "/home/ops/.cache/huggingface/hub");
  env["HF_HOME"] = "/data/hf";
  EXPECT_EQ(DefaultStorePath(lookup), "/data/hf/hub");
  env["HF_HUB_CACHE"] = "/models";
  EXPECT_EQ(DefaultStorePath(lookup), "/models");
  env["HF_HUB_CACHE"] = "";  // empty counts as unset
  EXPECT_EQ(DefaultStorePath(lookup), "/data/hf/hub");
}

}  // namespace
}  // namespace berth
