// The only reader of streamed completion chunks: nlohmann-json without exceptions.
#include "providers/bench/sse.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

/// The length of obj[key] when it is a non-empty string, else 0.
size_t StringBytes(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ref<const std::string&>().size() : 0;
}

std::string Cut(std::string_view s) { return Excerpt(s, 200); }

}  // namespace

StreamEvent InterpretEvent(std::string_view data) {
  StreamEvent e;
  if (data == "[DONE]") {
    e.kind = StreamEvent::Kind::kDone;
    return e;
  }
  nlohmann::json j = nlohmann::json::parse(data.begin(), data.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    e.kind = StreamEvent::Kind::kMalformed;
    e.error = "a streamed event is not a JSON object: '" + Cut(data) + "'";
    return e;
  }
  if (auto err = j.find("error"); err != j.end() && !err->is_null()) {
    e.kind = StreamEvent::Kind::kError;
    const nlohmann::json* message = nullptr;
    if (err->is_object()) {
      auto m = err->find("message");
      if (m != err->end() && m->is_string()) message = &*m;
    }
    e.error = "the server reported an error mid-stream: " +
              (message ? Cut(message->get_ref<const std::string&>()) : Cut(DumpJson(*err)));
    return e;
  }
  e.kind = StreamEvent::Kind::kChunk;
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    if (!choices->empty() && (*choices)[0].is_object()) {
      const nlohmann::json& c = (*choices)[0];
      size_t bytes = StringBytes(c, "text");
      if (auto delta = c.find("delta"); delta != c.end() && delta->is_object())
        bytes += StringBytes(*delta, "content") + StringBytes(*delta, "reasoning_content");
      e.content_deltas = bytes > 0 ? 1 : 0;
      e.content_bytes = bytes;
    }
  }
  if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
    auto n = usage->find("completion_tokens");
    if (n != usage->end() && n->is_number_unsigned()) {
      e.has_usage = true;
      e.completion_tokens = n->get<uint64_t>();
    } else if (n != usage->end() && n->is_number_integer() && n->get<int64_t>() >= 0) {
      e.has_usage = true;
      e.completion_tokens = static_cast<uint64_t>(n->get<int64_t>());
    }
  }
  return e;
}

}  // namespace berth
