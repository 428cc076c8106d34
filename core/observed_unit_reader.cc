#include "core/observed_unit_reader.h"

#include <array>
#include <limits>
#include <string>
#include <utility>

namespace berth {

namespace {

// The keys a unit's object may have (core/observed_json.cc: ReadUnit), by kind.
enum Field : int {
  kName,
  kLoadState,
  kActiveState,
  kSubState,
  kFragmentPath,
  kContentHash,
  kSpecHash,
  kContent,
  kContentNote,
  kUnitFileState,
  kInvocationId,
  kResult,  // the strings end here
  kManaged,
  kNeedDaemonReload,
  kCrashLooping,  // the booleans end here
  kMainPid,
  kExecMainStatus,   // int
  kNRestarts,        // uint32
  kActiveEnterUsec,  // uint64
  kTimeoutStopUsec,  // uint64
  kDropInPaths,      // a list of strings
  kFields
};

constexpr std::array<std::string_view, kFields> kKeys = {
    "name",          "load_state",       "active_state", "sub_state",          "fragment_path",
    "content_hash",  "spec_hash",        "content",      "content_note",       "unit_file_state",
    "invocation_id", "result",           "managed",      "need_daemon_reload", "crash_looping",
    "main_pid",      "exec_main_status", "n_restarts",   "active_enter_usec",  "timeout_stop_usec",
    "drop_in_paths"};

}  // namespace

void ObservedUnitReader::Begin() {
  u_ = ObservedUnit();
  seen_.reset();
  field_ = -1;
  in_list_ = false;
  note_set_ = false;
  odd_ = false;
}

void ObservedUnitReader::Key(std::string_view k) {
  if (odd_) return;
  field_ = -1;
  for (int f = 0; f < kFields; ++f)
    if (kKeys[static_cast<size_t>(f)] == k) field_ = f;
  // Unknown, or again (the document keeps the last; the careful reader says which is wrong).
  if (field_ < 0 || seen_.test(static_cast<size_t>(field_))) odd_ = true;
  if (!odd_) seen_.set(static_cast<size_t>(field_));
}

void ObservedUnitReader::String(std::string_view s) {
  if (odd_) return;
  if (in_list_) {
    u_.drop_in_paths.emplace_back(s);
    return;
  }
  std::string* into = nullptr;
  switch (field_) {
    case kName:
      into = &u_.name;
      break;
    case kLoadState:
      into = &u_.load_state;
      break;
    case kActiveState:
      into = &u_.active_state;
      break;
    case kSubState:
      into = &u_.sub_state;
      break;
    case kFragmentPath:
      into = &u_.fragment_path;
      break;
    case kContentHash:
      into = &u_.content_hash;
      break;
    case kSpecHash:
      into = &u_.spec_hash;
      break;
    case kContent:
      into = &u_.content;
      break;
    case kContentNote:
      into = &u_.content_note;
      note_set_ = true;
      break;
    case kUnitFileState:
      into = &u_.unit_file_state;
      break;
    case kInvocationId:
      into = &u_.invocation_id;
      break;
    case kResult:
      into = &u_.result;
      break;
    default:
      odd_ = true;
      return;
  }
  into->assign(s);
}

// null is what an absent key is (Reader::Get leaves the field as it is), except in a list.
void ObservedUnitReader::Null() {
  if (in_list_) odd_ = true;
}

void ObservedUnitReader::Boolean(bool b) {
  if (odd_) return;
  switch (in_list_ ? -1 : field_) {
    case kManaged:
      u_.managed = b;
      break;
    case kNeedDaemonReload:
      u_.need_daemon_reload = b;
      break;
    case kCrashLooping:
      u_.crash_looping = b;
      break;
    default:
      odd_ = true;
  }
}

// Numbers in the field's range only: what nlohmann converts without a change of value.
void ObservedUnitReader::Signed(int64_t v) {  // a negative integer
  if (odd_) return;
  if (in_list_ || v < std::numeric_limits<int>::min()) {
    odd_ = true;
    return;
  }
  switch (field_) {
    case kMainPid:
      u_.main_pid = static_cast<int>(v);
      break;
    case kExecMainStatus:
      u_.exec_main_status = static_cast<int>(v);
      break;
    default:
      odd_ = true;
  }
}

void ObservedUnitReader::Unsigned(uint64_t v) {
  if (odd_) return;
  auto fits = [&](uint64_t max) {
    if (v > max) odd_ = true;
    return !odd_;
  };
  switch (in_list_ ? -1 : field_) {
    case kMainPid:
      if (fits(std::numeric_limits<int>::max())) u_.main_pid = static_cast<int>(v);
      break;
    case kExecMainStatus:
      if (fits(std::numeric_limits<int>::max())) u_.exec_main_status = static_cast<int>(v);
      break;
    case kNRestarts:
      if (fits(std::numeric_limits<uint32_t>::max())) u_.n_restarts = static_cast<uint32_t>(v);
      break;
    case kActiveEnterUsec:
      u_.active_enter_usec = v;
      break;
    case kTimeoutStopUsec:
      u_.timeout_stop_usec = v;
      break;
    default:
      odd_ = true;
  }
}

void ObservedUnitReader::StartArray() {
  if (odd_) return;
  if (in_list_ || field_ != kDropInPaths) {
    odd_ = true;
    return;
  }
  in_list_ = true;
  u_.drop_in_paths.clear();
}

void ObservedUnitReader::EndArray() { in_list_ = false; }

ObservedUnit ObservedUnitReader::Take(bool* has_note) {
  *has_note = note_set_;
  return std::move(u_);
}

}  // namespace berth
