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
  return {{"concurrency", l.concurrency}, {"requests", l.requests},
          {"errors", l.errors},           {"output_tokens", l.output_tokens},
          {"seconds", l.seconds},         {"output_tokens_per_second", l.output_tps},
          {"ttft_p50_ms", l.ttft_p50_ms}, {"ttft_p90_ms", l.ttft_p90_ms},
          {"ttft_p99_ms", l.ttft_p99_ms}, {"itl_p50_ms", l.itl_p50_ms},
          {"itl_p90_ms", l.itl_p90_ms},   {"itl_p99_ms", l.itl_p99_ms},
          {"first_error", l.first_error}};
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
          {"levels", levels}};
}

/// Reads a number that must be finite and not negative; throws (caught by the caller) otherwise.
double NonNegative(const json& j, const char* key) {
  double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0)
    throw std::invalid_argument(std::string(key) + " must be a number >= 0");
  return v;
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
