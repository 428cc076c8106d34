// The etcd client against a real etcd (tests/support/etcd_server.h): keys and values as bytes,
// prefix ranges, transactions under contention, leases, failover, unix sockets, auth, and etcd
// going away and coming back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <thread>

#include "providers/etcd/etcd.h"
#include "tests/support/etcd_server.h"

namespace berth {
namespace {

using ::testing::AllOf;
using testing::EtcdServer;
using ::testing::HasSubstr;
using ::testing::Not;

/// Polls `done` every 50 ms until it holds or `limit` passes; whether it held.
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::unique_ptr<Etcd> Connect(EtcdOptions options) {
  Result<std::unique_ptr<Etcd>> etcd = ConnectEtcd(options);
  EXPECT_TRUE(etcd.ok()) << etcd.status().message();
  return etcd.ok() ? std::move(*etcd) : nullptr;
}

std::unique_ptr<Etcd> Connect(const std::string& endpoint) {
  EtcdOptions options;
  options.endpoints = {endpoint};
  return Connect(options);
}

/// A port nothing listens on (bound, never listening, for as long as it lives).
class DeadPort {
 public:
  DeadPort();
  ~DeadPort();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

DeadPort::DeadPort() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port_ = ntohs(addr.sin_port);
}

DeadPort::~DeadPort() { close(fd_); }

class EtcdClientTest : public ::testing::Test {
 protected:
  void StartEtcd(EtcdServer::Options options = {}) {
    server_ = std::make_unique<EtcdServer>(options);
    std::string error;
    ASSERT_TRUE(server_->Start(&error)) << error;
    etcd_ = Connect(server_->client_url());
    ASSERT_NE(etcd_, nullptr);
  }
  std::optional<EtcdKv> MustGet(Etcd& etcd, const std::string& key) {
    Result<std::optional<EtcdKv>> kv = etcd.Get(key);
    EXPECT_TRUE(kv.ok()) << kv.status().message();
    return kv.ok() ? *kv : std::nullopt;
  }
  bool Gone(const std::string& key) {
    Result<std::optional<EtcdKv>> kv = etcd_->Get(key);
    return kv.ok() && !kv->has_value();
  }

  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<Etcd> etcd_;
};

// More under a prefix than one answer may hold (17 values of 1 MiB: 23 MiB of base64, past
// the 16 MiB berth reads of one answer): the range comes in pages, whole; with a bound on each
// value the large ones come back as keys marked too large, the small ones as they are.
TEST_F(EtcdClientTest, ARangeLargerThanOneAnswerIsReadInPagesAndLargeValuesAreLeftOut) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  const std::string big(1 << 20, 'b');
  for (int i = 0; i < 17; ++i) {
    char key[64];
    std::snprintf(key, sizeof key, "fleet/hosts/big-%02d", i);
    ASSERT_TRUE(etcd_->Put(key, big + std::to_string(i)).ok()) << key;
  }
  for (const char* small : {"fleet/hosts/a", "fleet/hosts/m", "fleet/hosts/z"})
    ASSERT_TRUE(etcd_->Put(small, std::string("report of ") + small).ok());
  ASSERT_TRUE(etcd_->Put("fleet/other", "not in the prefix").ok());

  Result<std::vector<EtcdKv>> all = etcd_->Range("fleet/hosts/");
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 20u);
  EXPECT_EQ((*all)[0].key, "fleet/hosts/a");
  for (int i = 0; i < 17; ++i) {
    const EtcdKv& kv = (*all)[static_cast<size_t>(i) + 1];
    EXPECT_EQ(kv.value, big + std::to_string(i)) << kv.key;
    EXPECT_FALSE(kv.too_large);
  }
  EXPECT_EQ((*all)[19].key, "fleet/hosts/z");

  Result<std::vector<EtcdKv>> bounded = etcd_->Range("fleet/hosts/", 0, 64 * 1024);
  ASSERT_TRUE(bounded.ok()) << bounded.status().message();
  ASSERT_EQ(bounded->size(), 20u);
  int too_large = 0;
  for (const EtcdKv& kv : *bounded) {
    if (kv.key.starts_with("fleet/hosts/big-")) {
      EXPECT_TRUE(kv.too_large) << kv.key;
      EXPECT_TRUE(kv.value.empty()) << kv.key;
      ++too_large;
    } else {
      EXPECT_FALSE(kv.too_large) << kv.key;
      EXPECT_EQ(kv.value, "report of " + kv.key);
    }
  }
  EXPECT_EQ(too_large, 17);

