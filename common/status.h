// Status and Result<T>: how every Propeller component reports errors.
//
// Errors are values (docs/style.md rule 3). One numbered code space with one to-string table
// (StatusCodeName); the wire mapping lives in schemas/, the errno mapping in client/fuse/.
// Status is cheap to copy when OK (no allocation) and safe to use from any thread.
#ifndef PROPELLER_COMMON_STATUS_H_
#define PROPELLER_COMMON_STATUS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace propeller {

// Numbered, stable: these numbers may appear on the wire (schemas/) and in logs.
enum class StatusCode : int {
  kOk = 0,
  kNotFound = 1,         // the named thing does not exist
  kInvalidArgument = 2,  // the caller's input is malformed (query, path, config, message)
  kCorruption = 3,       // stored or received bytes fail a check (CRC, format, version)
  kIOError = 4,          // the operating system refused a file or device operation
  kAlreadyExists = 5,    // create of something that exists
  kNotSupported = 6,     // valid request the component cannot do
  kResourceExhausted = 7,// a size or count limit was hit (map full, message too large)
  kUnavailable = 8,      // a peer or service is down or shutting down; retry may help
  kTimeout = 9,          // a deadline passed
  kPermissionDenied = 10,// the caller's credentials do not allow it
  kAborted = 11,         // stopped on purpose (shutdown, simulated crash)
  kInternal = 12,        // an invariant broke: a bug
  kRedirect = 13,        // the peer does not own what was asked for; the reply says who does
};

// Returns a constant, lowercase name such as "not found"; never null.
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message);

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) { return Status(StatusCode::kNotFound, msg); }
  static Status InvalidArgument(std::string_view msg) {
    return Status(StatusCode::kInvalidArgument, msg);
  }
  static Status Corruption(std::string_view msg) { return Status(StatusCode::kCorruption, msg); }
  static Status IOError(std::string_view msg) { return Status(StatusCode::kIOError, msg); }
  // IOError carrying strerror(err) after `context`, e.g. IOError("open /x", ENOENT); a full
  // disk or quota (ENOSPC, EDQUOT) is ResourceExhausted with the same message.
  static Status IOError(std::string_view context, int err);
  static Status AlreadyExists(std::string_view msg) {
    return Status(StatusCode::kAlreadyExists, msg);
  }
  static Status NotSupported(std::string_view msg) {
    return Status(StatusCode::kNotSupported, msg);
  }
  static Status ResourceExhausted(std::string_view msg) {
    return Status(StatusCode::kResourceExhausted, msg);
  }
  static Status Unavailable(std::string_view msg) { return Status(StatusCode::kUnavailable, msg); }
  static Status Timeout(std::string_view msg) { return Status(StatusCode::kTimeout, msg); }
  static Status PermissionDenied(std::string_view msg) {
    return Status(StatusCode::kPermissionDenied, msg);
  }
  static Status Aborted(std::string_view msg) { return Status(StatusCode::kAborted, msg); }
  static Status Internal(std::string_view msg) { return Status(StatusCode::kInternal, msg); }
  static Status Redirect(std::string_view msg) { return Status(StatusCode::kRedirect, msg); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // The message without the code name; empty when OK.
  const std::string& message() const;
  // "ok" or "<code name>: <message>".
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  bool IsNotFound() const { return code() == StatusCode::kNotFound; }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null when OK; immutable, so copies share it
};

// A value or an error. REQUIRES: value() only when ok(); status() is OK when ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT; REQUIRES: !status.ok()

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace propeller

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define PROPELLER_RETURN_IF_ERROR(expr)          \
  do {                                           \
    ::propeller::Status _st = (expr);            \
    if (!_st.ok()) return _st;                   \
  } while (0)

#define PROPELLER_CONCAT_INNER_(a, b) a##b
#define PROPELLER_CONCAT_(a, b) PROPELLER_CONCAT_INNER_(a, b)
// `PROPELLER_ASSIGN_OR_RETURN(auto x, Foo());` declares x from a Result or returns its error.
#define PROPELLER_ASSIGN_OR_RETURN(decl, expr)                                 \
  auto PROPELLER_CONCAT_(_res_, __LINE__) = (expr);                            \
  if (!PROPELLER_CONCAT_(_res_, __LINE__).ok())                                \
    return PROPELLER_CONCAT_(_res_, __LINE__).status();                        \
  decl = std::move(PROPELLER_CONCAT_(_res_, __LINE__)).value()

#endif  // PROPELLER_COMMON_STATUS_H_
