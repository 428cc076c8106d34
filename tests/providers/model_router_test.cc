// One port, several models (issue 41): the routed front (RenderRoutedFrontConfig) against
// Debian's real HAProxy 2.6, with a tiny HTTP server per model. Requests go to the server of the
// body's `model`, two streams at once; /v1/models lists every served name; an unknown, missing
// or non-string model is answered by the front and reaches no server; a body past the buffer is
// refused, not misrouted. Every wait is bounded; waits are on events (a chunk read, an answer).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>

#include "core/front.h"
#include "planners/front_render.h"
#include "tests/providers/front_harness.h"
#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

using testing::FreePort;
using testing::HaproxyProcess;
using ::testing::HasSubstr;
using testing::HttpAnswer;
using testing::HttpCall;
using testing::HttpSend;
using testing::TempDir;
using testing::TinyHttpServer;
using namespace std::chrono_literals;

std::string Describe(const HttpAnswer& a) {
  return "outcome " + std::to_string(static_cast<int>(a.outcome)) + " status " +
         std::to_string(a.status) + " " + a.error + " body '" + a.body.substr(0, 300) + "'";
}

/// A POST of `body` with the given extra header lines (each ending in \r\n).
std::string Post(const std::string& path, const std::string& body,
                 const std::string& headers = "Content-Type: application/json\r\n") {
  return "POST " + path + " HTTP/1.1\r\nHost: front\r\nConnection: close\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

/// A POST whose body is sent chunked, in chunks of at most 4 KiB.
std::string ChunkedPost(const std::string& path, const std::string& body) {
  std::string r = "POST " + path +
                  " HTTP/1.1\r\nHost: front\r\nConnection: close\r\n"
                  "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 4096) {
    std::string part = body.substr(at, 4096);
    char size[16];
    snprintf(size, sizeof(size), "%zx\r\n", part.size());
    r += size + part + "\r\n";
  }
  return r + "0\r\n\r\n";
}

/// A stream read as it comes: `first` is set when the first token arrives, with whether the
/// stream had already ended then (a buffered response arrives whole).
struct Stream {
  std::promise<bool> first;  // value: the stream had ended when its first token arrived
  std::future<HttpAnswer> done;
};

std::unique_ptr<Stream> OpenStream(int port, const std::string& model, int chunks) {
  auto s = std::make_unique<Stream>();
  std::promise<bool>* first = &s->first;
  s->done = std::async(std::launch::async, [port, model, chunks, first] {
    HttpAnswer a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string request = Post("/stream?n=" + std::to_string(chunks),
                               R"({"model":")" + model + R"(","stream":true})");
    std::string in;
    bool told = false;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        in.append(buf, static_cast<size_t>(n));
        if (!told && in.find(" tok 0\n") != std::string::npos) {
          first->set_value(in.find("\r\n0\r\n\r\n") != std::string::npos);
          told = true;
        }
      }
    }
    close(fd);
    if (!told) first->set_value(true);
    a.outcome = in.rfind("HTTP/1.1 200", 0) == 0 ? HttpAnswer::Outcome::kAnswered
                                                 : HttpAnswer::Outcome::kError;
    a.status = in.size() > 12 ? std::atoi(in.c_str() + 9) : 0;
    a.body = in;
    return a;
  });
  return s;
}

/// A routed front on a free port, its sockets in a test dir, serving `models`.
class RouterTest : public ::testing::Test {
 protected:
  FrontSpec Spec() {
    FrontSpec spec = DefaultFrontSpec(FreePort());
    spec.bind = "127.0.0.1";
    spec.admin_socket = dir_ / "admin.sock";
    spec.master_socket = dir_ / "master.sock";
    spec.pid_file = dir_ / "haproxy.pid";
    spec.hold_socket = dir_ / "hold.sock";
    spec.ready_path = "/berth/ready";
    return spec;
  }