  Result<std::vector<EtcdKv>> first = etcd_->Range("fleet/hosts/", 5);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->size(), 5u);
  EXPECT_EQ(first->back().key, "fleet/hosts/big-03");
}

TEST_F(EtcdClientTest, BinaryKeysAndValuesComeBackByteForByteAndRangeIsByPrefix) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  const std::string value("\0\x01\xff\n\"{}", 7);
  const std::string in_prefix[] = {std::string("p\xff", 2), std::string("p\xff\0", 3),
                                   std::string("p\xff\x7f", 3), std::string("p\xff\xff\xff", 4)};
  for (const std::string& key : in_prefix) ASSERT_TRUE(etcd_->Put(key, value + key).ok());
  for (const char* other : {"p", "p\xfe", "q", "o\xff"}) ASSERT_TRUE(etcd_->Put(other, "x").ok());

  Result<std::vector<EtcdKv>> kvs = etcd_->Range(std::string("p\xff", 2));
  ASSERT_TRUE(kvs.ok()) << kvs.status().message();
  ASSERT_EQ(kvs->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {  // sorted by key, as bytes
    EXPECT_EQ((*kvs)[i].key, in_prefix[i]);
    EXPECT_EQ((*kvs)[i].value, value + in_prefix[i]);
    EXPECT_GT((*kvs)[i].create_revision, 0);
    EXPECT_EQ((*kvs)[i].version, 1);
  }
  Result<std::vector<EtcdKv>> two = etcd_->Range(std::string("p\xff", 2), 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
  Result<std::vector<EtcdKv>> all = etcd_->Range("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 8u);
  Result<std::vector<EtcdKv>> none = etcd_->Range("nothing/");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  std::optional<EtcdKv> got = MustGet(*etcd_, in_prefix[1]);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->value, value + in_prefix[1]);
  ASSERT_TRUE(etcd_->Put(in_prefix[1], "").ok());
  got = MustGet(*etcd_, in_prefix[1]);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->value, "");
  EXPECT_EQ(got->version, 2);
  EXPECT_GT(got->mod_revision, got->create_revision);
  ASSERT_TRUE(etcd_->Delete(in_prefix[1]).ok());
  EXPECT_FALSE(MustGet(*etcd_, in_prefix[1]).has_value());
  EXPECT_TRUE(etcd_->Delete("never-there").ok());
}

TEST_F(EtcdClientTest, AValueOverEtcdsRequestLimitIsInvalidNotRetryable) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  // etcd takes 1.5 MiB by default; its gRPC layer refuses messages over 2 MiB before that.
  for (size_t size : {size_t{1700} << 10, size_t{2} << 20}) {
    Status put = etcd_->Put("big", std::string(size, 'x'));
    EXPECT_EQ(put.code(), Status::Code::kInvalidArgument) << put.message();
    EXPECT_THAT(put.message(), AllOf(HasSubstr(server_->client_url()), HasSubstr("put")));
    EXPECT_TRUE(Gone("big"));
  }
}

TEST_F(EtcdClientTest, CreateIfAbsentFromEightThreadsCreatesExactlyOnce) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  constexpr int kThreads = 8;
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads), seen(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      EtcdKv existing;
      Result<bool> r =
          etcd_->CreateIfAbsent("fleet/slot", "host-" + std::to_string(i), 0, &existing);
      if (!r.ok()) {
        errors[i] = r.status().message();
      } else if (*r) {
        ++created;
        seen[i] = "host-" + std::to_string(i);
      } else {
        seen[i] = existing.value;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(created.load(), 1);
  std::optional<EtcdKv> winner = MustGet(*etcd_, "fleet/slot");
  ASSERT_TRUE(winner.has_value());
  for (const auto& s : seen) EXPECT_EQ(s, winner->value);  // the losers saw the winner's value
  EXPECT_EQ(winner->version, 1);
}

TEST_F(EtcdClientTest, AKeyOnAnExpiredLeaseDisappears) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  Result<int64_t> lease = etcd_->GrantLease(std::chrono::seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  ASSERT_TRUE(etcd_->Put("fleet/host-a", "dark", *lease).ok());
  std::optional<EtcdKv> kv = MustGet(*etcd_, "fleet/host-a");
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->lease, *lease);
  EXPECT_TRUE(WaitFor([&] { return Gone("fleet/host-a"); }));
  Result<int64_t> ttl = etcd_->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().message();
  EXPECT_EQ(*ttl, 0);
}

