#include "providers/host/ports.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/read_file.h"
#include "providers/host/cgroup.h"

namespace berth {
namespace {

constexpr std::string_view kListen = "0A";  // TCP_LISTEN in include/net/tcp_states.h

struct Socket {
  int port = 0;
  std::string address;
};

bool ParseHex32(std::string_view hex, uint32_t* out) {
  auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), *out, 16);
  return ec == std::errc() && p == hex.data() + hex.size();
}

/// Adds the LISTEN sockets of one table to `by_inode`. False if the table cannot be read.
bool ReadTable(const std::string& file, std::unordered_map<uint64_t, Socket>* by_inode) {
  // /proc's files report no size: the read is bounded (about 900,000 sockets).
  Result<std::string> table = ReadRegularFile(file, {.max_bytes = uint64_t{128} << 20});
  if (!table.ok()) return false;
  std::istringstream in(*table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    if (!(fields >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode))
      continue;
    if (state != kListen) continue;
    size_t colon = local.find(':');
    if (colon == std::string::npos) continue;
    uint32_t port = 0;
    uint64_t ino = 0;
    if (!ParseHex32(std::string_view(local).substr(colon + 1), &port)) continue;
    auto [p, ec] = std::from_chars(inode.data(), inode.data() + inode.size(), ino);
    if (ec != std::errc()) continue;
    std::string address = DecodeProcNetAddress(std::string_view(local).substr(0, colon));
    if (address.empty()) continue;
    (*by_inode)[ino] = Socket{static_cast<int>(port), std::move(address)};
  }
  return true;
}

/// "socket:[12345]" -> 12345; 0 for anything else.
uint64_t SocketInode(std::string_view link) {
  constexpr std::string_view kPrefix = "socket:[";
  if (link.size() < kPrefix.size() + 2 || link.substr(0, kPrefix.size()) != kPrefix ||
      link.back() != ']')
    return 0;
  uint64_t ino = 0;
  std::string_view digits = link.substr(kPrefix.size(), link.size() - kPrefix.size() - 1);
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ino);
  return ec == std::errc() && p == digits.data() + digits.size() ? ino : 0;
}

bool AllDigits(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

std::string Comm(const std::string& proc_root, int pid) {
  Result<std::string> comm =
      ReadRegularFile(proc_root + "/" + std::to_string(pid) + "/comm", {.max_bytes = 4096});
  if (!comm.ok()) return "";
  return comm->substr(0, comm->find('\n'));
}

/// For every process under `proc_root`, the pids holding one of the sockets in `wanted`.
std::multimap<uint64_t, int> Holders(const std::string& proc_root,
                                     const std::unordered_map<uint64_t, Socket>& wanted) {
  std::multimap<uint64_t, int> holders;
  DIR* proc = opendir(proc_root.c_str());
  if (!proc) return holders;
  char link[64];
  while (dirent* pe = readdir(proc)) {
    if (!AllDigits(pe->d_name)) continue;
    int pid = std::atoi(pe->d_name);
    std::string fd_dir = std::string(pe->d_name) + "/fd";
    int fd_fd = openat(dirfd(proc), fd_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_fd < 0) continue;  // gone, or not ours to read
    DIR* fds = fdopendir(fd_fd);
    if (!fds) {
      close(fd_fd);
      continue;
    }
    while (dirent* fe = readdir(fds)) {
      if (fe->d_name[0] == '.') continue;
      ssize_t n = readlinkat(fd_fd, fe->d_name, link, sizeof(link));
      if (n <= 0 || n >= static_cast<ssize_t>(sizeof(link))) continue;
      uint64_t ino = SocketInode(std::string_view(link, static_cast<size_t>(n)));
      if (ino != 0 && wanted.count(ino)) holders.emplace(ino, pid);
    }
    closedir(fds);  // closes fd_fd
  }
  closedir(proc);
  return holders;
}

}  // namespace

std::string DecodeProcNetAddress(std::string_view hex) {
  // The kernel prints each 32-bit word of the address as it lies in memory, read as a native
  // integer: copying the parsed words back into memory restores network byte order.
  char text[INET6_ADDRSTRLEN] = {0};
  if (hex.size() == 8) {
    uint32_t word = 0;
    if (!ParseHex32(hex, &word)) return "";
    in_addr a;
    std::memcpy(&a, &word, sizeof(word));
    return inet_ntop(AF_INET, &a, text, sizeof(text)) ? text : "";
  }
  if (hex.size() == 32) {
    uint32_t words[4];
    for (size_t i = 0; i < 4; ++i)
      if (!ParseHex32(hex.substr(i * 8, 8), &words[i])) return "";
    in6_addr a;
    std::memcpy(&a, words, sizeof(words));
    return inet_ntop(AF_INET6, &a, text, sizeof(text)) ? text : "";
  }
  return "";
}

Result<std::vector<ListeningPort>> ObserveListeningPorts(const std::string& proc_root) {
  std::unordered_map<uint64_t, Socket> sockets;
  bool v4 = ReadTable(proc_root + "/net/tcp", &sockets);
  bool v6 = ReadTable(proc_root + "/net/tcp6", &sockets);
  if (!v4 && !v6) {
    return Status::IoError("cannot read " + proc_root + "/net/tcp or " + proc_root + "/net/tcp6 (" +
                           std::strerror(errno) +
                           "): listening ports are unknown, so port conflicts cannot be "
                           "checked. Is /proc mounted?");
  }
  std::multimap<uint64_t, int> holders = Holders(proc_root, sockets);

  struct Owner {
    std::string process;
    std::string unit;
  };
  std::unordered_map<int, Owner> owners;
  std::vector<ListeningPort> ports;
  for (const auto& [ino, s] : sockets) {
    auto [first, last] = holders.equal_range(ino);
    if (first == last) {
      ports.push_back(ListeningPort{s.port, s.address, 0, "", ""});
      continue;
    }
    for (auto it = first; it != last; ++it) {
      int pid = it->second;
      auto o = owners.find(pid);
      if (o == owners.end())
        o = owners.emplace(pid, Owner{Comm(proc_root, pid), UnitOfPid(pid, proc_root)}).first;
      ports.push_back(ListeningPort{s.port, s.address, pid, o->second.process, o->second.unit});
    }
  }
  auto key = [](const ListeningPort& p) { return std::tie(p.port, p.address, p.pid); };
  std::sort(ports.begin(), ports.end(),
            [&](const ListeningPort& a, const ListeningPort& b) { return key(a) < key(b); });
  ports.erase(
      std::unique(ports.begin(), ports.end(),
                  [&](const ListeningPort& a, const ListeningPort& b) { return key(a) == key(b); }),
      ports.end());
  return ports;
}

}  // namespace berth
