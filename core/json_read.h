// A fast reader for the JSON berth reads in bulk (saved observations: 19 MB at 10,000 services,
// 0.27 s in nlohmann's lexer alone): ScanJson (json_scan.h) builds the same document nlohmann's
// parser makes, and gives up (nullopt) on anything it refuses (nesting deeper than
// kMaxJsonDepth, and every syntax error), which nlohmann's parser then reads and words.
// tests/engine/json_read_test.cc compares the two on berth's own documents and on mutations.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace berth {

/// `text` as nlohmann reads it, or nullopt when the fast reader leaves it to nlohmann.
std::optional<nlohmann::json> ReadJsonFast(std::string_view text);

}  // namespace berth