TEST_F(EtcdClientTest, KeepAliveHoldsAKeyWhileAnUnrenewedTwinExpires) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  Result<int64_t> kept = etcd_->GrantLease(std::chrono::seconds(2));
  Result<int64_t> left = etcd_->GrantLease(std::chrono::seconds(2));
  ASSERT_TRUE(kept.ok() && left.ok());
  ASSERT_TRUE(etcd_->Put("kept", "1", *kept).ok());
  ASSERT_TRUE(etcd_->Put("left", "1", *left).ok());
  Result<int64_t> ttl = etcd_->KeepAlive(*kept);
  ASSERT_TRUE(ttl.ok()) << ttl.status().message();
  EXPECT_EQ(*ttl, 2);
  // Renewed all along, "kept" outlives "left", which had the same TTL and started later.
  EXPECT_TRUE(WaitFor([&] {
    Result<int64_t> renewed = etcd_->KeepAlive(*kept);
    EXPECT_TRUE(renewed.ok() && *renewed == 2);
    return Gone("left");
  }));
  EXPECT_TRUE(MustGet(*etcd_, "kept").has_value());
}

TEST_F(EtcdClientTest, RevokeDeletesTheLeaseKeysAndKeepAliveThenSaysZero) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  Result<int64_t> lease = etcd_->GrantLease(std::chrono::seconds(60));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_->Put("a", "1", *lease).ok());
  ASSERT_TRUE(etcd_->Put("b", "1", *lease).ok());
  ASSERT_TRUE(etcd_->Put("c", "1").ok());
  Status revoked = etcd_->Revoke(*lease);
  ASSERT_TRUE(revoked.ok()) << revoked.message();
  EXPECT_TRUE(Gone("a"));
  EXPECT_TRUE(Gone("b"));
  EXPECT_FALSE(Gone("c"));
  Result<int64_t> ttl = etcd_->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().message();
  EXPECT_EQ(*ttl, 0);
  Status again = etcd_->Revoke(*lease);
  EXPECT_TRUE(again.ok()) << again.message();
  // A key cannot be put on a lease that is gone.
  Status put = etcd_->Put("d", "1", *lease);
  EXPECT_EQ(put.code(), Status::Code::kNotFound);
  EXPECT_THAT(put.message(), HasSubstr("lease not found"));
  Result<bool> created = etcd_->CreateIfAbsent("d", "1", *lease);
  EXPECT_EQ(created.status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(Gone("d"));
}

TEST_F(EtcdClientTest, DeleteIfLeaseDeletesOnlyWithTheRightLease) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  Result<int64_t> mine = etcd_->GrantLease(std::chrono::seconds(60));
  Result<int64_t> other = etcd_->GrantLease(std::chrono::seconds(60));
  ASSERT_TRUE(mine.ok() && other.ok());
  EtcdKv existing;
  Result<bool> created = etcd_->CreateIfAbsent("slot", "me", *mine, &existing);
  ASSERT_TRUE(created.ok() && *created);
  created = etcd_->CreateIfAbsent("slot", "them", *other, &existing);
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE(*created);
  EXPECT_EQ(existing.value, "me");
  EXPECT_EQ(existing.lease, *mine);

  Result<bool> deleted = etcd_->DeleteIfLease("slot", *other);
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_FALSE(*deleted);
  EXPECT_FALSE(Gone("slot"));
  deleted = etcd_->DeleteIfLease("slot", *mine);
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE(*deleted);
  EXPECT_TRUE(Gone("slot"));
  deleted = etcd_->DeleteIfLease("slot", *mine);
  ASSERT_TRUE(deleted.ok());
  EXPECT_FALSE(*deleted);
}

