#include "providers/bench/uring.h"

#include <linux/io_uring.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace berth {
namespace {

constexpr uint16_t kBufferGroup = 0;
constexpr unsigned kSqEntries = 256;
constexpr size_t kBufferSize = 8 * 1024;
// io_uring_getevents_arg's `pad` became `min_wait_usec` in Linux 6.12, announced by this
// feature bit (Debian 12's headers are 6.1's).
constexpr unsigned kFeatMinTimeout = 1U << 15;

int Setup(unsigned entries, io_uring_params* p) {
  return static_cast<int>(syscall(__NR_io_uring_setup, entries, p));
}

void* Map(size_t size, int fd, off_t offset) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, offset);
  return p == MAP_FAILED ? nullptr : p;
}

unsigned PowerOfTwo(size_t at_least) {
  unsigned n = 1;
  while (n < at_least) n <<= 1;
  return n;
}

}  // namespace

std::unique_ptr<Uring> Uring::Open(size_t streams, std::string* why, bool receive_times) {
  std::unique_ptr<Uring> u(new Uring());
  // Two buffers per stream (a read in flight for each while the last ones are handed on), at
  // least 64 and at most 8192 (the most a buffer ring holds is 32768).
  u->buffers_ = std::clamp(PowerOfTwo(2 * streams), 64u, 8192u);
  u->buffer_size_ = kBufferSize;
  io_uring_params p{};
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE |
            IORING_SETUP_SUBMIT_ALL;
  p.cq_entries = std::max(2 * u->buffers_, 2 * kSqEntries);  // (no fewer than the SQ's)
  u->fd_ = Setup(kSqEntries, &p);
  if (u->fd_ < 0) {
    *why = std::string("io_uring_setup: ") + std::strerror(errno);
    return nullptr;
  }
  if (!(p.features & IORING_FEAT_SINGLE_MMAP) || !(p.features & IORING_FEAT_EXT_ARG) ||
      !(p.features & IORING_FEAT_NODROP)) {
    *why = "io_uring lacks single mmap, ext arg or nodrop";
    return nullptr;
  }
  u->min_wait_ = (p.features & kFeatMinTimeout) != 0;
  // Multishot recvmsg is Linux 6.0; the ring needs 6.1 (single issuer, deferred task work).
  u->receive_times_ = receive_times;
  u->msg_.msg_controllen = CMSG_SPACE(sizeof(timespec));
  u->sq_map_size_ = std::max<size_t>(p.sq_off.array + p.sq_entries * sizeof(unsigned),
                                     p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe));
  u->sq_map_ = Map(u->sq_map_size_, u->fd_, IORING_OFF_SQ_RING);
  u->sqes_size_ = p.sq_entries * sizeof(io_uring_sqe);
  u->sqes_ = static_cast<io_uring_sqe*>(Map(u->sqes_size_, u->fd_, IORING_OFF_SQES));
  if (!u->sq_map_ || !u->sqes_) {
    *why = std::string("io_uring mmap: ") + std::strerror(errno);
    return nullptr;
  }
  char* sq = static_cast<char*>(u->sq_map_);
  u->sq_head_ = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
  u->sq_tail_ = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
  u->sq_mask_ = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
  u->sq_array_ = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
  u->sq_entries_ = p.sq_entries;
  for (unsigned i = 0; i < p.sq_entries; ++i) u->sq_array_[i] = i;
  u->sq_local_tail_ = *u->sq_tail_;
  u->cq_head_ = reinterpret_cast<unsigned*>(sq + p.cq_off.head);
  u->cq_tail_ = reinterpret_cast<unsigned*>(sq + p.cq_off.tail);
  u->cq_mask_ = *reinterpret_cast<unsigned*>(sq + p.cq_off.ring_mask);
  u->cqes_ = reinterpret_cast<io_uring_cqe*>(sq + p.cq_off.cqes);
  u->cq_local_head_ = *u->cq_head_;

  // The provided buffers: the ring of their descriptions, and the memory they describe.
  u->br_map_size_ = u->buffers_ * sizeof(io_uring_buf);
  void* br =
      mmap(nullptr, u->br_map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  u->buffer_memory_size_ = u->buffers_ * u->buffer_size_;
  void* mem = mmap(nullptr, u->buffer_memory_size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  u->br_map_ = br == MAP_FAILED ? nullptr : br;
  u->buffer_memory_ = mem == MAP_FAILED ? nullptr : static_cast<char*>(mem);
  if (!u->br_map_ || !u->buffer_memory_) {
    *why = std::string("io_uring buffers: ") + std::strerror(errno);
    return nullptr;
  }
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(u->br_map_);
  reg.ring_entries = u->buffers_;
  reg.bgid = kBufferGroup;
  if (syscall(__NR_io_uring_register, u->fd_, IORING_REGISTER_PBUF_RING, &reg, 1) != 0) {
    *why = std::string("io_uring buffer ring: ") + std::strerror(errno);
    return nullptr;
  }
  for (uint32_t b = 0; b < u->buffers_; ++b) u->GiveBack(b);
  return u;
}

Uring::~Uring() {
  if (fd_ >= 0) close(fd_);  // cancels what is in flight
  if (sq_map_) munmap(sq_map_, sq_map_size_);
  if (sqes_) munmap(sqes_, sqes_size_);
  if (br_map_) munmap(br_map_, br_map_size_);
  if (buffer_memory_) munmap(buffer_memory_, buffer_memory_size_);
}

io_uring_sqe* Uring::NextSqe() {
  if (sq_local_tail_ - __atomic_load_n(sq_head_, __ATOMIC_ACQUIRE) >= sq_entries_)
    Enter(to_submit_, 0, -1);  // full: submit what is queued (without waiting)
  io_uring_sqe* sqe = &sqes_[sq_local_tail_ & sq_mask_];
  std::memset(sqe, 0, sizeof *sqe);
  ++sq_local_tail_;
  ++to_submit_;
  __atomic_store_n(sq_tail_, sq_local_tail_, __ATOMIC_RELEASE);
  return sqe;
}

void Uring::RecvMultishot(int fd, uint64_t tag) {
  io_uring_sqe* sqe = NextSqe();
  sqe->opcode = receive_times_ ? IORING_OP_RECVMSG : IORING_OP_RECV;
  sqe->fd = fd;
  if (receive_times_) {
    sqe->addr = reinterpret_cast<uint64_t>(&msg_);
    sqe->len = 1;
  }
  sqe->ioprio = IORING_RECV_MULTISHOT;
  sqe->flags = IOSQE_BUFFER_SELECT;
  sqe->buf_group = kBufferGroup;
  sqe->user_data = tag;
}

void Uring::PollWritable(int fd, uint64_t tag) {
  io_uring_sqe* sqe = NextSqe();
  sqe->opcode = IORING_OP_POLL_ADD;
  sqe->fd = fd;
  sqe->poll32_events = POLLOUT;
  sqe->user_data = tag;
}

void Uring::Cancel(uint64_t tag) {
  io_uring_sqe* sqe = NextSqe();
  sqe->opcode = IORING_OP_ASYNC_CANCEL;
  sqe->fd = -1;
  sqe->addr = tag;
  sqe->user_data = 0;  // the cancellation's own completion: tag 0, ignored
}

bool Uring::Enter(unsigned submit, unsigned wait, int64_t timeout_ns, unsigned min_wait_us) {
  unsigned flags = 0;
  io_uring_getevents_arg arg{};
  __kernel_timespec ts{};
  if (wait > 0 || timeout_ns >= 0) flags |= IORING_ENTER_GETEVENTS;
  if (wait > 0) {
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
    arg.sigmask_sz = _NSIG / 8;
    arg.ts = reinterpret_cast<uint64_t>(&ts);
    arg.pad = min_wait_ ? min_wait_us : 0;  // min_wait_usec
    flags |= IORING_ENTER_EXT_ARG;
  }
  long n = syscall(__NR_io_uring_enter, fd_, submit, wait, flags,
                   flags & IORING_ENTER_EXT_ARG ? static_cast<void*>(&arg) : nullptr,
                   flags & IORING_ENTER_EXT_ARG ? sizeof arg : 0);
  if (n >= 0) {
    to_submit_ -= std::min(to_submit_, static_cast<unsigned>(n));
    return true;
  }
  return errno == ETIME || errno == EINTR || errno == EBUSY || errno == EAGAIN;
}

bool Uring::SubmitAndWait(int64_t timeout_ns, unsigned gather, unsigned gather_us) {
  // Completions already there (posted while submitting): handle them first, without waiting.
  bool ready = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE) != cq_local_head_;
  if (ready || timeout_ns <= 0) return Enter(to_submit_, 0, 0);
  // Without the kernel's min-wait, waiting for several would wait the whole timeout for them.
  bool gathering = min_wait_ && gather_us > 0 && gather > 1;
  return Enter(to_submit_, gathering ? gather : 1, timeout_ns, gathering ? gather_us : 0);
}

