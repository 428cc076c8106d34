// The load generator's io_uring reads (providers/bench/uring.h) on loopback sockets: a read
// brings its bytes and, with receive times, the kernel's time of their receipt (not the time of
// the read), and the end of a stream reads as an empty read.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>

#include "providers/bench/uring.h"

namespace berth {
namespace {

int64_t RealNowNs() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

/// A connected pair of loopback TCP sockets: `client` reads what `server` writes.
struct Pair {
  int client = -1, server = -1;
  Pair() {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listener, 1);
    socklen_t len = sizeof addr;
    getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    server = accept(listener, nullptr, nullptr);
    close(listener);
  }
  ~Pair() {
    close(client);
    if (server >= 0) close(server);
  }
};

struct Read {
  std::string data;
  int reads = 0;
  int64_t received_ns = -1;
  bool ended = false;
};

/// Waits (at most 2 s) for completions of `tag` and folds them into `out`.
void Collect(Uring* ring, uint64_t tag, Read* out) {
  ASSERT_TRUE(ring->SubmitAndWait(2'000'000'000));
  ring->Drain([&](const Uring::Completion& c) {
    if (c.tag != tag) return;
    if (c.res <= 0) {
      out->ended = true;
      return;
    }
    out->data.append(c.data);
    ++out->reads;
    out->received_ns = c.received_ns;
  });
}

std::unique_ptr<Uring> OpenOrSay(bool receive_times) {
  std::string why;
  auto ring = Uring::Open(4, &why, receive_times);
  if (!ring)
    std::printf("io_uring is not available here (%s): the generator reads with epoll\n",
                why.c_str());
  return ring;
}

TEST(Uring, AReadIsTimedWhenTheKernelReceivedItNotWhenItWasRead) {
  auto ring = OpenOrSay(true);
  if (!ring) GTEST_SKIP() << "io_uring is not available on this kernel (printed above)";
  ASSERT_TRUE(ring->receive_times());
  Pair p;
  int one = 1;
  ASSERT_EQ(setsockopt(p.client, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one), 0);
  ring->RecvMultishot(p.client, 7);
  ASSERT_TRUE(ring->SubmitAndWait(0));
  // The kernel turns receive timestamps on for the whole system a moment after the first
  // socket asks (a static key flipped by a work item): bytes that arrive before carry none.
  // Prime until one does (the generator times such early bytes by their read).
  Read primed;
  for (int i = 0; i < 200 && primed.received_ns < 0; ++i) {
    primed = Read{};
    ASSERT_EQ(write(p.server, "p", 1), 1);
    while (primed.data.empty()) Collect(ring.get(), 7, &primed);
    if (primed.received_ns < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(primed.received_ns, 0) << "no read carried a receive time within 2 s";
  int64_t sent = RealNowNs();
  ASSERT_EQ(write(p.server, "token one", 9), 9);
  // The bytes wait in the socket for 100 ms before the generator reads them.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int64_t before_read = RealNowNs();
  Read r;
  Collect(ring.get(), 7, &r);
  EXPECT_EQ(r.data, "token one");
  ASSERT_GT(r.received_ns, 0) << "the read carried no receive time";
  EXPECT_GE(r.received_ns, sent);
  // Received before the 100 ms wait ended, not when read: the 100 ms is not in it.
  EXPECT_LE(r.received_ns, before_read - 50'000'000);

  // More bytes on the same multishot read, then the end of the stream.
  ASSERT_EQ(write(p.server, "two", 3), 3);
  r = Read{};
  while (r.data.size() < 3) Collect(ring.get(), 7, &r);
  EXPECT_EQ(r.data, "two");
  close(p.server);
  p.server = -1;
  while (!r.ended) Collect(ring.get(), 7, &r);
  EXPECT_EQ(r.data, "two");
}

TEST(Uring, WithoutReceiveTimesTheBytesComeUntimed) {
  for (bool receive_times : {false, true}) {
    auto ring = OpenOrSay(receive_times);
    if (!ring) GTEST_SKIP() << "io_uring is not available on this kernel (printed above)";
    Pair p;  // (SO_TIMESTAMPNS not asked)
    ring->RecvMultishot(p.client, 9);
    ASSERT_TRUE(ring->SubmitAndWait(0));
    std::string big(20000, 'x');  // more than one provided buffer (8 KiB)
    ASSERT_EQ(write(p.server, big.data(), big.size()), static_cast<ssize_t>(big.size()));
    Read r;
    while (r.data.size() < big.size()) Collect(ring.get(), 9, &r);
    EXPECT_EQ(r.data, big) << "receive_times " << receive_times;
    EXPECT_GE(r.reads, 3);
    EXPECT_EQ(r.received_ns, -1) << "receive_times " << receive_times;
  }
}

}  // namespace
}  // namespace berth