TEST_F(EtcdClientTest, UnreachableEndpointsAreUnavailableEachNamedWithWhy) {
  DeadPort a, b;
  EtcdOptions options;
  options.endpoints = {a.url(), b.url(), "unix:///nonexistent/etcd.sock"};
  options.timeout = std::chrono::seconds(2);
  std::unique_ptr<Etcd> etcd = Connect(options);
  ASSERT_NE(etcd, nullptr);
  Status put = etcd->Put("k", "v");
  EXPECT_EQ(put.code(), Status::Code::kUnavailable);
  EXPECT_THAT(put.message(), HasSubstr(a.url() + ": connection refused"));
  EXPECT_THAT(put.message(), HasSubstr(b.url() + ": connection refused"));
  EXPECT_THAT(put.message(), HasSubstr("unix:///nonexistent/etcd.sock: cannot connect to socket"));
  EXPECT_THAT(put.message(), HasSubstr("put"));
  Result<int64_t> lease = etcd->GrantLease(std::chrono::seconds(5));
  EXPECT_EQ(lease.status().code(), Status::Code::kUnavailable);
}

TEST_F(EtcdClientTest, ADeadFirstEndpointFailsOverToTheLiveSecond) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  DeadPort dead;
  EtcdOptions options;
  options.endpoints = {dead.url(), server_->client_url()};
  std::unique_ptr<Etcd> etcd = Connect(options);
  ASSERT_NE(etcd, nullptr);
  Status put = etcd->Put("k", "v");
  ASSERT_TRUE(put.ok()) << put.message();
  for (int i = 0; i < 3; ++i) {
    std::optional<EtcdKv> kv = MustGet(*etcd, "k");
    ASSERT_TRUE(kv.has_value());
    EXPECT_EQ(kv->value, "v");
  }
}

TEST_F(EtcdClientTest, AfterAFailoverTheLastGoodEndpointStaysFirst) {
  BERTH_REQUIRE_ETCD();
  // Two separate one-member clusters, so that each key shows which endpoint took it.
  EtcdServer first, second;
  std::string error;
  ASSERT_TRUE(first.Start(&error)) << error;
  ASSERT_TRUE(second.Start(&error)) << error;
  EtcdOptions options;
  options.endpoints = {first.client_url(), second.client_url()};
  std::unique_ptr<Etcd> etcd = Connect(options);
  std::unique_ptr<Etcd> only_first = Connect(first.client_url());
  std::unique_ptr<Etcd> only_second = Connect(second.client_url());
  ASSERT_TRUE(etcd->Put("k0", "1").ok());
  EXPECT_TRUE(MustGet(*only_first, "k0").has_value());

  ASSERT_TRUE(first.Stop());
  Status put = etcd->Put("k1", "1");
  ASSERT_TRUE(put.ok()) << put.message();
  EXPECT_TRUE(MustGet(*only_second, "k1").has_value());

  ASSERT_TRUE(first.Start(&error)) << error;
  ASSERT_TRUE(etcd->Put("k2", "1").ok());
  EXPECT_TRUE(MustGet(*only_second, "k2").has_value());
  EXPECT_FALSE(MustGet(*only_first, "k2").has_value());
}

TEST_F(EtcdClientTest, AUnixSocketEndpointWorks) {
  BERTH_REQUIRE_ETCD();
  EtcdServer::Options options;
  options.unix_socket = true;
  StartEtcd(options);
  std::unique_ptr<Etcd> etcd = Connect(server_->unix_endpoint());
  ASSERT_NE(etcd, nullptr);
  Status put = etcd->Put("over/socket", "yes");
  ASSERT_TRUE(put.ok()) << put.message();
  std::optional<EtcdKv> kv = MustGet(*etcd_, "over/socket");  // seen through TCP too
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "yes");
  Result<int64_t> lease = etcd->GrantLease(std::chrono::seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  Result<int64_t> ttl = etcd->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(*ttl, 30);
}

