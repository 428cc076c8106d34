// On-demand services (planners/on_demand.h): the plan writes a socket, a proxy and the model
// server's unit, starts and enables the socket only, never starts the server nor "repairs" one
// that idled out, says what a first request waits, and counts the GPUs as if every on-demand
// service were woken at once, each swap group by its largest member.
#include "planners/on_demand.h"

#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class OnDemandTest : public ScenarioTest {
 protected:
  /// One 80 GiB GPU; service `name` on demand on `port`, its server on `server_port`.
  ServiceSpec& OnDemand(const std::string& name, int port, int server_port, double gmu,
                        const std::string& group = "") {
    ServiceSpec& s = Command(name, {0}, server_port, static_cast<uint64_t>(gmu * GiB(80)));
    s.bind = "127.0.0.1";
    s.on_demand.emplace();
    s.on_demand->public_port = port;
    s.on_demand->idle_stop_ms = 2000;
    s.on_demand->swap_group = group;
    return s;
  }
  static std::string Text(const Plan& p) {
    std::string out;
    for (const Action& a : p.actions)
      out += std::string(ActionKindName(a.kind)) + " " + a.address + ": " + a.detail + "\n";
    for (const Note& n : p.notes) out += n.verb + " " + n.address + ": " + n.detail + "\n";
    return out;
  }
};

TEST_F(OnDemandTest, TheSocketIsStartedAndEnabledAndTheServerIsNeverStarted) {
  Gpus(1, GiB(80));
  OnDemand("chat", 8000, 20001, 0.5);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::string text = Text(p);
  EXPECT_THAT(text, HasSubstr("write-unit unit/chat.service"));
  EXPECT_THAT(text, HasSubstr("write-unit unit/berth-wake-chat.socket"));
  EXPECT_THAT(text, HasSubstr("write-unit unit/berth-wake-chat.service"));
  EXPECT_THAT(text, HasSubstr("start unit/berth-wake-chat.socket"));
  EXPECT_THAT(text, HasSubstr("enable unit/berth-wake-chat.socket"));
  EXPECT_THAT(text, Not(HasSubstr("start service/chat")));
  EXPECT_THAT(text, Not(HasSubstr("enable unit/chat.service")));
  EXPECT_THAT(text, HasSubstr("on demand service/chat: idle: port 8000 is held by its socket; "
                              "a first request waits no start recorded yet (at most its health "
                              "timeout, 30m); stops after 2s without a connection"));
}

TEST_F(OnDemandTest, TheUnitsAreSocketProxyAndAServerThatStopsWhenUnneeded) {
  ServiceSpec& s = OnDemand("chat", 8000, 20001, 0.5, "g");
  OnDemand("code", 8001, 20002, 0.5, "g");
  RenderContext ctx;
  ctx.berth_executable = "/usr/bin/berth";
  ctx.conflicts = SwapGroupConflicts(d, s);
  std::string server = RenderUnit(s, ctx).content;
  EXPECT_THAT(server, HasSubstr("StopWhenUnneeded=yes\nConflicts=code.service\n"));
  // One ordering edge per pair, so that systemd stops the one before it starts the other.
  EXPECT_THAT(server, Not(HasSubstr("After=code.service")));
  RenderContext code_ctx = ctx;
  code_ctx.conflicts = SwapGroupConflicts(d, d.services["code"]);
  EXPECT_THAT(RenderUnit(d.services["code"], code_ctx).content,
              HasSubstr("Conflicts=chat.service\nAfter=chat.service\n"));
  EXPECT_THAT(server, HasSubstr("ExecStartPost=\"/usr/bin/berth\" __wait-healthy "
                                "\"http://127.0.0.1:20001/health\" --timeout-ms 1800000\n"));
  EXPECT_THAT(server, HasSubstr("Restart=no\n"));
  EXPECT_THAT(server, HasSubstr("StartLimitIntervalSec=0\n"));  // every start is a request's
  EXPECT_THAT(server, Not(HasSubstr("StartLimitBurst")));
  EXPECT_THAT(server, Not(HasSubstr("[Install]")));
  auto socket = RenderOnDemandSocket(s, ctx);
  ASSERT_TRUE(socket.ok());
  EXPECT_THAT(socket->content, HasSubstr("ListenStream=0.0.0.0:8000\n"
                                         "Service=berth-wake-chat.service\n"));
  EXPECT_THAT(socket->content, HasSubstr("WantedBy=sockets.target"));
  auto proxy = RenderOnDemandProxy(s, ctx);
  ASSERT_TRUE(proxy.ok());
  EXPECT_THAT(proxy->content, HasSubstr("Wants=chat.service\nAfter=chat.service\n"
                                        "PartOf=chat.service\n"));
  EXPECT_THAT(proxy->content,
              HasSubstr("ExecStart=\"/usr/bin/berth\" __wake-proxy chat.service "
                        "\"http://127.0.0.1:20001/health\" -- /lib/systemd/systemd-socket-proxyd "
                        "--exit-idle-time=2s 127.0.0.1:20001\n"));
}

