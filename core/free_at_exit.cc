#include "core/free_at_exit.h"

#include <atomic>

namespace berth {
namespace {
std::atomic<bool> g_free_at_exit{true};
}  // namespace

void SetFreeAtExit(bool free) { g_free_at_exit.store(free); }

bool FreesAtExit() { return g_free_at_exit.load(); }

}  // namespace berth