  void StartRouter(const FrontSpec& spec, const std::vector<RoutedModel>& models) {
    auto config = RenderRoutedFrontConfig(spec, models);
    ASSERT_TRUE(config.ok()) << config.status().message();
    std::ofstream(dir_ / "haproxy.cfg") << *config;
    haproxy_ = std::make_unique<HaproxyProcess>(dir_ / "haproxy.cfg", spec.master_socket,
                                                dir_ / "haproxy.log");
    std::string error;
    ASSERT_TRUE(haproxy_->Start(spec.admin_socket, &error)) << error << "\n" << *config;
    port_ = spec.port;
  }

  /// Starts servers A and B and a router serving "a" (also as "a-alias") on A and "b" on B.
  void StartTwo(FrontSpec spec) {
    ASSERT_TRUE(a_.Start());
    ASSERT_TRUE(b_.Start());
    StartRouter(spec, {{"a", {"A", "127.0.0.1", a_.port()}},
                       {"b", {"B", "127.0.0.1", b_.port()}},
                       {"a-alias", {"A", "127.0.0.1", a_.port()}}});
  }

  HttpAnswer Send(const std::string& request) { return HttpSend(port_, request, 30000); }
  int Reached() const { return a_.answered() + b_.answered(); }

  void TearDown() override {
    if (HasFailure() && haproxy_) std::cerr << "haproxy log:\n" << haproxy_->log();
  }

  TempDir dir_;
  TinyHttpServer a_{"A", FreePort()};
  TinyHttpServer b_{"B", FreePort()};
  std::unique_ptr<HaproxyProcess> haproxy_;
  int port_ = 0;
};

TEST_F(RouterTest, TwoModelsAreServedAtOnceEachByItsOwnServerStreamsIncluded) {
  StartTwo(Spec());
  auto on_a = OpenStream(port_, "a", 30);
  auto on_b = OpenStream(port_, "b", 30);
  auto first_a = on_a->first.get_future();
  auto first_b = on_b->first.get_future();
  ASSERT_EQ(first_a.wait_for(30s), std::future_status::ready);
  ASSERT_EQ(first_b.wait_for(30s), std::future_status::ready);
  // Each stream's first token came while that stream still ran: passed as it came, unbuffered.
  EXPECT_FALSE(first_a.get());
  EXPECT_FALSE(first_b.get());
  // Both streams run now; meanwhile the port answers the list and plain requests of either.
  EXPECT_NE(on_a->done.wait_for(0s), std::future_status::ready);
  EXPECT_NE(on_b->done.wait_for(0s), std::future_status::ready);
  HttpAnswer list = HttpCall(port_, "GET", "/v1/models");
  EXPECT_EQ(list.status, 200) << Describe(list);
  for (auto [model, want] : {std::pair{"a", "A POST "}, {"b", "B POST "}, {"a-alias", "A POST "}}) {
    HttpAnswer r = Send(
        Post("/v1/chat/completions", R"({"model":")" + std::string(model) + R"(","messages":[]})"));
    EXPECT_EQ(r.status, 200) << model << ": " << Describe(r);
    EXPECT_EQ(r.body.rfind(want, 0), 0u) << model << ": " << Describe(r);
  }
  EXPECT_NE(on_a->done.wait_for(0s), std::future_status::ready);  // still streaming then
  HttpAnswer sa = on_a->done.get();
  HttpAnswer sb = on_b->done.get();
  EXPECT_EQ(sa.status, 200) << Describe(sa);
  EXPECT_EQ(sb.status, 200) << Describe(sb);
  EXPECT_THAT(sa.body, HasSubstr("A tok 29\n"));
  EXPECT_THAT(sb.body, HasSubstr("B tok 29\n"));
  EXPECT_EQ(sa.body.find("B tok"), std::string::npos);
  EXPECT_EQ(sb.body.find("A tok"), std::string::npos);
  EXPECT_THAT(sa.body, HasSubstr("\r\n0\r\n\r\n"));
}

