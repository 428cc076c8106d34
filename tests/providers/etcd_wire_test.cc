// etcd's JSON gateway shapes without a server: base64, prefix range ends, and the answers
// etcd sends (and malformed ones) read into values or into a description of what is wrong.
#include "providers/etcd/etcd_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "providers/etcd/base64.h"

namespace berth {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(EtcdBase64, RoundTripsEveryLengthAndEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (size_t n = 0; n <= all.size(); n += 1) {
    std::string decoded;
    std::string bytes = all.substr(0, n);
    ASSERT_TRUE(Base64Decode(Base64Encode(bytes), &decoded)) << n;
    EXPECT_EQ(decoded, bytes);
  }
  EXPECT_EQ(Base64Encode("a"), "YQ==");
  EXPECT_EQ(Base64Encode("ab"), "YWI=");
  EXPECT_EQ(Base64Encode("abc"), "YWJj");
  EXPECT_EQ(Base64Encode(std::string("\xff\xfe", 2)), "//4=");
}

TEST(EtcdBase64, RefusesWhatIsNotStrictBase64) {
  std::string out;
  for (const char* bad : {"YQ=", "YQ", "Y===", "YQ==YQ==", "Y Q=", "YQ\n=", "*Q==", "=QQQ", "YQ=a"})
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
  EXPECT_TRUE(Base64Decode("", &out));
  EXPECT_EQ(out, "");
}

TEST(EtcdRangeEnd, IsThePrefixWithItsLastByteRaised) {
  EXPECT_EQ(etcd_wire::RangeEnd("fleet/"), "fleet0");
  EXPECT_EQ(etcd_wire::RangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(etcd_wire::RangeEnd(std::string("a\xfe", 2)), std::string("a\xff", 2));
  EXPECT_EQ(etcd_wire::RangeEnd(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(etcd_wire::RangeEnd(""), std::string(1, '\0'));
  EXPECT_EQ(etcd_wire::RangeEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(EtcdWire, CreateIfAbsentIsACreateRevisionCompareWithPutAndRange) {
  json txn = etcd_wire::CreateIfAbsentBody("k", "v", 42);
  EXPECT_EQ(txn["compare"][0]["target"], "CREATE");
  EXPECT_EQ(txn["compare"][0]["create_revision"], "0");
  EXPECT_EQ(txn["success"][0]["request_put"]["lease"], "42");
  EXPECT_EQ(txn["success"][0]["request_put"]["value"], "dg==");
  EXPECT_EQ(txn["failure"][0]["request_range"]["key"], "aw==");
  json del = etcd_wire::DeleteIfLeaseBody("k", 7);
  EXPECT_EQ(del["compare"][0]["target"], "LEASE");
  EXPECT_EQ(del["compare"][0]["lease"], "7");
  EXPECT_TRUE(del["success"][0].contains("request_delete_range"));
}

TEST(EtcdWire, ReadsKvsWithNumbersAsStringsAndDefaultsLeftOut) {
  json answer = json::parse(R"({"header":{"revision":"2"},"kvs":[
      {"key":"YQ==","create_revision":"2","mod_revision":"3","version":"2","value":"MQ==",
       "lease":"9223372036854775807"},
      {"key":"Yg==","create_revision":5}]})");
  std::vector<EtcdKv> kvs;
  ASSERT_EQ(etcd_wire::ReadKvs(answer, &kvs), "");
  ASSERT_EQ(kvs.size(), 2u);
  EXPECT_EQ(kvs[0].key, "a");
  EXPECT_EQ(kvs[0].value, "1");
  EXPECT_EQ(kvs[0].mod_revision, 3);
  EXPECT_EQ(kvs[0].lease, INT64_MAX);
  EXPECT_EQ(kvs[1].value, "");
  EXPECT_EQ(kvs[1].create_revision, 5);
  EXPECT_EQ(kvs[1].lease, 0);
  ASSERT_EQ(etcd_wire::ReadKvs(json::parse(R"({"header":{}})"), &kvs), "");
  EXPECT_TRUE(kvs.empty());
}

TEST(EtcdWire, MalformedKvsSayWhatIsWrong) {
  std::vector<EtcdKv> kvs;
  auto read = [&](const char* text) { return etcd_wire::ReadKvs(json::parse(text), &kvs); };
  EXPECT_THAT(read(R"({"kvs":{}})"), HasSubstr("not an array"));
  EXPECT_THAT(read(R"({"kvs":[{"key":"not base64!"}]})"), HasSubstr("\"key\" is not base64"));
  EXPECT_THAT(read(R"({"kvs":[{"key":5}]})"), HasSubstr("\"key\" is not a string"));
  EXPECT_THAT(read(R"({"kvs":[{"value":"YQ=="}]})"), HasSubstr("no key"));
  EXPECT_THAT(read(R"({"kvs":[{"key":"YQ==","version":"12x"}]})"), HasSubstr("\"version\""));
  EXPECT_THAT(read(R"({"kvs":[{"key":"YQ==","lease":"99999999999999999999"}]})"),
              HasSubstr("\"lease\""));
  EXPECT_THAT(read(R"({"kvs":[{"key":"YQ==","lease":18446744073709551615}]})"),
              HasSubstr("out of range"));
  EXPECT_THAT(read(R"({"kvs":[{"key":"YQ==","lease":1.5}]})"), HasSubstr("not an integer"));
  EXPECT_THAT(read(R"([1])"), HasSubstr("not a JSON object"));
}

TEST(EtcdWire, TxnWithoutSucceededFailedAndCarriesTheRange) {
  bool succeeded = true;
  std::vector<EtcdKv> kvs;
  json failed = json::parse(R"({"header":{"revision":"2"},"responses":[{"response_range":
      {"header":{},"kvs":[{"key":"YQ==","value":"MQ==","lease":"7"}],"count":"1"}}]})");
  ASSERT_EQ(etcd_wire::ReadTxn(failed, &succeeded, &kvs), "");
  EXPECT_FALSE(succeeded);
  ASSERT_EQ(kvs.size(), 1u);
  EXPECT_EQ(kvs[0].lease, 7);
  ASSERT_EQ(etcd_wire::ReadTxn(json::parse(R"({"header":{},"succeeded":true})"), &succeeded, &kvs),
            "");
  EXPECT_TRUE(succeeded);
  EXPECT_THAT(
      etcd_wire::ReadTxn(json::parse(R"({"header":{},"succeeded":"yes"})"), &succeeded, &kvs),
      HasSubstr("not a boolean"));
  EXPECT_THAT(etcd_wire::ReadTxn(json::parse(R"({"succeeded":true})"), &succeeded, &kvs),
              HasSubstr("no \"header\""));
}

TEST(EtcdWire, KeepAliveOfAGoneLeaseHasNoTtl) {
  int64_t ttl = -1;
  ASSERT_EQ(etcd_wire::ReadKeepAlive(json::parse(R"({"result":{"header":{},"ID":"5"}})"), &ttl),
            "");
  EXPECT_EQ(ttl, 0);
  ASSERT_EQ(etcd_wire::ReadKeepAlive(json::parse(R"({"result":{"ID":"5","TTL":"30"}})"), &ttl), "");
  EXPECT_EQ(ttl, 30);
  EXPECT_THAT(etcd_wire::ReadKeepAlive(json::parse(R"({"ID":"5","TTL":"30"})"), &ttl),
              HasSubstr("no \"result\""));
  EXPECT_THAT(etcd_wire::ReadKeepAlive(json::parse(R"({"result":{"TTL":"-3"}})"), &ttl),
              HasSubstr("negative"));
  int64_t id = 0;
  EXPECT_THAT(etcd_wire::ReadGrant(json::parse(R"({"TTL":"5"})"), &id), HasSubstr("no lease"));
}

TEST(EtcdWire, ReadsBothErrorShapes) {
  etcd_wire::EtcdError e;
  ASSERT_TRUE(etcd_wire::ReadError(
      json::parse(
          R"({"error":"etcdserver: invalid auth token","message":"etcdserver: invalid auth token","code":16})"),
      &e));
  EXPECT_EQ(e.grpc_code, 16);
  EXPECT_EQ(e.message, "etcdserver: invalid auth token");
  ASSERT_TRUE(etcd_wire::ReadError(
      json::parse(R"({"error":{"grpc_code":5,"http_code":404,"message":"lease not found"}})"), &e));
  EXPECT_EQ(e.grpc_code, 5);
  EXPECT_EQ(e.message, "lease not found");
  EXPECT_FALSE(etcd_wire::ReadError(json::parse(R"({"header":{}})"), &e));
}

// A watch's create_request selects the prefix's keys from a revision; the messages etcd streams
// back (created, events of puts and deletes, a cancel for a compacted revision) are read with
// their header's revision, and every wrong shape says what is wrong.
TEST(EtcdWire, WatchBodiesAndMessages) {
  json body = etcd_wire::WatchCreateBody("/f/", etcd_wire::RangeEnd("/f/"), 42);
  EXPECT_EQ(body.dump(), R"({"create_request":{"key":")" + Base64Encode("/f/") +
                             R"(","range_end":")" + Base64Encode("/f0") +
                             R"(","start_revision":"42"}})");

  etcd_wire::WatchMessage m;
  ASSERT_EQ(etcd_wire::ReadWatchMessage(
                json::parse(R"({"result":{"header":{"revision":"7"},"created":true}})"), 0, &m),
            "");
  EXPECT_TRUE(m.created);
  EXPECT_EQ(m.revision, 7);
  EXPECT_TRUE(m.events.empty());

  std::string events = R"({"result":{"header":{"revision":"9"},"events":[{"kv":{"key":")" +
                       Base64Encode("/f/a") + R"(","value":")" + Base64Encode("0123456789") +
                       R"(","mod_revision":"8","create_revision":"8","version":"1"}},)" +
                       R"({"type":"DELETE","kv":{"key":")" + Base64Encode("/f/b") +
                       R"(","mod_revision":"9"}}]}})";
  ASSERT_EQ(etcd_wire::ReadWatchMessage(json::parse(events), 0, &m), "");
  ASSERT_EQ(m.events.size(), 2u);
  EXPECT_FALSE(m.events[0].deleted);
  EXPECT_EQ(m.events[0].kv.key, "/f/a");
  EXPECT_EQ(m.events[0].kv.value, "0123456789");
  EXPECT_EQ(m.events[0].kv.mod_revision, 8);
  EXPECT_TRUE(m.events[1].deleted);
  EXPECT_EQ(m.events[1].kv.key, "/f/b");
  EXPECT_EQ(m.events[1].kv.mod_revision, 9);
  // A value over the bound keeps its key, not its bytes.
  ASSERT_EQ(etcd_wire::ReadWatchMessage(json::parse(events), 4, &m), "");
  EXPECT_TRUE(m.events[0].kv.too_large);
  EXPECT_EQ(m.events[0].kv.value, "");

  ASSERT_EQ(etcd_wire::ReadWatchMessage(
                json::parse(R"({"result":{"canceled":true,"compact_revision":"5"}})"), 0, &m),
            "");
  EXPECT_TRUE(m.canceled);
  EXPECT_EQ(m.compact_revision, 5);

  for (const char* bad : {R"([])", R"({"result":1})", R"({"result":{"created":"yes"}})",
                          R"({"result":{"events":{}}})", R"({"result":{"events":[1]}})",
                          R"({"result":{"events":[{"type":"MOVE","kv":{"key":"YQ=="}}]}})",
                          R"({"result":{"events":[{"type":"PUT"}]}})",
                          R"({"result":{"events":[{"kv":{"key":"!!"}}]}})",
                          R"({"result":{"header":{"revision":"x"}}})",
                          R"({"result":{"header":{"revision":"-3"}}})"}) {
    EXPECT_NE(etcd_wire::ReadWatchMessage(json::parse(bad), 0, &m), "") << bad;
  }
  int64_t revision = 0;
  EXPECT_EQ(
      etcd_wire::ReadHeaderRevision(json::parse(R"({"header":{"revision":"12"}})"), &revision), "");
  EXPECT_EQ(revision, 12);
  EXPECT_NE(etcd_wire::ReadHeaderRevision(json::parse(R"({"header":[]})"), &revision), "");
  json range = etcd_wire::RangeBody("/a", "/b", 0, false, 12);
  EXPECT_EQ(range["revision"], "12");
}

}  // namespace
}  // namespace berth
