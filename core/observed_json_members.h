// The JSON names of an observation's members (core/observed_json.h), one list per struct, read
// by both its writer (observed_json_write.cc) and its reader (observed_json_read.cc). A list
// holds the members every object of it carries; what is optional or nested is the writer's and
// the reader's to add.
#pragma once

#include <string>
#include <string_view>
#include <tuple>

#include "core/observed.h"

namespace berth {

/// One member of T under its JSON name.
template <class T, class M>
struct JsonMember {
  std::string_view key;
  M T::*member;
};

/// Calls f(key, x.*member) for each of `members`, in order.
template <class X, class Members, class F>
void ForEachMember(X& x, const Members& members, F&& f) {
  std::apply([&](const auto&... m) { (f(m.key, x.*(m.member)), ...); }, members);
}

inline constexpr std::tuple kGgufModelJson = {
    JsonMember{"architecture", &GgufModel::architecture},
    JsonMember{"block_count", &GgufModel::block_count},
    JsonMember{"context_length", &GgufModel::context_length},
    JsonMember{"embedding_length", &GgufModel::embedding_length},
    JsonMember{"head_count", &GgufModel::head_count},
    JsonMember{"head_count_kv", &GgufModel::head_count_kv},
    JsonMember{"key_length", &GgufModel::key_length},
    JsonMember{"value_length", &GgufModel::value_length},
    JsonMember{"vocab_size", &GgufModel::vocab_size},
    JsonMember{"input_bytes", &GgufModel::input_bytes},
    JsonMember{"output_bytes", &GgufModel::output_bytes},
    JsonMember{"block_bytes", &GgufModel::block_bytes},
    JsonMember{"problem", &GgufModel::problem}};
// And "model" when the header was read.
inline constexpr std::tuple kGgufHeaderJson = {
    JsonMember{"version", &GgufHeader::version},
    JsonMember{"architecture", &GgufHeader::architecture},
    JsonMember{"problem", &GgufHeader::problem}};
// And bytes_total, config, weights_bytes, resident_bytes and gguf when known.
inline constexpr std::tuple kRevisionJson = {
    JsonMember{"commit", &ObservedRevision::commit}, JsonMember{"refs", &ObservedRevision::refs},
    JsonMember{"complete", &ObservedRevision::complete},
    JsonMember{"bytes_present", &ObservedRevision::bytes_present}};
// And "repos".
inline constexpr std::tuple kStoreJson = {JsonMember{"path", &ObservedStore::path},
                                          JsonMember{"exists", &ObservedStore::exists},
                                          JsonMember{"total_bytes", &ObservedStore::total_bytes},
                                          JsonMember{"free_bytes", &ObservedStore::free_bytes}};
inline constexpr std::tuple kGpuProcessJson = {
    JsonMember{"pid", &GpuProcess::pid}, JsonMember{"used_bytes", &GpuProcess::used_bytes},
    JsonMember{"unit", &GpuProcess::unit}, JsonMember{"name", &GpuProcess::name}};
// And "processes".
inline constexpr std::tuple kGpuJson = {
    JsonMember{"index", &ObservedGpu::index}, JsonMember{"uuid", &ObservedGpu::uuid},
    JsonMember{"name", &ObservedGpu::name}, JsonMember{"memory_total", &ObservedGpu::memory_total},
    JsonMember{"memory_used", &ObservedGpu::memory_used}};
// And content_note, active_enter_usec, timeout_stop_usec, last_start_ms, crash_looping unless
// their defaults
// (the lineage is derived from the content, never written).
inline constexpr std::tuple kUnitJson = {
    JsonMember{"name", &ObservedUnit::name},
    JsonMember{"load_state", &ObservedUnit::load_state},
    JsonMember{"active_state", &ObservedUnit::active_state},
    JsonMember{"sub_state", &ObservedUnit::sub_state},
    JsonMember{"fragment_path", &ObservedUnit::fragment_path},
    JsonMember{"content_hash", &ObservedUnit::content_hash},
    JsonMember{"managed", &ObservedUnit::managed},
    JsonMember{"spec_hash", &ObservedUnit::spec_hash},
    JsonMember{"content", &ObservedUnit::content},
    JsonMember{"main_pid", &ObservedUnit::main_pid},
    JsonMember{"need_daemon_reload", &ObservedUnit::need_daemon_reload},
    JsonMember{"drop_in_paths", &ObservedUnit::drop_in_paths},
    JsonMember{"unit_file_state", &ObservedUnit::unit_file_state},
    JsonMember{"invocation_id", &ObservedUnit::invocation_id},
    JsonMember{"n_restarts", &ObservedUnit::n_restarts},
    JsonMember{"result", &ObservedUnit::result},
    JsonMember{"exec_main_status", &ObservedUnit::exec_main_status}};
inline constexpr std::tuple kPortJson = {
    JsonMember{"port", &ListeningPort::port}, JsonMember{"address", &ListeningPort::address},
    JsonMember{"pid", &ListeningPort::pid}, JsonMember{"process", &ListeningPort::process},
    JsonMember{"unit", &ListeningPort::unit}};
inline constexpr std::tuple kHubFileJson = {JsonMember{"path", &HubFile::path},
                                            JsonMember{"size", &HubFile::size}};
// And "files".
inline constexpr std::tuple kHubJson = {JsonMember{"repo_id", &HubInfo::repo_id},
                                        JsonMember{"revision", &HubInfo::revision},
                                        JsonMember{"commit", &HubInfo::commit}};
inline constexpr std::tuple kMemoryJson = {
    JsonMember{"known", &ObservedMemory::known}, JsonMember{"error", &ObservedMemory::error},
    JsonMember{"total_bytes", &ObservedMemory::total_bytes},
    JsonMember{"available_bytes", &ObservedMemory::available_bytes}};
// And failures, interrupted, ungated, started, held, learned, start_times_ms,
// start_invocations and stop_times_ms when not empty.
inline constexpr std::tuple kStateJson = {
    JsonMember{"serial", &BerthState::serial}, JsonMember{"lineage", &BerthState::lineage},
    JsonMember{"units", &BerthState::units}, JsonMember{"models", &BerthState::models}};
inline constexpr std::tuple kFailureJson = {JsonMember{"time", &Failure::time},
                                            JsonMember{"message", &Failure::message}};
inline constexpr std::tuple kHeldJson = {
    JsonMember{"digest", &HeldChange::digest}, JsonMember{"time", &HeldChange::time},
    JsonMember{"address", &HeldChange::address}, JsonMember{"message", &HeldChange::message}};

/// The content_note of a unit whose JSON does not say: an empty text of someone else's file is
/// not known to be empty (an older berth kept only its own units' text; a hand-written
/// observation leaves it out). The writer leaves the key out exactly when it is this.
inline std::string DefaultContentNote(const ObservedUnit& u) {
  return u.content.empty() && !u.managed && u.HasFile()
             ? "this observation does not carry the file's text"
             : "";
}

}  // namespace berth