TEST_F(RouterTest, TheModelListIsEveryServedNameWhetherItsServerRunsOrNot) {
  // Neither server runs: the list comes from the front.
  StartRouter(Spec(), {{"a", {"A", "127.0.0.1", a_.port()}},
                       {"b", {"B", "127.0.0.1", b_.port()}},
                       {"a-alias", {"A", "127.0.0.1", a_.port()}}});
  HttpAnswer list = HttpCall(port_, "GET", "/v1/models");
  ASSERT_EQ(list.status, 200) << Describe(list);
  EXPECT_THAT(list.head, HasSubstr("\r\ncontent-type: application/json"));
  EXPECT_EQ(list.body, R"({"object":"list","data":[{"id":"a","object":"model","owned_by":"berth"},)"
                       R"({"id":"b","object":"model","owned_by":"berth"},)"
                       R"({"id":"a-alias","object":"model","owned_by":"berth"}]})");
  // The front's own paths still answer.
  EXPECT_EQ(HttpCall(port_, "GET", kFrontMonitorUri).status, 200);
  EXPECT_EQ(HttpCall(port_, "GET", "/berth/ready").status, 200);
}

TEST_F(RouterTest, AnUnknownModelIsAnOpenAi404NamingTheServedModels) {
  StartTwo(Spec());
  HttpAnswer r = Send(Post("/v1/chat/completions", R"({"model":"c\"d","messages":[]})"));
  ASSERT_EQ(r.status, 404) << Describe(r);
  EXPECT_THAT(r.head, HasSubstr("\r\ncontent-type: application/json"));
  EXPECT_EQ(
      r.body,
      R"({"error":{"message":"The model `c\"d` does not exist. This port serves `a`, `b`, )"
      R"(`a-alias`.","type":"invalid_request_error","param":"model","code":"model_not_found"}})");
  // A prefix, a suffix or another case of a served name is another model.
  for (const char* model : {"", "A", "a ", "aa", "a-alia", "b\\u0000"}) {
    HttpAnswer u = Send(Post("/v1/completions", R"({"model":")" + std::string(model) + R"("})"));
    EXPECT_EQ(u.status, 404) << model << ": " << Describe(u);
  }
  EXPECT_EQ(Reached(), 0);
}

TEST_F(RouterTest, AMissingOrNonStringModelIsAnsweredByTheFrontAndReachesNoServer) {
  StartTwo(Spec());
  // No string model at the top level: 400.
  for (const char* body : {R"({"messages":[]})", R"({"model":null})", R"({"model":["a"]})",
                           R"({"model":{"a":"a"}})", R"({"messages":[{"model":"a"}]})",
                           R"({"input":{"model":"b"}})", "model=a", "", "[\"a\"]"}) {
    HttpAnswer r = Send(Post("/v1/embeddings", body));
    EXPECT_EQ(r.status, 400) << body << ": " << Describe(r);
    EXPECT_THAT(r.body, HasSubstr(R"("param":"model")")) << body;
    EXPECT_THAT(r.body, HasSubstr("This port serves `a`, `b`, `a-alias`.")) << body;
  }
  // A number or a boolean names no served model: 404.
  for (const char* body : {R"({"model":1})", R"({"model":true})", R"({"model":-1.5e3})"}) {
    HttpAnswer r = Send(Post("/v1/embeddings", body));
    EXPECT_EQ(r.status, 404) << body << ": " << Describe(r);
  }
  // A request with no body at all (a GET of another path) names no model either.
  EXPECT_EQ(HttpCall(port_, "GET", "/health").status, 400);
  EXPECT_EQ(Reached(), 0);
}

TEST_F(RouterTest, TheContentTypeAndTheBodysFramingDoNotChangeTheRoute) {
  StartTwo(Spec());
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"model":"b"})";
  for (const char* headers :
       {"Content-Type: application/json; charset=utf-8\r\n", "Content-Type: text/plain\r\n",
        "Content-Type: APPLICATION/JSON\r\n", ""}) {
    HttpAnswer r = Send(Post("/v1/chat/completions", body, headers));
    EXPECT_EQ(r.status, 200) << headers << Describe(r);
    EXPECT_EQ(r.body.rfind("B POST ", 0), 0u) << headers << Describe(r);
  }
  HttpAnswer chunked = Send(ChunkedPost("/v1/chat/completions", body));
  EXPECT_EQ(chunked.status, 200) << Describe(chunked);
  EXPECT_EQ(chunked.body.rfind("B POST ", 0), 0u) << Describe(chunked);
  EXPECT_EQ(a_.answered(), 0);
}

