// Internal error handling. Inside the core, failures are thrown as ctn::Error and turned into a
// ctn_status + thread-local message at the C ABI wall (util/wall.h); nothing escapes the ABI.
#pragma once

#include <chutney/types.h>

#include <cstdarg>
#include <exception>
#include <string>

namespace ctn {

class Error : public std::exception {
 public:
  Error(ctn_status code, std::string message) : code_(code), message_(std::move(message)) {}
  ctn_status code() const noexcept { return code_; }
  const char *what() const noexcept override { return message_.c_str(); }
  const std::string &message() const noexcept { return message_; }

 private:
  ctn_status code_;
  std::string message_;
};

std::string vformat(const char *fmt, va_list ap);
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(ctn_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Thread-local message of the last failing call (what ctn_last_error returns).
void set_last_error(ctn_status code, const std::string &message);
const char *last_error();
// Message recorded by a plugin through host->set_error during the current call; cleared by
// take_plugin_error.
void set_plugin_error(const std::string &message);
std::string take_plugin_error();

const char *status_name(ctn_status s);

}  // namespace ctn

// Propagates a plugin status as a ctn::Error carrying the plugin's message.
#define CTN_CHECK_PLUGIN(expr, what)                                                              \
  do {                                                                                            \
    ctn_status ctn_s_ = (expr);                                                                   \
    if (ctn_s_ != CTN_OK) {                                                                       \
      std::string ctn_m_ = ::ctn::take_plugin_error();                                            \
      throw ::ctn::Error(ctn_s_, std::string(what) + ": " +                                       \
                                     (ctn_m_.empty() ? ::ctn::status_name(ctn_s_) : ctn_m_));     \
    }                                                                                             \
  } while (0)
