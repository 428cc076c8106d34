// Work over a range split between this thread and one other, for the pure per-item work of a
// big plan (rendering units, dumping actions as JSON).
#pragma once

#include <cstddef>
#include <future>
#include <system_error>

namespace berth {

/// Runs body(first, last) over [begin, end): [split, end) on a thread of its own and
/// [begin, split) on this one, when `two_threads`, the range has at least `min_for_thread`
/// items and a thread is to be had; otherwise body(begin, end) here. Returns once both are done.
template <class Body>
void SplitOverTwoThreads(size_t begin, size_t split, size_t end, bool two_threads,
                         size_t min_for_thread, Body&& body) {
  std::future<void> second;
  if (two_threads && end - begin >= min_for_thread) {
    try {
      second = std::async(std::launch::async, [&body, split, end] { body(split, end); });
    } catch (const std::system_error&) {
      // No thread to be had: this one does it all.
    }
  }
  body(begin, second.valid() ? split : end);
  if (second.valid()) second.get();
}

}  // namespace berth