TEST_F(RouterTest, ABodyPastTheBufferIsRefusedNotMisrouted) {
  FrontSpec spec = Spec();
  spec.buffer_bytes = 16384;  // the smallest the front takes: about 15 KiB of body is read
  StartTwo(spec);
  const std::string messages =
      R"("messages":[{"role":"user","content":")" + std::string(40000, 'x') + R"("}])";
  // The model past the buffer: the front cannot see it and says so.
  HttpAnswer late = Send(Post("/v1/chat/completions", "{" + messages + R"(,"model":"b"})"));
  EXPECT_EQ(late.status, 413) << Describe(late);
  EXPECT_THAT(late.body, HasSubstr("raise the front\\u0027s buffer_bytes"));
  // Sent chunked there is no length to compare: no model found, 400; never a server.
  HttpAnswer late_chunked =
      Send(ChunkedPost("/v1/chat/completions", "{" + messages + R"(,"model":"b"})"));
  EXPECT_EQ(late_chunked.status / 100, 4) << Describe(late_chunked);
  EXPECT_EQ(Reached(), 0);
  // The model before the cut: routed, and the server gets the whole body.
  const std::string early = R"({"model":"b",)" + messages + "}";
  HttpAnswer r = Send(Post("/v1/chat/completions", early));
  EXPECT_EQ(r.status, 200) << Describe(r);
  EXPECT_EQ(r.body, "B POST " + std::to_string(early.size()) + "\n");
  EXPECT_EQ(a_.answered(), 0);
}

// Served names are user text: quotes, backslashes, '$', '#', '%' and HAProxy's own sample syntax
// stay text in the configuration and in the JSON answers, and match only themselves.
TEST_F(RouterTest, ServedNamesWithHAProxyAndJsonSyntaxAreMatchedAsText) {
  ASSERT_TRUE(a_.Start());
  ASSERT_TRUE(b_.Start());
  const std::string hostile = R"(it's "x" \ $HOME #c %[hdr(host)] { })";
  StartRouter(Spec(), {{hostile, {"A", "127.0.0.1", a_.port()}},
                       {"Qwen/Qwen3-8B", {"B", "127.0.0.1", b_.port()}}});
  HttpAnswer r =
      Send(Post("/v1/chat/completions", R"({"model":"it's \"x\" \\ $HOME #c %[hdr(host)] { }"})"));
  EXPECT_EQ(r.status, 200) << Describe(r);
  EXPECT_EQ(r.body.rfind("A POST ", 0), 0u) << Describe(r);
  HttpAnswer q = Send(Post("/v1/chat/completions", R"({"model":"Qwen/Qwen3-8B"})"));
  EXPECT_EQ(q.body.rfind("B POST ", 0), 0u) << Describe(q);
  for (const char* other : {"$HOME", "front", "%[hdr(host)]", "it's"}) {
    HttpAnswer u = Send(Post("/v1/chat/completions", R"({"model":")" + std::string(other) + "\"}"));
    EXPECT_EQ(u.status, 404) << other << ": " << Describe(u);
  }
  HttpAnswer list = HttpCall(port_, "GET", "/v1/models");
  EXPECT_THAT(list.body, HasSubstr(R"({"id":"it\u0027s \u0022x\u0022 \u005c \u0024HOME )"
                                   R"(\u0023c \u0025\u005bhdr\u0028host\u0029\u005d \u007b )"
                                   R"(\u007d","object":"model","owned_by":"berth"})"));
  EXPECT_EQ(a_.answered(), 1);
  EXPECT_EQ(b_.answered(), 1);
}

