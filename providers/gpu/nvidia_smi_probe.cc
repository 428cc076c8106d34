// The nvidia-smi probe: the fallback when libnvidia-ml cannot be loaded by berth (a container
// that mounts only the tool, a library outside the loader's path). nvidia-smi is run directly,
// never through a shell, and killed when it hangs (a wedged driver makes it block for minutes).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "providers/gpu/attribution.h"
#include "providers/gpu/gpu_probe.h"

extern char** environ;

namespace berth {
namespace {

constexpr char kSkipped[] = "; GPU memory checks are skipped";
constexpr uint64_t kMiB = 1024 * 1024;

struct CommandOutput {
  int exit_code = 0;  // or 128 + signal
  std::string out;
  std::string err;
};

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

/// Runs `argv` (argv[0] an absolute or relative path, no shell) with stdin from /dev/null,
/// collecting stdout and stderr; kills it after `timeout_s` seconds.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, int timeout_s) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0)
    return Status::IoError("pipe: " + std::string(strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::IoError("pipe: " + std::string(strerror(e)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Status::IoError("cannot run " + argv[0] + ": " + strerror(rc));
  }

  CommandOutput result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  int64_t deadline = NowMs() + int64_t{timeout_s} * 1000;
  bool timed_out = false;
  while (open_fds > 0) {
    int64_t left = deadline - NowMs();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int n = poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status::Unavailable(argv[0] + " did not answer within " + std::to_string(timeout_s) +
                               " s and was killed (a hung driver?)" + kSkipped);
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

/// Splits a CSV line of nvidia-smi (", " separated, no quoting) into `n` fields; the field at
/// `free_field` (a name that may itself hold commas) takes whatever is left over.
bool Split(const std::string& line, size_t n, size_t free_field, std::vector<std::string>* out) {
  std::vector<std::string> parts;
  std::stringstream ss(line);
  std::string part;
  while (std::getline(ss, part, ',')) parts.push_back(part);
  if (parts.size() < n) return false;
  size_t extra = parts.size() - n;
  out->clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > free_field && i <= free_field + extra) {
      out->back() += "," + parts[i];
    } else {
      out->push_back(parts[i]);
    }
  }
  for (std::string& f : *out) f = Trim(f);
  return true;
}

/// MiB as printed with nounits ("143771"); nullopt-like false for "[N/A]" and the like.
bool ParseMiB(const std::string& s, uint64_t* bytes) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *bytes = std::strtoull(s.c_str(), nullptr, 10) * kMiB;
  return true;
}

std::string FirstLine(const CommandOutput& o) {
  std::string text = Trim(o.err.empty() ? o.out : o.err);
  size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

class NvidiaSmiProbe : public GpuProbe {
 public:
  NvidiaSmiProbe(std::string path, GpuProbeOptions options)
      : path_(std::move(path)), opt_(std::move(options)) {}

  Result<std::vector<ObservedGpu>> Observe() override {
    notes_.clear();
    Result<CommandOutput> devices =
        Query("--query-gpu=index,uuid,name,memory.total,memory.used,memory.free");
    if (!devices.ok()) return devices.status();
    std::vector<ObservedGpu> gpus;
    // nvidia-smi's return value 6: "a query to find an object was unsuccessful" (no GPU).
    if (devices->exit_code == 6) return gpus;
    if (devices->exit_code != 0) return Failed("--query-gpu", *devices);
    std::map<std::string, size_t> by_uuid;
    std::stringstream lines(devices->out);
    std::string line;
    std::vector<std::string> f;
    while (std::getline(lines, line)) {
      if (Trim(line).empty()) continue;
      if (!Split(line, 6, 2, &f)) return Unexpected(line);
      ObservedGpu g;
      g.index = std::atoi(f[0].c_str());
      g.uuid = f[1];
      g.name = f[2];
      uint64_t used = 0;
      uint64_t free = 0;
      if (!ParseMiB(f[3], &g.memory_total)) return Unexpected(line);
      bool have_used = ParseMiB(f[4], &used);
      bool have_free = ParseMiB(f[5], &free);
      // Like NVML's memory_used: total - free, so that the driver's reservation counts as used.
      if (have_free && free <= g.memory_total) {
        g.memory_used = g.memory_total - free;
      } else if (have_used) {
        g.memory_used = used;
      } else {
        return Unexpected(line);
      }
      by_uuid[g.uuid] = gpus.size();
      gpus.push_back(std::move(g));
    }

    Result<CommandOutput> apps =
        Query("--query-compute-apps=gpu_uuid,pid,process_name,used_memory");
    if (!apps.ok()) return apps.status();
    if (apps->exit_code != 0) return Failed("--query-compute-apps", *apps);
    std::stringstream app_lines(apps->out);
    while (std::getline(app_lines, line)) {
      std::string t = Trim(line);
      // A line without a field separator is nvidia-smi talking ("No running processes
      // found"), not a row.
      if (t.empty() || t.find(',') == std::string::npos) continue;
      if (!Split(line, 4, 2, &f)) return Unexpected(line);
      auto gpu = by_uuid.find(f[0]);
      if (gpu == by_uuid.end()) {
        notes_.push_back("nvidia-smi lists process " + f[1] + " on unknown GPU " + f[0]);
        continue;
      }
      GpuProcess p;
      p.pid = std::atoi(f[1].c_str());
      size_t slash = f[2].rfind('/');
      p.name = slash == std::string::npos ? f[2] : f[2].substr(slash + 1);
      if (!ParseMiB(f[3], &p.used_bytes)) {
        p.used_bytes = 0;
        notes_.push_back("nvidia-smi does not report the memory of process " + f[1] + " on GPU " +
                         std::to_string(gpus[gpu->second].index) + "; counted as 0 bytes");
      }
      gpus[gpu->second].processes.push_back(std::move(p));
    }
    AttributeProcesses(opt_.proc_root, &gpus);
    return gpus;
  }

  std::vector<std::string> notes() const override { return notes_; }

 private:
  Result<CommandOutput> Query(const std::string& query) {
    return RunCommand({path_, query, "--format=csv,noheader,nounits"}, opt_.nvidia_smi_timeout_s);
  }

  Status Failed(const std::string& what, const CommandOutput& o) const {
    return Status::Unavailable("nvidia-smi " + what + " failed (exit " +
                               std::to_string(o.exit_code) + "): " + FirstLine(o) + kSkipped);
  }

  Status Unexpected(const std::string& line) const {
    return Status::Internal("unexpected nvidia-smi output: \"" + Trim(line) + "\"" + kSkipped);
  }

  std::string path_;
  GpuProbeOptions opt_;
  std::vector<std::string> notes_;
};

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

}  // namespace

Result<std::unique_ptr<GpuProbe>> OpenNvidiaSmiProbe(const GpuProbeOptions& options) {
  std::string path = options.nvidia_smi;
  if (!path.empty()) {
    if (!Executable(path)) return Status::NotFound("nvidia-smi not found at " + path);
  } else {
    const char* env = std::getenv("PATH");
    std::stringstream dirs(env ? env : "/usr/local/bin:/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      std::string candidate = (dir.empty() ? "." : dir) + "/nvidia-smi";
      if (Executable(candidate)) {
        path = candidate;
        break;
      }
    }
    if (path.empty()) return Status::NotFound("nvidia-smi not found in PATH");
  }
  return std::unique_ptr<GpuProbe>(std::make_unique<NvidiaSmiProbe>(path, options));
}

}  // namespace berth