TEST_F(EtcdClientTest, HttpsWithTheCaAndAClientCertificateWorksAndWithoutThemFails) {
  BERTH_REQUIRE_ETCD();
  EtcdServer::Options tls;
  tls.tls = true;
  StartEtcd(tls);
  EtcdOptions options;
  options.endpoints = {server_->client_url()};
  options.ca_file = server_->ca_file();
  options.cert_file = server_->client_cert_file();
  options.key_file = server_->client_key_file();
  std::unique_ptr<Etcd> etcd = Connect(options);
  ASSERT_NE(etcd, nullptr);
  Status put = etcd->Put("over/tls", "yes");
  ASSERT_TRUE(put.ok()) << put.message();
  std::optional<EtcdKv> kv = MustGet(*etcd, "over/tls");
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "yes");

  // The system CAs do not know the test CA.
  Status untrusted = etcd_->Put("over/tls", "no");
  EXPECT_EQ(untrusted.code(), Status::Code::kUnavailable);
  EXPECT_THAT(untrusted.message(),
              AllOf(HasSubstr(server_->client_url()), HasSubstr("TLS"), HasSubstr("ca_file")));
  // etcd wants a client certificate.
  options.cert_file = options.key_file = "";
  std::unique_ptr<Etcd> anonymous = Connect(options);
  Status refused = anonymous->Put("over/tls", "no");
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable);
  EXPECT_THAT(refused.message(), AllOf(HasSubstr(server_->client_url()), HasSubstr("TLS"),
                                       HasSubstr("client certificate")));
}

TEST_F(EtcdClientTest, AuthWorksWithTheRightPasswordAndIsRefusedWithAWrongOne) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  std::string error;
  ASSERT_TRUE(server_->EnableAuth("s3cret-pw", &error)) << error;

  EtcdOptions options;
  options.endpoints = {server_->client_url()};
  options.username = "root";
  options.password = "s3cret-pw";
  std::unique_ptr<Etcd> right = Connect(options);
  ASSERT_NE(right, nullptr);
  Status put = right->Put("guarded", "1");
  ASSERT_TRUE(put.ok()) << put.message();
  ASSERT_TRUE(MustGet(*right, "guarded").has_value());

  options.password = "wrong-pw";
  std::unique_ptr<Etcd> wrong = Connect(options);
  Status refused = wrong->Put("guarded", "2");
  EXPECT_EQ(refused.code(), Status::Code::kPermissionDenied);
  EXPECT_THAT(refused.message(), HasSubstr("'root'"));
  EXPECT_THAT(refused.message(), Not(HasSubstr("wrong-pw")));

  Status anonymous = etcd_->Put("guarded", "3");  // no user at all
  EXPECT_EQ(anonymous.code(), Status::Code::kPermissionDenied);
  EXPECT_THAT(anonymous.message(), HasSubstr("auth enabled"));

  // etcd's simple tokens die with the process: after a restart the client authenticates again.
  ASSERT_TRUE(server_->Stop());
  ASSERT_TRUE(server_->Start(&error)) << error;
  std::optional<EtcdKv> kv = MustGet(*right, "guarded");
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "1");
}

TEST_F(EtcdClientTest, CallsFailWhileEtcdIsDownAndWorkAfterItIsBack) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  Result<int64_t> lease = etcd_->GrantLease(std::chrono::seconds(60));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_->Put("before", "1").ok());
  ASSERT_TRUE(server_->Stop());

  Status put = etcd_->Put("during", "1");
  EXPECT_EQ(put.code(), Status::Code::kUnavailable);
  EXPECT_THAT(put.message(), HasSubstr(server_->client_url()));
  Result<int64_t> ttl = etcd_->KeepAlive(*lease);
  EXPECT_EQ(ttl.status().code(), Status::Code::kUnavailable);
  Result<bool> created = etcd_->CreateIfAbsent("slot", "me", 0);
  EXPECT_EQ(created.status().code(), Status::Code::kUnavailable);

  std::string error;
  ASSERT_TRUE(server_->Start(&error)) << error;
  Status after = etcd_->Put("after", "1");
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_TRUE(MustGet(*etcd_, "before").has_value());
  EXPECT_FALSE(MustGet(*etcd_, "during").has_value());
  ttl = etcd_->KeepAlive(*lease);  // leases survive a restart
  ASSERT_TRUE(ttl.ok()) << ttl.status().message();
  EXPECT_EQ(*ttl, 60);

  server_->Kill();
  EXPECT_EQ(etcd_->Put("killed", "1").code(), Status::Code::kUnavailable);
  ASSERT_TRUE(server_->Start(&error)) << error;
  EXPECT_TRUE(etcd_->Put("killed", "1").ok());
}

