#include "providers/host/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "core/read_file.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

constexpr size_t kMaxMemInfoBytes = 64 * 1024;

/// Closes an fd when it goes.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

Result<int> OpenForCache(const std::string& path, uint64_t* size) {
  return OpenRegularFile(path, {.max_bytes = UINT64_MAX, .follow_links = true}, size);
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + EscapeLine(path) + ": " + std::strerror(errno);
}

}  // namespace

Result<MemInfo> ParseMemInfo(std::string_view text, const std::string& where) {
  if (text.size() > kMaxMemInfoBytes)
    return Status::InvalidArgument(where + " is over 64 KiB: not the kernel's meminfo");
  MemInfo m;
  bool total = false, available = false;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    uint64_t* out = nullptr;
    bool* seen = nullptr;
    if (line.starts_with("MemTotal:")) {
      out = &m.total_bytes;
      seen = &total;
    } else if (line.starts_with("MemAvailable:")) {
      out = &m.available_bytes;
      seen = &available;
    } else {
      continue;
    }
    std::string_view rest = line.substr(line.find(':') + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    uint64_t kb = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kb);
    std::string_view unit(end, static_cast<size_t>(rest.data() + rest.size() - end));
    if (ec != std::errc() || end == rest.data() || unit != " kB" || kb > (UINT64_MAX >> 10))
      return Status::InvalidArgument(where + ":" + std::to_string(line_no) + ": '" +
                                     Excerpt(line, 80) + "' is not a number of kB");
    *out = kb << 10;
    *seen = true;
  }
  if (!total || !available)
    return Status::InvalidArgument(where + " has no " + (total ? "MemAvailable" : "MemTotal") +
                                   " line (a kernel before 3.14, or not meminfo)");
  if (m.available_bytes > m.total_bytes)
    return Status::InvalidArgument(where + ": MemAvailable is larger than MemTotal");
  return m;
}

Result<MemInfo> ReadMemInfo(const std::string& path) {
  auto text = ReadRegularFile(path, {.max_bytes = kMaxMemInfoBytes, .follow_links = true});
  if (!text.ok()) return text.status();
  return ParseMemInfo(*text, path);
}

Result<Residency> PageCacheResidency(const std::vector<std::string>& files) {
  const long page = sysconf(_SC_PAGESIZE);
  Residency r;
  std::vector<unsigned char> pages;
  for (const std::string& path : files) {
    uint64_t size = 0;
    auto fd = OpenForCache(path, &size);
    if (!fd.ok()) return fd.status();
    Fd hold{*fd};
    ++r.files;
    r.bytes += size;
    if (size == 0) continue;
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, hold.fd, 0);
    if (map == MAP_FAILED)
      return Status::IoError(Errno("cannot map", path) + " (to ask the page cache about it)");
    std::unique_ptr<void, std::function<void(void*)>> unmap(map,
                                                            [size](void* m) { munmap(m, size); });
    const size_t n = (size + static_cast<uint64_t>(page) - 1) / static_cast<uint64_t>(page);
    pages.assign(n, 0);
    if (mincore(map, size, pages.data()) != 0)
      return Status::IoError(Errno("mincore failed on", path));
    uint64_t resident = 0;
    for (unsigned char p : pages) resident += (p & 1) ? static_cast<uint64_t>(page) : 0;
    r.resident_bytes += std::min(resident, size);
  }
  return r;
}

Result<uint64_t> Prewarm(const std::vector<std::string>& files, const PrewarmOptions& options) {
  uint64_t total = 0;
  std::vector<int> fds;
  std::vector<uint64_t> left;  // each file's bytes still to read (its size when opened)
  struct CloseAll {
    std::vector<int>& fds;
    ~CloseAll() {
      for (int fd : fds) close(fd);
    }
  } close_all{fds};
  for (const std::string& path : files) {
    uint64_t size = 0;
    auto fd = OpenForCache(path, &size);
    if (!fd.ok()) return fd.status();
    fds.push_back(*fd);
    left.push_back(size);
    total += size;
    // The kernel starts reading ahead at once; the reads below wait for what it has not.
    (void)posix_fadvise(*fd, 0, 0, POSIX_FADV_WILLNEED);
  }
  std::vector<char> buffer(std::max<size_t>(options.chunk_bytes, 4096));
  uint64_t done = 0;
  for (size_t i = 0; i < fds.size(); ++i) {
    for (;;) {
      if (options.stop && options.stop->load()) return done;
      if (std::chrono::steady_clock::now() >= options.deadline) return done;
      if (left[i] == 0) break;
      size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), left[i]));
      ssize_t n = read(fds[i], buffer.data(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::IoError(Errno("cannot read", files[i]) + " into the page cache");
      if (n == 0) break;
      done += static_cast<uint64_t>(n);
      left[i] -= static_cast<uint64_t>(n);
      if (options.progress) options.progress(done, total);
    }
  }
  return done;
}

Status Evict(const std::vector<std::string>& files) {
  for (const std::string& path : files) {
    auto fd = OpenForCache(path, nullptr);
    if (!fd.ok()) return fd.status();
    Fd hold{*fd};
    if (int e = posix_fadvise(hold.fd, 0, 0, POSIX_FADV_DONTNEED); e != 0) {
      errno = e;
      return Status::IoError(Errno("cannot drop from the page cache:", path));
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> SafetensorsFiles(const std::string& snapshot) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec))
    return Status::NotFound("no snapshot folder " + EscapeControl(snapshot));
  // The repository folder: every file of the model resolves inside it.
  fs::path repo = fs::canonical(fs::path(snapshot) / ".." / "..", ec);
  if (ec) return Status::NotFound("no repository folder above " + EscapeControl(snapshot));
  const std::string inside = repo.string() + "/";
  std::vector<std::string> out;
  auto it = fs::recursive_directory_iterator(snapshot, fs::directory_options::none, ec);
  size_t seen = 0;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++seen > 100000)
      return Status::FailedPrecondition("more than 100,000 entries under " +
                                        EscapeControl(snapshot));
    if (it.depth() >= 4) it.disable_recursion_pending();
    const fs::path& p = it->path();
    if (p.extension() != ".safetensors") continue;
    std::error_code fe;
    fs::path real = fs::canonical(p, fe);  // (follows every link on the way)
    if (fe || real.string().rfind(inside, 0) != 0) continue;
    if (fs::is_regular_file(real, fe)) out.push_back(p.string());
  }
  if (ec) return Status::Internal("reading " + EscapeControl(snapshot) + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<std::string>> PrewarmFiles(const std::string& snapshot,
                                              const std::string& file) {
  if (file.empty()) return SafetensorsFiles(snapshot);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec))
    return Status::NotFound("no snapshot folder " + EscapeControl(snapshot));
  fs::path repo = fs::canonical(fs::path(snapshot) / ".." / "..", ec);
  if (ec) return Status::NotFound("no repository folder above " + EscapeControl(snapshot));
  const std::string path = snapshot + "/" + file;
  fs::path real = fs::canonical(path, ec);  // (follows every link on the way)
  if (ec || real.string().rfind(repo.string() + "/", 0) != 0 || !fs::is_regular_file(real, ec))
    return Status::NotFound(EscapeControl(file) + " is not a file of the snapshot " +
                            EscapeControl(snapshot));
  return std::vector<std::string>{path};
}

}  // namespace berth
