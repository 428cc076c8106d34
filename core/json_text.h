// The one way berth writes JSON (state, journal, history, saved plans, bench records, -o json,
// request bodies): nlohmann's dump() throws on a string that is not UTF-8; this never does.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace berth {

/// `j` as JSON text (no trailing newline); `indent` as dump()'s (-1: one line). Never throws:
/// a string or key that is not UTF-8 is written with its stray bytes as "\xNN" (VisibleBytes),
/// so a server's bad byte in a failure detail is kept visible and the file is still written.
std::string DumpJson(const nlohmann::json& j, int indent = -1);
/// The same for a document that keeps its keys in insertion order.
std::string DumpJson(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace berth
