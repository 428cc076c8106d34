// The load generator's reads through io_uring (raw system calls, no liburing): a multishot recv
// per connection into a ring of provided buffers, so that one io_uring_enter waits for, and
// reads, every socket that became readable. With epoll, a token that arrives on its own cost an
// epoll_wait and a recv; on a paravirtualised VM a system call costs microseconds, most of the
// generator's budget per token (tests/bench/loadgen/README.md).
//
// Needs Linux 6.1 (single issuer, deferred task work, which also brings multishot recv and
// provided buffer rings); Open fails on an older kernel or where io_uring is refused (a seccomp
// profile, kernel.io_uring_disabled), and the generator reads with epoll instead.
//
// With receive times (Linux 6.0 for multishot recvmsg), each read is a recvmsg that brings the
// kernel's receive time of its bytes (SO_TIMESTAMPNS, which the caller turns on per socket): a
// token is timed when it reached the socket, not when the generator got round to reading it.
// Then a wake-up may wait a little for more sockets (Linux 6.12's min-wait): one wake-up reads
// the tokens of many streams without moving any token's time (README in tests/bench/loadgen).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <sys/socket.h>

struct io_uring_sqe;
struct io_uring_cqe;

namespace berth {

class Uring {
 public:
  /// A ring for `streams` connections, or null (`why` says why). `receive_times`: reads bring
  /// the kernel's receive time (Completion::received_ns) where the kernel can.
  static std::unique_ptr<Uring> Open(size_t streams, std::string* why, bool receive_times = false);
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  /// Queues a multishot recv of `fd` into the provided buffers: completions tagged `tag` until
  /// one without kMore (the end of the stream, an error, or no buffer left: arm it again).
  void RecvMultishot(int fd, uint64_t tag);
  /// Queues a one-shot poll of `fd` for writability (or an error), tagged `tag`.
  void PollWritable(int fd, uint64_t tag);
  /// Queues the cancellation of the request tagged `tag` (its completion, -ECANCELED, follows).
  void Cancel(uint64_t tag);

  /// Whether reads bring the kernel's receive time.
  bool receive_times() const { return receive_times_; }
  /// Whether the kernel can wait a minimum time for several completions (Linux 6.12).
  bool min_wait() const { return min_wait_; }

  /// Submits what is queued and waits until a completion is there or `timeout_ns` passed
  /// (0: does not wait). With `gather_us` (where min_wait()): waits up to that long for
  /// `gather` completions, then returns with the first there (still by `timeout_ns`). Returns
  /// false on an unexpected error (errno).
  bool SubmitAndWait(int64_t timeout_ns, unsigned gather = 1, unsigned gather_us = 0);

  struct Completion {
    uint64_t tag;
    int32_t res;            // bytes read, poll mask, or -errno
    bool more;              // the multishot request goes on
    std::string_view data;  // a recv's bytes (in a provided buffer, valid during the call)
    /// The kernel's receive time of the read's last bytes (CLOCK_REALTIME, ns); -1: not known
    /// (no receive times, or the socket gave none).
    int64_t received_ns = -1;
  };
  /// Calls `f(const Completion&)` for each completion there, in order, and gives their buffers
  /// back. `f` may queue requests.
  template <typename F>
  void Drain(F&& f);

 private:
  Uring() = default;
  io_uring_sqe* NextSqe();
  bool Enter(unsigned submit, unsigned wait, int64_t timeout_ns, unsigned min_wait_us = 0);
  void ReadMessage(Completion* c) const;
  bool Next(Completion* c, uint32_t* buffer);
  void GiveBack(uint32_t buffer);
  void Advance();

  int fd_ = -1;
  // The submission ring.
  void* sq_map_ = nullptr;
  size_t sq_map_size_ = 0;
  unsigned* sq_head_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* sq_array_ = nullptr;
  io_uring_sqe* sqes_ = nullptr;
  size_t sqes_size_ = 0;
  unsigned sq_entries_ = 0;
  unsigned sq_local_tail_ = 0;
  unsigned to_submit_ = 0;
  // The completion ring.
  void* cq_map_ = nullptr;
  size_t cq_map_size_ = 0;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
  unsigned cq_local_head_ = 0;
  // The provided buffers: a ring of `buffers_` entries, each `buffer_size_` bytes.
  void* br_map_ = nullptr;
  size_t br_map_size_ = 0;
  char* buffer_memory_ = nullptr;
  size_t buffer_memory_size_ = 0;
  unsigned buffers_ = 0;
  size_t buffer_size_ = 0;
  uint16_t br_tail_ = 0;
  bool receive_times_ = false;
  bool min_wait_ = false;
  msghdr msg_{};  // recvmsg's: no name, room for one timestamp (read by the kernel at submit)
};

template <typename F>
void Uring::Drain(F&& f) {
  Completion c;
  uint32_t buffer;
  while (Next(&c, &buffer)) {
    f(c);
    if (buffer != UINT32_MAX) GiveBack(buffer);
    Advance();
  }
}

}  // namespace berth
