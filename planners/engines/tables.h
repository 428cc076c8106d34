// The engines' named tables (tool-call parsers, reasoning parsers, speculative methods, the
// model types that take method mtp, KV-cache dtypes), as the flag catalogue records them.
#pragma once

#include <string_view>
#include <vector>

#include "engine/core/desired.h"

namespace berth {

/// The entries of `table` ("tool_call_parsers", "reasoning_parsers", "speculative_methods",
/// "mtp_model_types", "kv_cache_dtypes") of `engine`'s catalogue; empty when it has none.
std::vector<std::string_view> EngineTable(EngineKind engine, std::string_view table);

/// Whether `value` is in that table.
bool InEngineTable(EngineKind engine, std::string_view table, std::string_view value);

}  // namespace berth
