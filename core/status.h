// Status and Result<T>: berth's one error currency. No exceptions cross a layer;
// each outside library's errors are turned into a Status where it is called.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace berth {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // the input is wrong (manifest, flag, saved file)
    kNotFound,
    kFailedPrecondition,  // the world is not as required (blocked plan, stale saved plan)
    kUnavailable,         // transient: retrying may help
    kPermissionDenied,
    kIoError,
    kInternal,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status FailedPrecondition(std::string msg) {
    return {Code::kFailedPrecondition, std::move(msg)};
  }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) {
    return {Code::kPermissionDenied, std::move(msg)};
  }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "what happened" prefixed with `context`, for callers that add where it happened.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }
  /// The same failure with `more` added after its message.
  Status Append(const std::string& more) const {
    if (ok()) return *this;
    return Status(code_, message_ + more);
  }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

/// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace berth

/// Returns the Status of `expr` from the enclosing function when it is not ok.
#define BERTH_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::berth::Status berth_status_ = (expr);        \
    if (!berth_status_.ok()) return berth_status_; \
  } while (0)