TEST(RoutedFrontRenderTest, KeepsTheFrontsHealthReadyPathHoldLoopAndAdminSocket) {
  FrontSpec spec = DefaultFrontSpec(8000);
  spec.ready_path = "/berth/ready";
  auto config = RenderRoutedFrontConfig(spec, {{"kimi-k2", {"kimi", "127.0.0.1", 8001}},
                                               {"minimax", {"minimax", "127.0.0.1", 8002}}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  for (const char* want :
       {"  stats socket /run/berth/front-8000/admin.sock mode 600 level admin",
        "  monitor-uri /berth/front\n", "  tune.bufsize 524288\n",
        "{ path /berth/ready } !{ nbsrv(ready) gt 0 }", "  option http-buffer-request\n",
        "  http-request set-var(txn.model) req.body,json_query('$.model')\n",
        "  acl served_model var(txn.model),hex -m str 6B696D692D6B32\n",
        "  use_backend model-kimi if { var(txn.model),hex -m str 6B696D692D6B32 }\n",
        "backend model-kimi\n", "  server kimi 127.0.0.1:8001\n",
        "  server hold unix@/run/berth/front-8000/hold.sock disabled\n",
        "  retry-on conn-failure 425\n", "frontend hold\n", "backend ready\n",
        // A stream's tokens pass as they come (tests/bench/on_demand --routed: without it the
        // first token came 55 ms later through the front than without one).
        "  option http-no-delay\n"})
    EXPECT_THAT(*config, HasSubstr(want));
  EXPECT_EQ(config->find("default_backend"), std::string::npos) << "no model is a default";
  TempDir dir;
  dir.Write("haproxy.cfg", *config);
  std::string check = HaproxyProcess::Binary() + " -c -q -f " + (dir / "haproxy.cfg");
  EXPECT_EQ(std::system(check.c_str()), 0) << *config;
}

TEST(RoutedFrontRenderTest, NamesThatCannotBeMatchedSafelyAreRefused) {
  FrontSpec spec = DefaultFrontSpec(8000);
  spec.active = "x";
  spec.backends = {{"x", "127.0.0.1", 8009}};
  auto config = RenderRoutedFrontConfig(
      spec, {{"", {"A", "127.0.0.1", 8001}},
             {"line\nbreak", {"A", "127.0.0.1", 8001}},
             {"caf\xc3\xa9", {"A", "127.0.0.1", 8001}},
             {"123", {"A", "127.0.0.1", 8001}},
             {"-1.5e3", {"A", "127.0.0.1", 8001}},
             {std::string(kMaxServedNameBytes + 1, 'n'), {"A", "127.0.0.1", 8001}},
             {"twice", {"A", "127.0.0.1", 8001}},
             {"twice", {"A", "127.0.0.1", 8001}},
             {"moved", {"A", "127.0.0.1", 8002}},
             {"hold-name", {"hold", "127.0.0.1", 8003}},
             {"spaced", {"a b", "127.0.0.1", 8004}}});
  ASSERT_FALSE(config.ok());
  const std::string m = config.status().message();
  for (const char* want :
       {"served name '' is not 1..200 bytes", "'line\\u000abreak' is not printable ASCII",
        "'caf\\u00c3\\u00a9' is not printable ASCII", "'123' is a JSON number",
        "'-1.5e3' is a JSON number", "'twice' is served twice",
        "front backend 'A' is given two addresses", "'hold' is the hold server's",
        "'a b' is not [A-Za-z0-9_.-]+", "not from backends", "has no active server"})
    EXPECT_THAT(m, HasSubstr(want));
  // Names that only look like numbers are names.
  for (const char* name : {"1a", "e5", "01", "1.", "-", "gpt-4o", "llama3.1:8b"}) {
    auto ok = RenderRoutedFrontConfig(DefaultFrontSpec(8000), {{name, {"A", "127.0.0.1", 8001}}});
    EXPECT_TRUE(ok.ok()) << name << ": " << ok.status().message();
  }
}

TEST_F(RouterTest, AFrontWhoseServicesAllStoppedListsNoModelAndAnswersEachRequest404) {
  StartRouter(Spec(), {});
  HttpAnswer list = Send("GET /v1/models HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(list.status, 200) << Describe(list);
  EXPECT_EQ(list.body, R"({"object":"list","data":[]})");
  HttpAnswer r = Send(Post("/v1/chat/completions", R"({"model":"a","messages":[]})"));
  EXPECT_EQ(r.status, 404) << Describe(r);
  EXPECT_THAT(r.body, HasSubstr("The model `a` does not exist. This port serves no model."));
}

}  // namespace
}  // namespace berth
