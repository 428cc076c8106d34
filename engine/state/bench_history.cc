#include "engine/state/bench_history.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/json_text.h"
#include "core/read_file.h"
#include "engine/state/state.h"

namespace berth {
namespace {

constexpr int kFormatVersion = 1;
using nlohmann::json;

json LevelJson(const BenchLevel& l) {
  json j = {{"concurrency", l.concurrency}, {"requests", l.requests},
            {"errors", l.errors},           {"output_tokens", l.output_tokens},
            {"seconds", l.seconds},         {"output_tokens_per_second", l.output_tps},
            {"ttft_p50_ms", l.ttft_p50_ms}, {"ttft_p90_ms", l.ttft_p90_ms},
            {"ttft_p99_ms", l.ttft_p99_ms}, {"itl_p50_ms", l.itl_p50_ms},
            {"itl_p90_ms", l.itl_p90_ms},   {"itl_p99_ms", l.itl_p99_ms},
            {"first_error", l.first_error}};
  if (!l.has_request_figures) return j;
  j.update({{"cancelled", l.cancelled},
            {"warmup_requests", l.warmup_requests},
            {"requests_per_second", l.request_tps},
            {"ttft_mean_ms", l.ttft_mean_ms},
            {"itl_mean_ms", l.itl_mean_ms},
            {"tpot_mean_ms", l.tpot_mean_ms},
            {"tpot_p50_ms", l.tpot_p50_ms},
            {"tpot_p90_ms", l.tpot_p90_ms},
            {"tpot_p99_ms", l.tpot_p99_ms},
            {"e2e_mean_ms", l.e2e_mean_ms},
            {"e2e_p50_ms", l.e2e_p50_ms},
            {"e2e_p90_ms", l.e2e_p90_ms},
            {"e2e_p99_ms", l.e2e_p99_ms},
            {"user_tokens_per_second_mean", l.user_tps_mean},
            {"user_tokens_per_second_p50", l.user_tps_p50}});
  j["goodput"] = l.has_goodput ? json{{"good_requests", l.good_requests},
                                      {"requests_per_second", l.goodput_rps}}
                               : json(nullptr);
  j["server_account"] = l.server_requests ? json{{"requests", l.server_requests},
                                                 {"output_tokens", l.server_output_tokens},
                                                 {"decode_ms", l.server_decode_ms},
                                                 {"tpot_mean_ms", l.server_tpot_mean_ms}}
                                          : json(nullptr);
  return j;
}

json RecordJson(const BenchRecord& r) {
  json levels = json::array();
  for (const auto& l : r.levels) levels.push_back(LevelJson(l));
  return {{"time", r.time},
          {"service", r.service},
          {"served_name", r.served_name},
          {"model", r.model},
          {"repo_id", r.repo_id},
          {"commit", r.commit},
          {"engine", r.engine},
          {"chat", r.chat},
          {"prompt_tokens", r.prompt_tokens},
          {"max_tokens", r.max_tokens},
          {"duration_seconds", r.duration_s},
          {"num_prompts", r.num_prompts},
          {"request_rate", r.request_rate},
          {"seed", r.seed},
          {"warmup", r.warmup},
          {"goodput_limits_ms",
           {{"ttft", r.goodput_ttft_ms}, {"tpot", r.goodput_tpot_ms}, {"e2el", r.goodput_e2e_ms}}},
          {"levels", levels}};
}

/// Reads a number that must be finite and not negative; throws (caught by the caller) otherwise.
double NonNegative(const json& j, const char* key) {
  double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0)
    throw std::invalid_argument(std::string(key) + " must be a number >= 0");
  return v;
}

/// Like NonNegative, for a key that older records lack: `fallback` when it is not there.
double OptionalNonNegative(const json& j, const char* key, double fallback = 0) {
  return j.contains(key) ? NonNegative(j, key) : fallback;
}

uint64_t OptionalCount(const json& j, const char* key) {
  return j.contains(key) ? j.at(key).get<uint64_t>() : 0;
}

BenchRecord RecordFromJson(const json& j) {
  BenchRecord r;
  r.time = j.at("time").get<std::string>();
  r.service = j.at("service").get<std::string>();
  r.served_name = j.at("served_name").get<std::string>();
  r.model = j.at("model").get<std::string>();
  r.repo_id = j.at("repo_id").get<std::string>();
  r.commit = j.at("commit").get<std::string>();
  r.engine = j.at("engine").get<std::string>();
  r.chat = j.at("chat").get<bool>();
  r.prompt_tokens = j.at("prompt_tokens").get<int>();
  r.max_tokens = j.at("max_tokens").get<int>();
  r.duration_s = NonNegative(j, "duration_seconds");
  // Written since berth bench took --num-prompts, --request-rate, --warmup and --goodput.
  r.num_prompts = OptionalCount(j, "num_prompts");
  r.request_rate = OptionalNonNegative(j, "request_rate");
  r.seed = OptionalCount(j, "seed");
  if (j.contains("warmup")) r.warmup = j.at("warmup").get<std::string>();
  if (j.contains("goodput_limits_ms")) {
    const json& g = j.at("goodput_limits_ms");
    r.goodput_ttft_ms = OptionalNonNegative(g, "ttft");
    r.goodput_tpot_ms = OptionalNonNegative(g, "tpot");
    r.goodput_e2e_ms = OptionalNonNegative(g, "e2el");
  }
  if (r.service.empty()) throw std::invalid_argument("a record without a service");
  for (const auto& lj : j.at("levels")) {
    BenchLevel l;
    l.concurrency = lj.at("concurrency").get<int>();
    if (l.concurrency < 1) throw std::invalid_argument("concurrency must be at least 1");
    l.requests = lj.at("requests").get<uint64_t>();
    l.errors = lj.at("errors").get<uint64_t>();
    l.output_tokens = lj.at("output_tokens").get<uint64_t>();
    l.seconds = NonNegative(lj, "seconds");
    l.output_tps = NonNegative(lj, "output_tokens_per_second");
    l.ttft_p50_ms = NonNegative(lj, "ttft_p50_ms");
    l.ttft_p90_ms = NonNegative(lj, "ttft_p90_ms");
    l.ttft_p99_ms = NonNegative(lj, "ttft_p99_ms");
    l.itl_p50_ms = NonNegative(lj, "itl_p50_ms");
    l.itl_p90_ms = NonNegative(lj, "itl_p90_ms");
    l.itl_p99_ms = NonNegative(lj, "itl_p99_ms");
    l.first_error = lj.at("first_error").get<std::string>();
    l.has_request_figures = lj.contains("tpot_p50_ms");
    if (l.has_request_figures) {
      l.cancelled = OptionalCount(lj, "cancelled");
      l.warmup_requests = OptionalCount(lj, "warmup_requests");
      l.request_tps = OptionalNonNegative(lj, "requests_per_second");
      l.ttft_mean_ms = OptionalNonNegative(lj, "ttft_mean_ms");
      l.itl_mean_ms = OptionalNonNegative(lj, "itl_mean_ms");
      l.tpot_mean_ms = OptionalNonNegative(lj, "tpot_mean_ms");
      l.tpot_p50_ms = NonNegative(lj, "tpot_p50_ms");
      l.tpot_p90_ms = OptionalNonNegative(lj, "tpot_p90_ms");
      l.tpot_p99_ms = OptionalNonNegative(lj, "tpot_p99_ms");
      l.e2e_mean_ms = OptionalNonNegative(lj, "e2e_mean_ms");
      l.e2e_p50_ms = OptionalNonNegative(lj, "e2e_p50_ms");
      l.e2e_p90_ms = OptionalNonNegative(lj, "e2e_p90_ms");
      l.e2e_p99_ms = OptionalNonNegative(lj, "e2e_p99_ms");
      l.user_tps_mean = OptionalNonNegative(lj, "user_tokens_per_second_mean");
      l.user_tps_p50 = OptionalNonNegative(lj, "user_tokens_per_second_p50");
      if (lj.contains("goodput") && !lj.at("goodput").is_null()) {
        const json& g = lj.at("goodput");
        l.has_goodput = true;
        l.good_requests = g.at("good_requests").get<uint64_t>();
        l.goodput_rps = NonNegative(g, "requests_per_second");
      }
      // Written since berth reads the server's own account (llama.cpp's timings).
      if (lj.contains("server_account") && !lj.at("server_account").is_null()) {
        const json& a = lj.at("server_account");
        l.server_requests = a.at("requests").get<uint64_t>();
        l.server_output_tokens = a.at("output_tokens").get<uint64_t>();
        l.server_decode_ms = NonNegative(a, "decode_ms");
        l.server_tpot_mean_ms = NonNegative(a, "tpot_mean_ms");
      }
    }
    r.levels.push_back(std::move(l));
  }
  return r;
}

/// flock on bench.lock for the life of the object; `fd` < 0 when it could not be taken.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    Result<int> fd = OpenLockFile(path);  // never through a link, never a FIFO
    if (!fd.ok()) {
      status_ = fd.status();
      return;
    }
    fd_ = *fd;
    if (flock(fd_, LOCK_EX) != 0) {
      status_ = Status::IoError("cannot lock " + path + ": " + std::strerror(errno));
      close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);
  }
  /// Why the lock was not taken; Ok when it is held.
  const Status& status() const { return status_; }

 private:
  int fd_ = -1;
  Status status_;
};

}  // namespace

