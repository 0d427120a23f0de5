// Status and Result<T>: how every DLFS layer reports failure.
//
// A Status is an errno value plus a human message that names the thing and
// what is wrong ("backend /data/x: No such file or directory"). The errno is
// what the FUSE adapter replies with; the message is what gets logged or
// printed. Errors are decided (and their message written) where they happen;
// callers add context with Status::with_context, they do not re-invent it.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace dlfs {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(int err, std::string message) : err_(err), message_(std::move(message)) {}

  static Status ok() { return {}; }
  // errno-style failure with the strerror text appended to what.
  static Status from_errno(int err, const std::string& what);

  bool is_ok() const { return err_ == 0; }
  explicit operator bool() const { return is_ok(); }
  int err() const { return err_; }
  const std::string& message() const { return message_; }

  // "context: message", keeping the errno.
  Status with_context(const std::string& context) const {
    return is_ok() ? *this : Status(err_, context + ": " + message_);
  }

 private:
  int err_ = 0;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  // An OK Status carries no value: keep it an error so `if (!r) return r.status();` never returns OK.
  Result(Status status)  // NOLINT: implicit by design
      : v_(status.is_ok() ? Status(EINVAL, "internal error: Result built from an OK Status") : std::move(status)) {}

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dlfs

// Early return of a failed Status / Result from a function returning Status or Result.
#define DLFS_RETURN_IF_ERROR(expr)                   \
  do {                                               \
    ::dlfs::Status dlfs_status_ = (expr);            \
    if (!dlfs_status_.is_ok()) return dlfs_status_;  \
  } while (0)

// Propagation of a Result<T>: evaluates `expr` once; on failure returns its
// Status from the enclosing function, else moves the value into `lhs`, which
// may be a declaration:
//   DLFS_ASSIGN_OR_RETURN(auto manifest, Manifest::build(root, options));
#define DLFS_CONCAT_INNER_(a, b) a##b
#define DLFS_CONCAT_(a, b) DLFS_CONCAT_INNER_(a, b)
#define DLFS_ASSIGN_OR_RETURN(lhs, expr) DLFS_ASSIGN_OR_RETURN_IMPL_(DLFS_CONCAT_(dlfs_result_, __LINE__), lhs, expr)
#define DLFS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
