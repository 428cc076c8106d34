// The only reader of streamed completion chunks: nlohmann-json without exceptions.
#include "providers/bench/sse.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

std::string Cut(std::string_view s) { return Excerpt(s, 200); }

/// Reads the few fields of a chunk that count (choices[0]'s text or delta content, usage's
/// completion_tokens, whether "error" is there) as nlohmann-json's SAX parser meets them: the
/// whole event is still checked to be JSON, but no document is built (building one was most of
/// the generator's CPU per token). A key given twice counts the last time, as in a document.
class ChunkReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  using json = nlohmann::json;
  bool is_object = false;
  bool error = false;  // a top-level "error" that is not null
  size_t text = 0, content = 0, reasoning = 0;
  bool has_usage = false;
  uint64_t completion_tokens = 0;

  bool null() override {
    if (Value() == Role::kError) error = false;  // "error": null is no error
    return true;
  }
  bool boolean(bool) override { return Skip(); }
  bool number_integer(json::number_integer_t v) override {
    Role r = Value();
    if (r == Role::kCompletionTokens && v >= 0) SetTokens(static_cast<uint64_t>(v));
    return true;
  }
  bool number_unsigned(json::number_unsigned_t v) override {
    if (Value() == Role::kCompletionTokens) SetTokens(v);
    return true;
  }
  bool number_float(json::number_float_t, const json::string_t&) override { return Skip(); }
  bool string(json::string_t& s) override {
    switch (Value()) {
      case Role::kText:
        text = s.size();
        break;
      case Role::kContent:
        content = s.size();
        break;
      case Role::kReasoning:
        reasoning = s.size();
        break;
      default:
        break;
    }
    return true;
  }
  bool binary(json::binary_t&) override { return Skip(); }
  bool start_object(std::size_t) override { return Open(/*array=*/false); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(/*array=*/true); }
  bool end_array() override { return Close(); }
  bool key(json::string_t& k) override {
    if (depth_ > kTracked) return true;
    Frame& f = frames_[depth_ - 1];
    f.next = Role::kOther;
    switch (f.role) {
      case Role::kTop:
        if (k == "choices") {
          f.next = Role::kChoices;
          text = content = reasoning = 0;
        } else if (k == "usage") {
          f.next = Role::kUsage;
          has_usage = false;
        } else if (k == "error") {
          f.next = Role::kError;
          error = false;
        }
        break;
      case Role::kChoice0:
        if (k == "text") {
          f.next = Role::kText;
          text = 0;
        } else if (k == "delta") {
          f.next = Role::kDelta;
          content = reasoning = 0;
        }
        break;
      case Role::kDelta:
        if (k == "content") {
          f.next = Role::kContent;
          content = 0;
        } else if (k == "reasoning_content") {
          f.next = Role::kReasoning;
          reasoning = 0;
        }
        break;
      case Role::kUsage:
        if (k == "completion_tokens") {
          f.next = Role::kCompletionTokens;
          has_usage = false;
        }
        break;
      default:
        break;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  enum class Role {
    kOther,
    kTop,
    kChoices,
    kChoice0,
    kDelta,
    kUsage,
    kText,
    kContent,
    kReasoning,
    kCompletionTokens,
    kError,
  };
  struct Frame {
    Role role = Role::kOther;
    bool array = false;
    size_t index = 0;          // an array's elements so far
    Role next = Role::kOther;  // an object's: the role of the value of the last key
  };
  static constexpr int kTracked = 8;  // deeper containers matter to nothing read here

  /// The role of the value that begins now (and, for an array's element, counts it).
  Role Value() {
    if (depth_ == 0) return Role::kTop;
    if (depth_ > kTracked) return Role::kOther;
    Frame& f = frames_[depth_ - 1];
    Role r = Role::kOther;
    if (f.array)
      r = (f.role == Role::kChoices && f.index++ == 0) ? Role::kChoice0 : Role::kOther;
    else
      r = f.next;
    if (r == Role::kError) error = true;  // null() takes it back
    return r;
  }
  bool Open(bool array) {
    Role r = depth_ == 0 ? Role::kTop : Value();
    if (depth_ == 0) is_object = !array;
    // Each role is a container of one kind: "choices" an array, the rest objects.
    bool fits =
        array ? r == Role::kChoices
              : (r == Role::kTop || r == Role::kChoice0 || r == Role::kDelta || r == Role::kUsage);
    ++depth_;
    if (depth_ <= kTracked) frames_[depth_ - 1] = Frame{fits ? r : Role::kOther, array, 0};
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }
  /// A value nothing here reads (it still counts as an element, or as an "error").
  bool Skip() {
    Value();
    return true;
  }
  void SetTokens(uint64_t v) {
    has_usage = true;
    completion_tokens = v;
  }

  int depth_ = 0;
  Frame frames_[kTracked];
};

/// An error event's message (rare: the whole event is read as a document).
std::string ErrorMessage(std::string_view data) {
  nlohmann::json j = nlohmann::json::parse(data.begin(), data.end(), nullptr,
                                           /*allow_exceptions=*/false);
  const nlohmann::json* message = nullptr;
  const nlohmann::json& err = j["error"];
  if (err.is_object()) {
    auto m = err.find("message");
    if (m != err.end() && m->is_string()) message = &*m;
  }
  return "the server reported an error mid-stream: " +
         (message ? Cut(message->get_ref<const std::string&>()) : Cut(DumpJson(err)));
}

}  // namespace

StreamEvent InterpretEvent(std::string_view data) {
  StreamEvent e;
  if (data == "[DONE]") {
    e.kind = StreamEvent::Kind::kDone;
    return e;
  }
  ChunkReader r;
  bool ok = nlohmann::json::sax_parse(data.begin(), data.end(), &r,
                                      nlohmann::json::input_format_t::json, /*strict=*/true);
  if (!ok || !r.is_object) {
    e.kind = StreamEvent::Kind::kMalformed;
    e.error = "a streamed event is not a JSON object: '" + Cut(data) + "'";
    return e;
  }
  if (r.error) {
    e.kind = StreamEvent::Kind::kError;
    e.error = ErrorMessage(data);
    return e;
  }
  e.kind = StreamEvent::Kind::kChunk;
  size_t bytes = r.text + r.content + r.reasoning;
  e.content_deltas = bytes > 0 ? 1 : 0;
  e.content_bytes = bytes;
  e.has_usage = r.has_usage;
  e.completion_tokens = r.completion_tokens;
  return e;
}

}  // namespace berth
