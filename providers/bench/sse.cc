// The only reader of streamed completion chunks: ScanJson (json_scan.h) for every chunk,
// nlohmann-json without exceptions for the message of an error.
#include "providers/bench/sse.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/json_scan.h"
#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

std::string Cut(std::string_view s) { return Excerpt(s, 200); }

/// Reads the few fields of a chunk that count (choices[0]'s text or delta content, usage's
/// completion_tokens, llama.cpp's timings.predicted_n and predicted_ms, whether "error" is
/// there) as ScanJson meets them: the whole event is
/// still checked to be JSON, but no document is built (building one was most of the
/// generator's CPU per token). A key given twice counts the last time, as in a document.
class ChunkReader : public JsonHandler {
 public:
  bool is_object = false;
  bool error = false;  // a top-level "error" that is not null
  size_t text = 0, content = 0, reasoning = 0;
  bool has_usage = false;
  uint64_t completion_tokens = 0;
  bool has_predicted_n = false, has_predicted_ms = false;
  uint64_t predicted_n = 0;
  double predicted_ms = 0;

  void Null() override {
    if (Value() == Role::kError) error = false;  // "error": null is no error
  }
  void Boolean(bool) override { Value(); }
  void Signed(int64_t v) override {
    Role r = Value();
    if (v < 0) return;
    Count(r, static_cast<uint64_t>(v));
    if (r == Role::kPredictedMs) SetMs(static_cast<double>(v));
  }
  void Unsigned(uint64_t v) override {
    Role r = Value();
    Count(r, v);
    if (r == Role::kPredictedMs) SetMs(static_cast<double>(v));
  }
  void Float(double v) override {
    if (Value() == Role::kPredictedMs) SetMs(v);
  }
  void String(std::string_view s) override {
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
  }
  void StartObject() override { Open(/*array=*/false); }
  void EndObject() override { --depth_; }
  void StartArray() override { Open(/*array=*/true); }
  void EndArray() override { --depth_; }
  void Key(std::string_view k) override {
    if (depth_ > kTracked) return;
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
        } else if (k == "timings") {
          f.next = Role::kTimings;
          has_predicted_n = has_predicted_ms = false;
        }
        break;
      case Role::kTimings:
        if (k == "predicted_n") {
          f.next = Role::kPredictedN;
          has_predicted_n = false;
        } else if (k == "predicted_ms") {
          f.next = Role::kPredictedMs;
          has_predicted_ms = false;
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
    kTimings,
    kPredictedN,
    kPredictedMs,
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
  void Open(bool array) {
    Role r = depth_ == 0 ? Role::kTop : Value();
    if (depth_ == 0) is_object = !array;
    // Each role is a container of one kind: "choices" an array, the rest objects.
    bool fits = array ? r == Role::kChoices
                      : (r == Role::kTop || r == Role::kChoice0 || r == Role::kDelta ||
                         r == Role::kUsage || r == Role::kTimings);
    ++depth_;
    if (depth_ <= kTracked) frames_[depth_ - 1] = Frame{fits ? r : Role::kOther, array, 0};
  }
  void Count(Role r, uint64_t v) {
    if (r == Role::kCompletionTokens) {
      has_usage = true;
      completion_tokens = v;
    } else if (r == Role::kPredictedN) {
      has_predicted_n = true;
      predicted_n = v;
    }
  }
  void SetMs(double v) {
    if (!std::isfinite(v) || v < 0) return;
    has_predicted_ms = true;
    predicted_ms = v;
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
  if (!ScanJson(data, r) || !r.is_object) {
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
  e.has_timings = r.has_predicted_n && r.has_predicted_ms;
  if (e.has_timings) {
    e.predicted_n = r.predicted_n;
    e.predicted_ms = r.predicted_ms;
  }
  return e;
}

}  // namespace berth
