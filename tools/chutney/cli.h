// Shared pieces of the `chutney` command-line tool: errors, argument parsing, handle wrappers.
// The tool sees libchutney only through the public C API (chutney/chutney.h).
#pragma once

#include <chutney/chutney.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctn_cli {

// Exit codes: scripts tell a usage mistake from a run-time failure.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A run-time failure (bad data file, library error): printed as "chutney: <message>", exit 1.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A mistake on the command line: printed with the command's usage, exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Turns a failed library call into a Failure carrying the library's own message, so the user
// sees which call failed and why ("ctn_plan_compile: CTN_ERR_SHAPE: matmul: ...").
void check(ctn_status status, const char *what);

// ---- handles ---------------------------------------------------------------------------------
struct ContextDeleter {
  void operator()(ctn_context *p) const { ctn_context_release(p); }
};
struct GraphDeleter {
  void operator()(ctn_graph *p) const { ctn_graph_release(p); }
};
struct PlanDeleter {
  void operator()(ctn_plan *p) const { ctn_plan_release(p); }
};
struct TensorDeleter {
  void operator()(ctn_tensor *p) const { ctn_tensor_release(p); }
};
using ContextPtr = std::unique_ptr<ctn_context, ContextDeleter>;
using GraphPtr = std::unique_ptr<ctn_graph, GraphDeleter>;
using PlanPtr = std::unique_ptr<ctn_plan, PlanDeleter>;
using TensorPtr = std::unique_ptr<ctn_tensor, TensorDeleter>;

TensorPtr make_tensor(ctn_dtype dtype, const std::vector<int64_t> &shape, const void *data);

// The whole of the file a user named, which must be a regular file: a FIFO, a directory or a
// device is a Failure "cannot read PATH: is a FIFO..." at once (a plain open of a FIFO waits for
// a writer forever).
std::string read_user_file(const std::string &path);

// A context with the default plugin search. `backends` ("" keeps CHUTNEY_BACKEND / "cpu") is
// applied with ctn_context_set_backends so that an unavailable backend is a clear error;
// `threads` 0 keeps CHUTNEY_NUM_THREADS / the core count.
ContextPtr open_context(const std::string &backends, int32_t threads);

// ---- command line ----------------------------------------------------------------------------
struct OptionSpec {
  const char *name;     // without the leading "--"
  const char *metavar;  // nullptr for a flag that takes no value
  const char *help;
};

class ParsedArgs;
using CommandFn = int (*)(const ParsedArgs &);

struct CommandSpec {
  const char *name;
  const char *summary;  // one line, shown by `chutney --help`
  const char *details;  // free text after the option list; may be nullptr
  std::vector<OptionSpec> options;
  CommandFn run;
};

class ParsedArgs {
 public:
  // Parses argv (after the command name). Throws UsageError on an unknown option, a missing
  // value or a stray positional argument. Sets help() for -h/--help.
  ParsedArgs(const CommandSpec &spec, int argc, char **argv);

  bool help() const { return help_; }
  bool has(const std::string &name) const { return values_.count(name) != 0; }
  bool flag(const std::string &name) const { return has(name); }
  std::string str(const std::string &name, const std::string &fallback) const;
  // Integers and reals are checked strictly (the whole word, within [lo, hi]).
  int64_t integer(const std::string &name, int64_t fallback, int64_t lo, int64_t hi) const;
  double real(const std::string &name, double fallback, double lo, double hi) const;

 private:
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

std::string command_usage(const CommandSpec &spec);

// Commands (cmd_*.cpp).
const CommandSpec &version_command();
const CommandSpec &plugins_command();
const CommandSpec &train_command();
const CommandSpec &graph_command();
const CommandSpec &eval_command();
const CommandSpec &quantize_command();
int onnx_main(int argc, char **argv);  // `chutney onnx ...` (cmd_onnx.cpp)

// Formatting helpers.
std::string human_bytes(uint64_t bytes);
bool stderr_is_tty();
// CPU time of the whole process (every thread), seconds: on a shared machine, work per image
// is steadier than wall time.
double process_cpu_seconds();

}  // namespace ctn_cli
