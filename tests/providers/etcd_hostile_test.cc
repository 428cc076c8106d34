// The etcd client against things that are not a healthy etcd: a loopback HTTP server answering
// wrong JSON, wrong types, huge bodies, non-200 statuses, non-base64 keys, or nothing at all.
// Every call returns an error naming the endpoint and the call: no exception, no crash. And
// ConnectEtcd's configuration errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "providers/etcd/etcd.h"
#include "tests/support/etcd_server.h"

namespace berth {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// A one-thread HTTP/1.1 server on 127.0.0.1 answering each path with a canned status and
/// body (Connection: close), or hanging up without an answer when `hang_up`.
class HostileServer {
 public:
  struct Response {
    int status = 200;
    std::string body;
    bool hang_up = false;
  };

  explicit HostileServer(std::map<std::string, Response> routes) : routes_(std::move(routes)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostileServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int conn = accept(fd_, nullptr, nullptr);
      if (conn < 0) continue;
      Answer(conn);
      close(conn);
    }
  }
  void Answer(int conn) {
    std::string request;
    char buf[4096];
    size_t head_end;
    while ((head_end = request.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = read(conn, buf, sizeof(buf));
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    size_t length = 0;
    if (size_t at = request.find("Content-Length: "); at != std::string::npos)
      length = std::strtoul(request.c_str() + at + 16, nullptr, 10);
    while (request.size() < head_end + 4 + length) {
      ssize_t n = read(conn, buf, sizeof(buf));
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    size_t sp = request.find(' ');
    std::string path = request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
    auto it = routes_.find(path);
    Response r = it != routes_.end() ? it->second : Response{404, "404 page not found"};
    if (r.hang_up) return;
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " X\r\nContent-Type: " +
                      "application/json\r\nConnection: close\r\nContent-Length: " +
                      std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
    for (size_t sent = 0; sent < out.size();) {
      ssize_t n = send(conn, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the client gave up (a body too long for it)
      sent += static_cast<size_t>(n);
    }
  }

  std::map<std::string, Response> routes_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::unique_ptr<Etcd> Connect(const HostileServer& server, const std::string& user = "") {
  EtcdOptions options;
  options.endpoints = {server.url()};
  options.username = user;
  options.password = user.empty() ? "" : "pw";
  options.timeout = std::chrono::seconds(5);
  Result<std::unique_ptr<Etcd>> etcd = ConnectEtcd(options);
  EXPECT_TRUE(etcd.ok()) << etcd.status().message();
  return std::move(*etcd);
}

/// Options with `endpoints` and, when given, a client certificate and key.
EtcdOptions Options(std::vector<std::string> endpoints, std::string cert = "",
                    std::string key = "") {
  EtcdOptions options;
  options.endpoints = std::move(endpoints);
  options.cert_file = std::move(cert);
  options.key_file = std::move(key);
  return options;
}

const char* kHeader = R"("header":{"revision":"2"})";

TEST(EtcdHostileTest, NotJsonIsAnInternalErrorNamingEndpointAndCall) {
  HostileServer server({{"/v3/kv/range", {200, "<html>hello</html>"}},
                        {"/v3/kv/put", {200, ""}},
                        {"/v3/lease/keepalive", {200, "{\"result\":"}}});
  std::unique_ptr<Etcd> etcd = Connect(server);
  Result<std::vector<EtcdKv>> kvs = etcd->Range("a/");
  EXPECT_EQ(kvs.status().code(), Status::Code::kInternal);
  EXPECT_THAT(kvs.status().message(),
              AllOf(HasSubstr(server.url()), HasSubstr("range"), HasSubstr("not JSON"),
                    HasSubstr("<html>hello</html>")));
  Status put = etcd->Put("k", "v");
  EXPECT_EQ(put.code(), Status::Code::kInternal);
  EXPECT_THAT(put.message(), AllOf(HasSubstr(server.url()), HasSubstr("put")));
  Result<int64_t> ttl = etcd->KeepAlive(5);
  EXPECT_EQ(ttl.status().code(), Status::Code::kInternal);
  EXPECT_THAT(ttl.status().message(), HasSubstr("lease keepalive"));
}

TEST(EtcdHostileTest, WrongTypesAreInternalErrorsSayingWhichField) {
  std::string h = kHeader;
  HostileServer server({
      {"/v3/kv/range", {200, "{" + h + R"(,"kvs":[{"key":"YQ==","mod_revision":{}}]})"}},
      {"/v3/kv/txn", {200, "{" + h + R"(,"succeeded":"yes"})"}},
      {"/v3/lease/grant", {200, "{" + h + R"(,"ID":[1],"TTL":"5"})"}},
      {"/v3/lease/keepalive", {200, R"({"result":{"ID":"5","TTL":true}})"}},
      {"/v3/kv/put", {200, "[1,2]"}},
      {"/v3/kv/deleterange", {200, "{\"nothing\":1}"}},
  });
  std::unique_ptr<Etcd> etcd = Connect(server);
  EXPECT_THAT(etcd->Get("a").status().message(), HasSubstr("\"mod_revision\" is not an integer"));
  Result<bool> created = etcd->CreateIfAbsent("a", "b", 0);
  EXPECT_EQ(created.status().code(), Status::Code::kInternal);
  EXPECT_THAT(created.status().message(),
              AllOf(HasSubstr("txn (create-if-absent)"), HasSubstr("not a boolean")));
  EXPECT_THAT(etcd->DeleteIfLease("a", 1).status().message(), HasSubstr("not a boolean"));
  EXPECT_THAT(etcd->GrantLease(std::chrono::seconds(5)).status().message(),
              AllOf(HasSubstr("lease grant"), HasSubstr("\"ID\" is not an integer")));
  EXPECT_THAT(etcd->KeepAlive(5).status().message(), HasSubstr("\"TTL\" is not an integer"));
  EXPECT_EQ(etcd->Put("a", "b").code(), Status::Code::kInternal);
  EXPECT_THAT(etcd->Delete("a").message(), HasSubstr("no \"header\""));
}

TEST(EtcdHostileTest, NonBase64KeysAndForeignKeysAreRefused) {
  std::string h = kHeader;
  HostileServer server({
      {"/v3/kv/range", {200, "{" + h + R"(,"kvs":[{"key":"%%%not-base64","value":"MQ=="}]})"}},
      {"/v3/kv/txn",
       {200,
        "{" + h + R"(,"responses":[{"response_range":{"kvs":[{"key":"eg==","value":"MQ=="}]}}]})"}},
  });
  std::unique_ptr<Etcd> etcd = Connect(server);
  Result<std::vector<EtcdKv>> kvs = etcd->Range("a");
  EXPECT_EQ(kvs.status().code(), Status::Code::kInternal);
  EXPECT_THAT(kvs.status().message(), HasSubstr("\"key\" is not base64"));
  // A failed create whose range names another key ("z") than the one asked for ("a").
  Result<bool> created = etcd->CreateIfAbsent("a", "b", 0);
  EXPECT_EQ(created.status().code(), Status::Code::kInternal);
  EXPECT_THAT(created.status().message(), HasSubstr("not that one key"));
}

TEST(EtcdHostileTest, AHugeBodyIsCutOffAndRefused) {
  HostileServer server({{"/v3/kv/range", {200, std::string(17 << 20, 'x')}}});
  std::unique_ptr<Etcd> etcd = Connect(server);
  Result<std::vector<EtcdKv>> kvs = etcd->Range("a");
  EXPECT_EQ(kvs.status().code(), Status::Code::kInternal);
  EXPECT_THAT(kvs.status().message(), AllOf(HasSubstr(server.url()), HasSubstr("longer than")));
}

// A server that always says there is more, with the same key: the pages must move forward, so
// the range ends with an error instead of asking forever.
TEST(EtcdHostileTest, ARangeWhosePagesDoNotMoveOnIsRefused) {
  std::string h = kHeader;
  HostileServer server(
      {{"/v3/kv/range",
        {200, "{" + h + R"(,"kvs":[{"key":"YQ==","value":"MQ=="}],"more":true})"}}});
  std::unique_ptr<Etcd> etcd = Connect(server);
  Result<std::vector<EtcdKv>> kvs = etcd->Range("a");
  EXPECT_EQ(kvs.status().code(), Status::Code::kInternal);
  EXPECT_THAT(kvs.status().message(),
              AllOf(HasSubstr(server.url()), HasSubstr("keys before the one asked for")));
}

TEST(EtcdHostileTest, NonOkStatusesWithoutAnEtcdErrorAreInternal) {
  HostileServer server({
      {"/v3/kv/put", {502, "{\"proxy\":\"bad gateway\"}"}},
      {"/v3/kv/range", {503, R"({"error":"etcdserver: no leader","code":14})"}},
      {"/v3/kv/txn", {500, R"({"error":"something odd","code":13})"}},
  });
  std::unique_ptr<Etcd> etcd = Connect(server);
  Status put = etcd->Put("a", "b");
  EXPECT_EQ(put.code(), Status::Code::kInternal);
  EXPECT_THAT(put.message(), AllOf(HasSubstr("HTTP 502"), HasSubstr("put")));
  // etcd's own "cannot serve now" is transient.
  Result<std::vector<EtcdKv>> kvs = etcd->Range("a");
  EXPECT_EQ(kvs.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(kvs.status().message(), HasSubstr("no leader"));
  EXPECT_EQ(etcd->CreateIfAbsent("a", "b", 0).status().code(), Status::Code::kInternal);
  Result<std::optional<EtcdKv>> unknown_path = etcd->Get("a");  // /v3/kv/range, the 503 again
  EXPECT_FALSE(unknown_path.ok());
  EXPECT_EQ(etcd->Revoke(5).code(), Status::Code::kInternal);  // 404 "404 page not found"
}

TEST(EtcdHostileTest, AHangUpIsUnavailableAndABadTokenAnswerIsInternal) {
  HostileServer server({
      {"/v3/kv/put", {0, "", /*hang_up=*/true}},
      {"/v3/auth/authenticate", {200, "{" + std::string(kHeader) + R"(,"token":5})"}},
  });
  std::unique_ptr<Etcd> etcd = Connect(server);
  Status put = etcd->Put("a", "b");
  EXPECT_EQ(put.code(), Status::Code::kUnavailable);
  EXPECT_THAT(put.message(), HasSubstr(server.url()));
  std::unique_ptr<Etcd> with_user = Connect(server, "root");
  Status auth = with_user->Put("a", "b");
  EXPECT_EQ(auth.code(), Status::Code::kInternal);
  EXPECT_THAT(auth.message(), AllOf(HasSubstr("authenticate"), HasSubstr("no \"token\"")));
}

TEST(EtcdHostileTest, ARequestSentWithoutAnswerIsNotRepeatedElsewhereButTheNextOneMovesOn) {
  BERTH_REQUIRE_ETCD();
  testing::EtcdServer etcd_server;
  std::string error;
  ASSERT_TRUE(etcd_server.Start(&error)) << error;
  HostileServer hang_up({{"/v3/kv/put", {0, "", /*hang_up=*/true}}});
  EtcdOptions options;
  options.endpoints = {hang_up.url(), etcd_server.client_url()};
  Result<std::unique_ptr<Etcd>> etcd = ConnectEtcd(options);
  ASSERT_TRUE(etcd.ok());
  Result<std::unique_ptr<Etcd>> direct = ConnectEtcd(Options({etcd_server.client_url()}));
  ASSERT_TRUE(direct.ok());

  // The put reached the first endpoint, which hung up: it may have been applied there, so it
  // is not sent to the second one.
  Status put = (*etcd)->Put("slot", "me");
  EXPECT_EQ(put.code(), Status::Code::kUnavailable);
  EXPECT_THAT(put.message(),
              AllOf(HasSubstr(hang_up.url()), HasSubstr("may or may not have been applied")));
  Result<std::optional<EtcdKv>> kv = (*direct)->Get("slot");
  ASSERT_TRUE(kv.ok());
  EXPECT_FALSE(kv->has_value());
  // The next request starts at the second endpoint.
  put = (*etcd)->Put("slot", "me");
  ASSERT_TRUE(put.ok()) << put.message();
  kv = (*direct)->Get("slot");
  ASSERT_TRUE(kv.ok() && kv->has_value());
}

// A watch against things that are not etcd's watch stream: a line that is not JSON, a message of
// the wrong shape, an error status without etcd's error, etcd's error, a stream that ends with no
// change. Each is an error naming the endpoint and "watch", never a change nor an exception;
// a cancel for a compacted revision is a change to read again.
TEST(EtcdHostileTest, AWatchStreamThatIsNotEtcdsIsAnErrorNamingTheWatch) {
  const std::string created = R"({"result":{"header":{"revision":"3"},"created":true}})";
  struct Case {
    HostileServer::Response response;
    Status::Code code;
    const char* says;
  };
  std::vector<Case> cases = {
      {{200, created + "\n<html>hello</html>\n"}, Status::Code::kInternal, "not JSON"},
      {{200, created + "\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"!!\"}}]}}\n"},
       Status::Code::kInternal,
       "not base64"},
      {{502, "bad gateway"}, Status::Code::kInternal, "not JSON"},
      {{503, "{}"}, Status::Code::kInternal, "HTTP 503"},
      {{200, R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})"},
       Status::Code::kUnavailable,
       "no leader"},
      {{200, created + "\n"}, Status::Code::kUnavailable, "ended the stream"},
      {{200, created + "\n" + R"({"result":{"canceled":true,"cancel_reason":"x\u001b[2J"}})"},
       Status::Code::kInternal,
       R"(canceled the watch (x\x1b[2J))"},
      {{200, "", /*hang_up=*/true}, Status::Code::kUnavailable, "watch"},
      // A line that never ends: cut at 16 MiB, not read into memory whole.
      {{200, created + "\n" + std::string((16 << 20) + 1, 'x')},
       Status::Code::kInternal,
       "longer than 16777216 bytes"},
  };
  for (const Case& c : cases) {
    HostileServer server({{"/v3/watch", c.response}});
    auto etcd = Connect(server);
    auto w = etcd->WaitForChange("/f/", 4, std::chrono::seconds(5));
    ASSERT_FALSE(w.ok()) << c.says;
    EXPECT_EQ(w.status().code(), c.code) << w.status().message();
    EXPECT_THAT(w.status().message(), AllOf(HasSubstr(c.says), HasSubstr("watch")));
    if (c.code == Status::Code::kInternal) {
      EXPECT_THAT(w.status().message(), HasSubstr(server.url()));
    }
  }
  HostileServer compacted(
      {{"/v3/watch",
        {200, created + "\n" + R"({"result":{"canceled":true,"compact_revision":"9"}})"}}});
  auto w = Connect(compacted)->WaitForChange("/f/", 4, std::chrono::seconds(5));
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_TRUE(w->changed);
  EXPECT_TRUE(w->compacted);
}

TEST(EtcdConfigTest, ConnectEtcdNamesWhatIsWrong) {
  auto error = [](const EtcdOptions& options) {
    Result<std::unique_ptr<Etcd>> etcd = ConnectEtcd(options);
    EXPECT_EQ(etcd.status().code(), Status::Code::kInvalidArgument);
    return etcd.status().message();
  };
  EXPECT_THAT(error(Options({})), HasSubstr("no endpoint"));
  EXPECT_THAT(error(Options({"ftp://etcd:2379"})),
              AllOf(HasSubstr("'ftp://etcd:2379'"), HasSubstr("scheme 'ftp' is not allowed")));
  EXPECT_THAT(error(Options({"etcd:2379"})), HasSubstr("'etcd:2379'"));
  EXPECT_THAT(error(Options({"unix://run/etcd.sock"})), HasSubstr("not absolute"));
  EXPECT_THAT(error(Options({"http://user:pw@etcd:2379"})), HasSubstr("credentials"));
  EXPECT_THAT(error(Options({"https://etcd:2379"}, "/etc/berth/client.pem")),
              HasSubstr("cert_file is set but key_file is not"));
  EXPECT_THAT(error(Options({"https://etcd:2379"}, "", "/etc/berth/client.key")),
              HasSubstr("key_file is set but cert_file is not"));
  // Every problem at once.
  EXPECT_THAT(error(Options({"ftp://a", "unix://b"}, "c")),
              AllOf(HasSubstr("ftp"), HasSubstr("unix://b"), HasSubstr("key_file")));
  EXPECT_TRUE(ConnectEtcd(Options({"http://127.0.0.1:2379", "https://[::1]:2379/",
                                   "unix:///run/etcd.sock:2379"},
                                  "c.pem", "c.key"))
                  .ok());
}

}  // namespace
}  // namespace berth
