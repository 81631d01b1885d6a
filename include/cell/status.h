// Status and StatusOr: how every Cell operation reports success or failure.
//
// Errors travel as values, never as exceptions (in the manner of LevelDB and Abseil). An error carries a code and a
// message a user can act on; the message lives on the heap, so that an OK Status, which every call on every hot path
// makes, moves and drops, is a code and a null pointer (as LevelDB's is one null pointer).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cell {

class Status {
 public:
  enum class Code : unsigned char {
    kOk = 0,
    kNotFound,
    kInvalidArgument,               // the caller passed something that can never succeed (oversized key, ...)
    kResourceExhausted,             // out of space (meganode, extent region); the store is intact
    kCorruption,                    // bytes failed validation
    kUnavailable,                   // a server or connection is gone; retrying later may succeed
    kAborted,                       // a concurrent change got in the way; retrying may succeed
    kFailedPrecondition,            // the operation does not apply to this state (e.g. key belongs to another meganode)
    kInternal,                      // a bug: an invariant did not hold
    kDeadlineExceeded,              // no answer within the caller's timeout; the operation may or may not have happened
    kPermissionDenied,              // the caller lacks the key (or the role) the operation needs; nothing was done
    kLastCode = kPermissionDenied,  // the highest code (codes travel over the wire as numbers)
  };

  Status() = default;
  Status(const Status& other) : code_(other.code_), message_(Copy(other.message_)) {}
  // A moved-from Status keeps its code and has an empty message.
  Status(Status&& other) noexcept : code_(other.code_), message_(std::exchange(other.message_, nullptr)) {}
  Status& operator=(const Status& other) {
    if (this != &other) {
      std::string* copy = Copy(other.message_);
      delete message_;
      code_ = other.code_;
      message_ = copy;
    }
    return *this;
  }
  Status& operator=(Status&& other) noexcept {
    if (this != &other) {
      delete message_;
      code_ = other.code_;
      message_ = std::exchange(other.message_, nullptr);
    }
    return *this;
  }
  ~Status() { delete message_; }

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) { return Status(Code::kNotFound, msg); }
  static Status InvalidArgument(std::string_view msg) { return Status(Code::kInvalidArgument, msg); }
  static Status ResourceExhausted(std::string_view msg) { return Status(Code::kResourceExhausted, msg); }
  static Status Corruption(std::string_view msg) { return Status(Code::kCorruption, msg); }
  static Status Unavailable(std::string_view msg) { return Status(Code::kUnavailable, msg); }
  static Status Aborted(std::string_view msg) { return Status(Code::kAborted, msg); }
  static Status FailedPrecondition(std::string_view msg) { return Status(Code::kFailedPrecondition, msg); }
  static Status Internal(std::string_view msg) { return Status(Code::kInternal, msg); }
  static Status DeadlineExceeded(std::string_view msg) { return Status(Code::kDeadlineExceeded, msg); }
  static Status PermissionDenied(std::string_view msg) { return Status(Code::kPermissionDenied, msg); }
  // The status with this code and message (for codes that travel over the wire); unknown codes become kInternal.
  static Status FromCode(Code code, std::string_view msg) {
    if (code == Code::kOk) return Status();
    if (static_cast<unsigned>(code) > static_cast<unsigned>(Code::kLastCode)) code = Code::kInternal;
    return Status(code, msg);
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_ != nullptr ? *message_ : EmptyMessage(); }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsResourceExhausted() const { return code_ == Code::kResourceExhausted; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsUnavailable() const { return code_ == Code::kUnavailable; }
  bool IsAborted() const { return code_ == Code::kAborted; }
  bool IsDeadlineExceeded() const { return code_ == Code::kDeadlineExceeded; }
  bool IsPermissionDenied() const { return code_ == Code::kPermissionDenied; }

  // "OK", or "<code name>: <message>".
  std::string ToString() const;
  static std::string_view CodeName(Code code);

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_ && a.message() == b.message(); }

 private:
  Status(Code code, std::string_view msg) : code_(code), message_(msg.empty() ? nullptr : new std::string(msg)) {}
  static std::string* Copy(const std::string* message) {
    return message != nullptr ? new std::string(*message) : nullptr;
  }
  static const std::string& EmptyMessage() {
    static const std::string empty;
    return empty;
  }
  Code code_ = Code::kOk;
  std::string* message_ = nullptr;  // null for OK, and for an error without a message
};

inline std::string_view Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NotFound";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
    case Code::kCorruption:
      return "Corruption";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kAborted:
      return "Aborted";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kInternal:
      return "Internal";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Code::kPermissionDenied:
      return "PermissionDenied";
  }
  return "Unknown";
}

inline std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  s += ": ";
  s += message();
  return s;
}

// A value of type T, or the Status that explains why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) { assert(!status.ok()); }         // NOLINT: implicit by design
  StatusOr(Status&& status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(const T& value) : value_(value) {}                                        // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}                                  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace cell

// Returns from the enclosing function if `expr` yields a non-OK Status.
#define CELL_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::cell::Status _cell_status = (expr);        \
    if (!_cell_status.ok()) return _cell_status; \
  } while (0)

// `lhs = value of expr` if the StatusOr `expr` holds one; otherwise returns its Status from the enclosing function.
//   CELL_ASSIGN_OR_RETURN(auto table, OpenTable(uri));
#define CELL_ASSIGN_OR_RETURN(lhs, expr) \
  CELL_ASSIGN_OR_RETURN_IMPL_(CELL_STATUS_CONCAT_(_cell_status_or_, __LINE__), lhs, expr)
#define CELL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
#define CELL_STATUS_CONCAT_(a, b) CELL_STATUS_CONCAT_INNER_(a, b)
#define CELL_STATUS_CONCAT_INNER_(a, b) a##b