TEST_F(OnDemandTest, AnIdleServerIsConvergedAndItsFirstRequestWaitIsTheRecordedStart) {
  Gpus(1, GiB(80));
  OnDemand("chat", 8000, 20001, 0.5);
  Converge();
  // Woken by a request, then idle again: the socket listens, the server is inactive.
  o.state.start_times_ms["chat.service"] = {4000, 4200, 9000};
  Plan p = PlanNow();
  EXPECT_TRUE(p.actions.empty()) << Text(p);
  EXPECT_THAT(Text(p), HasSubstr("a first request waits about 4200ms (the median of 3 starts berth "
                                 "recorded)"));
  UnitOf("chat.service").active_state = "active";
  p = PlanNow();
  EXPECT_TRUE(p.actions.empty()) << Text(p);
  EXPECT_THAT(Text(p), HasSubstr("on demand service/chat: running (woken by a request"));
}

TEST_F(OnDemandTest, AStartARequestMadeCountsInTheWaitBeforeBerthRecordsIt) {
  Gpus(1, GiB(80));
  OnDemand("chat", 8000, 20001, 0.5);
  Converge();
  // Woken once by a request and idle again: systemd timed that start, berth recorded nothing.
  ObservedUnit& server = UnitOf("chat.service");
  server.invocation_id = std::string(32, 'a');
  server.last_start_ms = 3200;
  EXPECT_THAT(Text(PlanNow()),
              HasSubstr("a first request waits about 3200ms (its last start, which systemd "
                        "timed); stops after 2s"));
  // With starts berth recorded before it: the newest five, that one the last.
  o.state.start_times_ms["chat.service"] = {4000, 4200, 9000, 5000, 5200};
  EXPECT_THAT(Text(PlanNow()), HasSubstr("waits about 5s (the median of 5 starts: 4 berth "
                                         "recorded and the last, which systemd timed)"));
  // Once recorded (the pass that writes state adds it), it is not counted twice.
  o.state.start_invocations["chat.service"] = server.invocation_id;
  EXPECT_THAT(Text(PlanNow()), HasSubstr("waits about 5s (the median of 5 starts berth recorded)"));
  // Nor is a start berth made itself, which its executor timed.
  o.state.start_invocations.clear();
  o.state.started["chat.service"] = {server.invocation_id, "restart-keys:x"};
  EXPECT_THAT(Text(PlanNow()), HasSubstr("waits about 5s (the median of 5 starts berth recorded)"));
  // A start under way or failed has no time (LastStartMs), and nothing else is counted.
  o.state.started.clear();
  o.state.start_times_ms.clear();
  server.last_start_ms.reset();
  EXPECT_THAT(Text(PlanNow()), HasSubstr("waits no start recorded yet"));
}

TEST_F(OnDemandTest, FeasibilityCountsEachSwapGroupByItsLargestMember) {
  Gpus(1, GiB(80));
  OnDemand("big", 8000, 20001, 0.6, "g");
  OnDemand("small", 8001, 20002, 0.3, "g");
  OnDemand("other", 8002, 20003, 0.3);
  Plan p = PlanNow();
  EXPECT_FALSE(p.blocked()) << Problems(p);  // 0.6 (the group's largest) + 0.3 fit
  // 0.6 + 0.5 do not, though the group's other member (0.3) and 0.5 would.
  d.services["other"].gpu_memory = static_cast<uint64_t>(0.5 * GiB(80));
  p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p), HasSubstr("swap group g 51.5 GB (big, its largest)"));
  d.services["other"].gpu_memory = static_cast<uint64_t>(0.3 * GiB(80));
  d.services["small"].on_demand->swap_group = "";  // now 0.6 + 0.3 + 0.3 may run at once
  p = PlanNow();
  ASSERT_TRUE(p.blocked());
  EXPECT_THAT(Problems(p), HasSubstr("GPU 0: every on-demand service may be woken at once"));
  EXPECT_THAT(Problems(p), HasSubstr("swap group g"));
  d.services["small"].on_demand->swap_group = "g";
  d.services["other"].on_demand->swap_group = "g";
  EXPECT_FALSE(PlanNow().blocked());
}

TEST_F(OnDemandTest, StoppedDarkensThePublicPortAndAbsentRemovesEachUnitOnce) {
  Gpus(1, GiB(80));
  OnDemand("chat", 8000, 20001, 0.5);
  Converge();
  UnitOf("chat.service").active_state = "active";  // woken by a request
  // A changed unit stops the server, and no port goes dark: the socket holds 8000.
  d.services["chat"].env["X"] = "1";
  Plan p = PlanNow();
  EXPECT_THAT(Text(p), HasSubstr("stop service/chat: on demand, its unit changed"));
  EXPECT_TRUE(p.disruptions.empty()) << p.disruptions[0].port;
  // Stopped: the socket's port goes dark, not the server's loopback one.
  d.services["chat"].state = ServiceState::kStopped;
  p = PlanNow();
  ASSERT_EQ(p.disruptions.size(), 1u) << Text(p);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  Converge();
  d.services["chat"].state = ServiceState::kAbsent;
  p = PlanNow();
  int removals = 0;
  for (const Action& a : p.actions) removals += a.kind == ActionKind::kRemoveUnit;
  EXPECT_EQ(removals, 3) << Text(p);
}

}  // namespace
}  // namespace berth::testing