std::string BenchRecordToJson(const BenchRecord& r) { return DumpJson(RecordJson(r), 2) + "\n"; }

std::string BenchRecordsToJson(const std::vector<BenchRecord>& records) {
  json all = json::array();
  for (const auto& r : records) all.push_back(RecordJson(r));
  return DumpJson(json{{"version", kFormatVersion}, {"records", all}}, 2) + "\n";
}

Result<std::vector<BenchRecord>> BenchRecordsFromJson(const std::string& text,
                                                      const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(source +
                                   " is damaged (not a JSON object); move it aside to "
                                   "start a new benchmark history");
  std::vector<BenchRecord> out;
  try {
    int version = j.at("version").get<int>();
    if (version != kFormatVersion)
      return Status::InvalidArgument(source + " has format version " + std::to_string(version) +
                                     ", this berth reads " + std::to_string(kFormatVersion) +
                                     " (written by another berth version?)");
    for (const auto& r : j.at("records")) out.push_back(RecordFromJson(r));
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + " is damaged: " + e.what() +
                                   "; move it aside to start a new benchmark history");
  }
  if (out.size() > kBenchRecordsKept) out.erase(out.begin(), out.end() - kBenchRecordsKept);
  return out;
}

Result<std::vector<BenchRecord>> BenchHistory::Load() const {
  Result<std::string> text = ReadRegularFile(path(), {.max_bytes = kMaxStateFileBytes});
  if (!text.ok() && text.status().code() == Status::Code::kNotFound)
    return std::vector<BenchRecord>{};
  if (!text.ok()) return text.status();
  return BenchRecordsFromJson(*text, path());
}

Status BenchHistory::Append(const BenchRecord& record) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::IoError("cannot create the state directory " + dir_ + ": " + ec.message());
  FileLock lock(dir_ + "/bench.lock");
  if (!lock.status().ok()) return lock.status();
  auto records = Load();
  if (!records.ok()) return records.status();
  records->push_back(record);
  if (records->size() > kBenchRecordsKept)
    records->erase(records->begin(), records->end() - kBenchRecordsKept);
  return WriteFileAtomically(path(), BenchRecordsToJson(*records));
}

std::vector<BenchRecord> LatestPerKey(const std::vector<BenchRecord>& records,
                                      const std::vector<std::string>& services) {
  std::map<std::string, size_t> newest;  // key -> index in records
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (!services.empty() &&
        std::find(services.begin(), services.end(), r.service) == services.end())
      continue;
    newest[r.Key()] = i;  // records are oldest first: the last one wins
  }
  std::vector<size_t> order;
  for (const auto& [key, i] : newest) order.push_back(i);
  std::sort(order.begin(), order.end());
  std::vector<BenchRecord> out;
  for (size_t i : order) out.push_back(records[i]);
  return out;
}

}  // namespace berth