// A watch from the revision after a range sees what changed since, in order (a put and a
// delete made before the watch opened included: nothing falls between the read and the watch),
// and only keys under its prefix; a watch with nothing to see ends when its window passes, one
// asked to stop ends at the stop, and one from a compacted revision says so.
TEST_F(EtcdClientTest, AWatchFromARangesRevisionSeesEveryChangeSinceUnderItsPrefix) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  ASSERT_TRUE(etcd_->Put("/f/a", "1").ok());
  ASSERT_TRUE(etcd_->Put("/f/b", "1").ok());
  int64_t revision = 0;
  auto kvs = etcd_->Range("/f/", 0, 0, &revision);
  ASSERT_TRUE(kvs.ok()) << kvs.status().message();
  ASSERT_EQ(kvs->size(), 2u);
  EXPECT_EQ(revision, kvs->back().mod_revision);
  ASSERT_TRUE(etcd_->Put("/g/outside", "1").ok());
  ASSERT_TRUE(etcd_->Put("/f/c", "2").ok());
  ASSERT_TRUE(etcd_->Delete("/f/a").ok());

  std::vector<EtcdWatchResult::Event> seen;
  int64_t from = revision + 1;
  while (seen.size() < 2) {
    auto w = etcd_->WaitForChange("/f/", from, std::chrono::seconds(20));
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE(w->changed);
    ASSERT_FALSE(w->events.empty());
    for (auto& e : w->events) seen.push_back(e);
    from = w->events.back().kv.mod_revision + 1;
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].kv.key, "/f/c");
  EXPECT_EQ(seen[0].kv.value, "2");
  EXPECT_FALSE(seen[0].deleted);
  EXPECT_EQ(seen[1].kv.key, "/f/a");
  EXPECT_TRUE(seen[1].deleted);

  // Nothing more under /f/: the window passes (a change under /g/ does not count).
  ASSERT_TRUE(etcd_->Put("/g/outside", "2").ok());
  auto quiet = etcd_->WaitForChange("/f/", from, std::chrono::milliseconds(300));
  ASSERT_TRUE(quiet.ok()) << quiet.status().message();
  EXPECT_FALSE(quiet->changed);

  // A change while the watch waits ends it; a stop ends it without one.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(Connect(server_->client_url())->Put("/f/d", "3").ok());
  });
  auto woke = etcd_->WaitForChange("/f/", from, std::chrono::seconds(60));
  writer.join();
  ASSERT_TRUE(woke.ok()) << woke.status().message();
  ASSERT_TRUE(woke->changed);
  EXPECT_EQ(woke->events.at(0).kv.key, "/f/d");
  from = woke->events.back().kv.mod_revision + 1;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  auto stopped = etcd_->WaitForChange("/f/", from, std::chrono::seconds(60), 0, &stop);
  stopper.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_FALSE(stopped->changed);

  // Compacted past the revision asked for: the watch says so.
  std::string answer;
  ASSERT_EQ(server_->Post("/v3/kv/compaction",
                          "{\"revision\":\"" + std::to_string(from - 1) + "\"}", &answer),
            200)
      << answer;
  auto compacted = etcd_->WaitForChange("/f/", revision, std::chrono::seconds(20));
  ASSERT_TRUE(compacted.ok()) << compacted.status().message();
  EXPECT_TRUE(compacted->changed);
  EXPECT_TRUE(compacted->compacted);
}

// A client's traffic is counted: one request per exchange, a watch among them, and the bytes
// of the answers.
TEST_F(EtcdClientTest, TrafficCountsRequestsWatchesAndBytesRead) {
  BERTH_REQUIRE_ETCD();
  StartEtcd();
  EtcdOptions options;
  options.endpoints = {server_->client_url()};
  options.traffic = std::make_shared<EtcdTraffic>();
  auto etcd = Connect(options);
  ASSERT_TRUE(etcd->Put("/t/a", std::string(1000, 'x')).ok());
  auto kvs = etcd->Range("/t/");
  ASSERT_TRUE(kvs.ok());
  auto w = etcd->WaitForChange("/t/", 1, std::chrono::seconds(20));
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(options.traffic->requests.load(), 3u);
  EXPECT_EQ(options.traffic->watches.load(), 1u);
  EXPECT_GT(options.traffic->bytes_read.load(), 2 * 1000 * 4 / 3) << "the value came twice";
}

}  // namespace
}  // namespace berth
