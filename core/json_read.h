// A fast reader for the JSON berth reads in bulk (saved observations: 19 MB at 10,000 services,
// 0.27 s in nlohmann's lexer alone): ScanJson (json_scan.h) builds the same document nlohmann's
// parser makes, and gives up (nullopt) on anything it refuses (nesting deeper than
// kMaxJsonDepth, and every syntax error), which nlohmann's parser then reads and words.
// tests/engine/json_read_test.cc compares the two on berth's own documents and on mutations.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/json_scan.h"

namespace berth {

/// `text` as nlohmann reads it, or nullopt when the fast reader leaves it to nlohmann.
std::optional<nlohmann::json> ReadJsonFast(std::string_view text);

/// Reads the object items of a JsonItemSink's array itself, without a document: it is given
/// each item's calls, from its StartObject to the matching EndObject, then Done.
class JsonItemReader : public JsonHandler {
 public:
  /// Item `index` was read; `text` is its JSON text, for a reader that met something it does
  /// not read itself and reads the item again as a document.
  virtual void Done(size_t index, std::string_view text) = 0;
};

/// Takes the objects of one array, root[object_key][array_key], as each closes, while the
/// document is built: the document holds null in their place, so that an array of many big
/// objects (a saved observation's units) is never held whole.
class JsonItemSink {
 public:
  JsonItemSink(std::string object_key, std::string array_key)
      : object_key_(std::move(object_key)), array_key_(std::move(array_key)) {}
  virtual ~JsonItemSink() = default;
  /// Forget what was taken: the array (or its object) came again and replaces it (the last of
  /// a repeated key wins, as in nlohmann), or the fast reader gave up.
  virtual void Reset() = 0;
  /// Item `index` of the array, an object; it is set to null after the call.
  virtual void Take(size_t index, nlohmann::json& item) = 0;
  /// A reader of the items themselves: then no item object is built and Take is not called
  /// (the document holds null in each item's place). nullptr: build them.
  virtual JsonItemReader* ItemReader() { return nullptr; }
  const std::string& object_key() const { return object_key_; }
  const std::string& array_key() const { return array_key_; }

 private:
  std::string object_key_, array_key_;
};

/// ReadJsonFast, giving the items of `sink`'s array to it. On nullopt, the sink may hold items
/// of a document that was not read: Reset it.
std::optional<nlohmann::json> ReadJsonFast(std::string_view text, JsonItemSink* sink);

}  // namespace berth