void Uring::ReadMessage(Completion* c) const {
  // The buffer holds io_uring_recvmsg_out, the name and control areas of the sizes asked
  // (msg_), then the bytes read; res counts all of it. What the kernel wrote is checked anyway.
  size_t head = sizeof(io_uring_recvmsg_out) + msg_.msg_namelen + msg_.msg_controllen;
  if (c->data.size() < head) {
    c->res = -EIO;
    c->data = {};
    return;
  }
  io_uring_recvmsg_out out;
  std::memcpy(&out, c->data.data(), sizeof out);
  const char* control = c->data.data() + sizeof out + msg_.msg_namelen;
  size_t control_len = std::min<size_t>(out.controllen, msg_.msg_controllen);
  for (size_t at = 0; at + sizeof(cmsghdr) <= control_len;) {
    cmsghdr h;
    std::memcpy(&h, control + at, sizeof h);
    if (h.cmsg_len < sizeof h || h.cmsg_len > control_len - at) break;
    if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_TIMESTAMPNS &&
        h.cmsg_len >= CMSG_LEN(sizeof(timespec))) {
      timespec ts;
      std::memcpy(&ts, control + at + CMSG_LEN(0), sizeof ts);
      if (ts.tv_sec > 0) c->received_ns = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
    }
    at += CMSG_ALIGN(h.cmsg_len);
  }
  c->data = c->data.substr(head);
  c->res = static_cast<int32_t>(c->data.size());  // 0: the end of the stream, as a recv's
}

