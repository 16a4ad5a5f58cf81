// The CHUTNEY_* environment variables: one table of every variable the library and its
// first-party plugins read, with the values each accepts, checked in one place before a context
// is made (README.md's "Environment variables" lists the same table).
#pragma once

#include <string>
#include <vector>

namespace ctn {

enum class EnvKind {
  Flag,      // "0" or "1"
  Count,     // an integer in [lo, hi]
  Choice,    // one of `choices` (comma-separated)
  Backends,  // a comma-separated list of backend names (checked against the loaded backends later)
  Paths,     // a path or a ':'-separated list of paths; may be empty (none)
  Text,      // any non-empty text (a file name, a device name)
};

struct EnvVar {
  const char *name;
  EnvKind kind;
  const char *choices;  // Choice: "a,b,c"; Count: unused
  long long lo, hi;     // Count
  const char *what;     // one line for docs and messages
};

// Every variable of the table, in the order docs/ENVIRONMENT.md lists them.
const std::vector<EnvVar> &env_vars();

// Checks every CHUTNEY_* variable of the environment against the table: a value a variable does
// not accept throws
// ctn::Error(CTN_ERR_INVALID_ARGUMENT) naming the variable, the value and what it accepts. A
// CHUTNEY_* name the table does not know is warned about once per process on stderr (with the
// closest known name), since a typo would otherwise be silently ignored. An empty value is the
// same as unset (the shell's `VAR= command`; meson's test environments cannot unset).
void validate_environment();

// The value of flag `name`: true for "1" (validate_environment() refuses anything but "0"/"1").
bool env_flag(const char *name);

}  // namespace ctn
