#include "providers/host/ports.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "providers/host/cgroup.h"
#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

std::string Describe(const ListeningPort& p) {
  return std::to_string(p.port) + " " + p.address + " " + std::to_string(p.pid) + " " + p.process +
         " " + p.unit;
}

std::vector<std::string> Describe(const std::vector<ListeningPort>& ports) {
  std::vector<std::string> out;
  for (const auto& p : ports) out.push_back(Describe(p));
  return out;
}

TEST(DecodeProcNetAddress, DecodesTheKernelsNativeWordOrder) {
  // These hex forms are what a little-endian kernel prints (x86-64, aarch64).
  EXPECT_EQ(DecodeProcNetAddress("0100007F"), "127.0.0.1");
  EXPECT_EQ(DecodeProcNetAddress("00000000"), "0.0.0.0");
  EXPECT_EQ(DecodeProcNetAddress("0B01A8C0"), "192.168.1.11");
  EXPECT_EQ(DecodeProcNetAddress("00000000000000000000000000000000"), "::");
  EXPECT_EQ(DecodeProcNetAddress("00000000000000000000000001000000"), "::1");
  EXPECT_EQ(DecodeProcNetAddress("0000000000000000FFFF00000100007F"), "::ffff:127.0.0.1");
  EXPECT_EQ(DecodeProcNetAddress("0100007"), "");
  EXPECT_EQ(DecodeProcNetAddress("0100007G"), "");
}

/// A /proc with two socket tables and a handful of processes.
class FakeProc {
 public:
  FakeProc() {
    const std::string header =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n";
    const std::string tail = " 00000000:00000000 00:00000000 00000000     0        0 ";
    dir.Write("net/tcp",
              header +  //
                  "   0: 0100007F:1F40 00000000:0000 0A" + tail + "123 1 0 100 0 0 10 0\n" +
                  "   1: 00000000:0016 00000000:0000 0A" + tail + "124 1 0 100 0 0 10 0\n" +
                  // an established connection on the same port: not a listener
                  "   2: 0100007F:1F40 0100007F:C350 01" + tail + "125 1 0 20 4 30 10 -1\n");
    const std::string any6 = "00000000000000000000000000000000";
    dir.Write("net/tcp6", header +  //
                              "   0: " + any6 + ":1F41 " + any6 + ":0000 0A" + tail +
                              "126 1 0 100 0 0 10 0\n" +  //
                              "   1: 00000000000000000000000001000000:0050 " + any6 + ":0000 0A" +
                              tail + "127 1 0 100 0 0 10 0\n");
    // vLLM and a worker it forked share the socket; the api server holds it twice (dup).
    Process(100, "vllm", "0::/system.slice/vllm-x.service\n",
            {"socket:[123]", "socket:[123]", "/dev/null", "socket:[999]"});
    Process(101, "python3", "0::/system.slice/vllm-x.service/payload\n", {"socket:[123]"});
    Process(200, "sshd", "0::/system.slice/ssh.service\n", {"socket:[124]", "pipe:[5]"});
    Process(400, "nginx", "1:name=systemd:/system.slice/nginx.service\n", {"socket:[127]"});
    dir.Write("300/comm", "gone\n");  // exited between listing and reading: no fd/
    dir.Link("400", "self");
    dir.MkDir("sys");
  }

  void Process(int pid, const std::string& comm, const std::string& cgroup,
               const std::vector<std::string>& fds) {
    std::string p = std::to_string(pid);
    dir.Write(p + "/comm", comm + "\n");
    dir.Write(p + "/cgroup", cgroup);
    dir.MkDir(p + "/fd");
    for (size_t i = 0; i < fds.size(); ++i) dir.Link(fds[i], p + "/fd/" + std::to_string(i + 3));
  }

  testing::TempDir dir;
};

TEST(ObserveListeningPorts, JoinsSocketTablesWithTheProcessesHoldingThem) {
  FakeProc proc;
  Result<std::vector<ListeningPort>> ports = ObserveListeningPorts(proc.dir.path());
  ASSERT_TRUE(ports.ok()) << ports.status().message();
  EXPECT_THAT(Describe(*ports), ::testing::ElementsAre("22 0.0.0.0 200 sshd ssh.service",
                                                       "80 ::1 400 nginx nginx.service",
                                                       "8000 127.0.0.1 100 vllm vllm-x.service",
                                                       "8000 127.0.0.1 101 python3 vllm-x.service",
                                                       "8001 :: 0  "));  // held by nobody we see
}

TEST(ObserveListeningPorts, WithoutSocketTablesPortsAreUnknownAndSaySo) {
  testing::TempDir empty;
  Result<std::vector<ListeningPort>> ports = ObserveListeningPorts(empty.path());
  ASSERT_FALSE(ports.ok());
  EXPECT_EQ(ports.status().code(), Status::Code::kIoError);
  EXPECT_THAT(ports.status().message(), HasSubstr(empty.path() + "/net/tcp"));
  EXPECT_THAT(ports.status().message(), HasSubstr("port conflicts cannot be checked"));
}

TEST(ObserveListeningPorts, IPv6OnlyHostsAndIPv4OnlyHostsAreFine) {
  FakeProc proc;
  std::filesystem::remove(proc.dir / "net/tcp6");
  Result<std::vector<ListeningPort>> ports = ObserveListeningPorts(proc.dir.path());
  ASSERT_TRUE(ports.ok());
  EXPECT_EQ(ports->size(), 3u);
}

TEST(ObserveListeningPorts, FindsASocketThisTestListensOnInTheRealProc) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);

  auto start = std::chrono::steady_clock::now();
  Result<std::vector<ListeningPort>> ports = ObserveListeningPorts();
  auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  close(fd);
  ASSERT_TRUE(ports.ok()) << ports.status().message();
  std::cout << "ObserveListeningPorts on the real /proc: " << took.count() << " ms, "
            << ports->size() << " listeners\n";

  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  const ListeningPort* mine = nullptr;
  for (const auto& p : *ports)
    if (p.port == port && p.pid == getpid()) mine = &p;
  ASSERT_NE(mine, nullptr) << "port " << port << " of pid " << getpid() << " not found";
  EXPECT_EQ(mine->address, "127.0.0.1");
  EXPECT_EQ(mine->process, comm);
  EXPECT_EQ(mine->unit, UnitOfPid(getpid()));
}

}  // namespace
}  // namespace berth