bool Uring::Next(Completion* c, uint32_t* buffer) {
  if (__atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE) == cq_local_head_) return false;
  const io_uring_cqe& cqe = cqes_[cq_local_head_ & cq_mask_];
  c->tag = cqe.user_data;
  c->res = cqe.res;
  c->more = (cqe.flags & IORING_CQE_F_MORE) != 0;
  c->data = {};
  c->received_ns = -1;
  *buffer = UINT32_MAX;
  if (cqe.flags & IORING_CQE_F_BUFFER) {
    *buffer = cqe.flags >> IORING_CQE_BUFFER_SHIFT;
    if (c->res > 0)
      c->data = std::string_view(buffer_memory_ + *buffer * buffer_size_,
                                 std::min(static_cast<size_t>(c->res), buffer_size_));
    if (receive_times_ && c->res > 0) ReadMessage(c);
  }
  return true;
}

void Uring::GiveBack(uint32_t buffer) {
  // The ring is an array of io_uring_buf whose first entry's resv is the tail (not
  // io_uring_buf_ring's members: in C++ its flexible array's empty struct moves bufs to offset 8).
  auto* ring = static_cast<io_uring_buf*>(br_map_);
  io_uring_buf& b = ring[br_tail_ & (buffers_ - 1)];
  b.addr = reinterpret_cast<uint64_t>(buffer_memory_ + buffer * buffer_size_);
  b.len = static_cast<uint32_t>(buffer_size_);
  b.bid = static_cast<uint16_t>(buffer);
  ++br_tail_;
  __atomic_store_n(&ring[0].resv, br_tail_, __ATOMIC_RELEASE);
}

void Uring::Advance() {
  ++cq_local_head_;
  __atomic_store_n(cq_head_, cq_local_head_, __ATOMIC_RELEASE);
}

}  // namespace berth
