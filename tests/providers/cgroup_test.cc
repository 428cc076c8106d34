#include "providers/host/cgroup.h"

#include <gtest/gtest.h>

#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

struct Case {
  const char* path;
  const char* unit;
};

TEST(UnitOfCgroupPath, ServicesUnderSlicesCountScopesDoNot) {
  const Case cases[] = {
      {"/system.slice/vllm-x.service", "vllm-x.service"},
      {"/system.slice/vllm-x.service/payload", "vllm-x.service"},
      {"/system.slice/vllm-x.service/a.service", "vllm-x.service"},  // sub-cgroup, not a unit
      {"/sdsandbox.t1/system.slice/x.service", "x.service"},         // sandbox seen from host
      {"/system.slice/runner.service/sdsandbox.t1/system.slice/x.service", "x.service"},
      {"/machine.slice/vllm.slice/vllm-y.service", "vllm-y.service"},
      {"/system.slice/_cpu.service", "cpu.service"},  // systemd's cgroup escaping
      {"/user.slice/user-0.slice/session-3.scope", ""},
      {"/system.slice/docker-abc.scope", ""},
      {"/user.slice/user-1000.slice/user@1000.service/app.slice/a.service", "user@1000.service"},
      {"/init.scope", ""},
      {"/", ""},
      {"", ""},
      {"/x.service", ""},  // not under a slice
  };
  for (const Case& c : cases) EXPECT_EQ(UnitOfCgroupPath(c.path), c.unit) << c.path;
}

TEST(UnitOfPid, ReadsV2ThenV1LinesOfTheProcCgroupFile) {
  testing::TempDir proc;
  proc.Write("10/cgroup", "0::/system.slice/vllm-a.service\n");
  proc.Write("11/cgroup",
             "12:cpu,cpuacct:/system.slice/other.service\n"
             "1:name=systemd:/system.slice/legacy.service\n");
  proc.Write("12/cgroup",  // hybrid, with a v2 hierarchy systemd does not use
             "1:name=systemd:/system.slice/hybrid.service\n0::/\n");
  proc.Write("13/cgroup", "0::/user.slice/user-0.slice/session-3.scope\n");
  EXPECT_EQ(UnitOfPid(10, proc.path()), "vllm-a.service");
  EXPECT_EQ(UnitOfPid(11, proc.path()), "legacy.service");
  EXPECT_EQ(UnitOfPid(12, proc.path()), "hybrid.service");
  EXPECT_EQ(UnitOfPid(13, proc.path()), "");
  EXPECT_EQ(UnitOfPid(99, proc.path()), "") << "a process gone meanwhile has no unit";
}

}  // namespace
}  // namespace berth
