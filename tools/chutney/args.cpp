// Command-line parsing and small helpers shared by the commands.
#include "cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

namespace ctn_cli {

void check(ctn_status status, const char *what) {
  if (status == CTN_OK) return;
  std::string msg = what;
  msg += ": ";
  std::string name = ctn_status_name(status);
  const char *detail = ctn_last_error();
  std::string text = detail != nullptr ? detail : "";
  // The library's message may already start with the status name; do not say it twice.
  if (text.rfind(name, 0) != 0) msg += name + (text.empty() ? "" : ": ");
  msg += text;
  throw Failure(msg);
}

std::string read_user_file(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Failure("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) why = std::strerror(errno);
  else if (S_ISFIFO(st.st_mode)) why = "is a FIFO, not a regular file";
  else if (S_ISDIR(st.st_mode)) why = "is a directory";
  else if (!S_ISREG(st.st_mode)) why = "is not a regular file";
  else if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) why = std::strerror(errno);
  std::string bytes;
  char buf[1 << 16];
  for (ssize_t n; why.empty() && (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = std::strerror(errno);
    else bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!why.empty()) throw Failure("cannot read " + path + ": " + why);
  return bytes;
}

TensorPtr make_tensor(ctn_dtype dtype, const std::vector<int64_t> &shape, const void *data) {
  ctn_tensor *t = nullptr;
  check(ctn_tensor_create(dtype, static_cast<uint32_t>(shape.size()), shape.data(), data, &t),
        "ctn_tensor_create");
  return TensorPtr(t);
}

ContextPtr open_context(const std::string &backends, int32_t threads) {
  ctn_context_options opts{};
  opts.struct_size = sizeof opts;
  opts.num_threads = threads;
  ctn_context *raw = nullptr;
  check(ctn_context_create(&opts, &raw), "ctn_context_create");
  ContextPtr ctx(raw);
  if (!backends.empty()) {
    ctn_status st = ctn_context_set_backends(ctx.get(), backends.c_str());
    if (st != CTN_OK) {
      try {
        check(st, ("--backend " + backends).c_str());
      } catch (const Failure &e) {
        throw Failure(std::string(e.what()) +
                      " (`chutney plugins --explain` lists the backends and why)");
      }
    }
  }
  return ctx;
}

namespace {

const OptionSpec *find_option(const CommandSpec &spec, const std::string &name) {
  for (const OptionSpec &o : spec.options) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

}  // namespace

ParsedArgs::ParsedArgs(const CommandSpec &spec, int argc, char **argv) {
  for (int i = 0; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "-h" || word == "--help") {
      help_ = true;
      continue;
    }
    if (word.rfind("--", 0) != 0 || word.size() == 2) {
      throw UsageError("unexpected argument '" + word + "'");
    }
    std::string name = word.substr(2);
    std::string value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec *opt = find_option(spec, name);
    if (opt == nullptr) throw UsageError("unknown option '--" + name + "'");
    if (opt->metavar == nullptr) {
      if (inline_value) throw UsageError("option '--" + name + "' takes no value");
      values_[name] = "1";
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("option '--" + name + "' needs a value (" +
                                          opt->metavar + ")");
      value = argv[++i];
    }
    // An empty value is a mistake (an unset shell variable, `--json=`), never "not given".
    if (value.empty())
      throw UsageError("option '--" + name + "' needs a value (" + opt->metavar + "), got an empty one");
    values_[name] = value;
  }
}

std::string ParsedArgs::str(const std::string &name, const std::string &fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t ParsedArgs::integer(const std::string &name, int64_t fallback, int64_t lo,
                            int64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string &s = it->second;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    std::ostringstream msg;
    msg << "--" << name << " expects an integer in [" << lo << ", " << hi << "], got '" << s
        << "'";
    throw UsageError(msg.str());
  }
  return v;
}

double ParsedArgs::real(const std::string &name, double fallback, double lo, double hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string &s = it->second;
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream msg;
    msg << "--" << name << " expects a number in [" << lo << ", " << hi << "], got '" << s
        << "'";
    throw UsageError(msg.str());
  }
  return v;
}

std::string command_usage(const CommandSpec &spec) {
  std::ostringstream out;
  out << "usage: chutney " << spec.name;
  if (!spec.options.empty()) out << " [options]";
  out << "\n\n" << spec.summary << "\n\noptions:\n";
  size_t width = 10;  // "-h, --help"
  for (const OptionSpec &o : spec.options) {
    size_t w = 2 + std::string(o.name).size() + (o.metavar ? 1 + std::string(o.metavar).size() : 0);
    if (w > width) width = w;
  }
  auto line = [&](const std::string &left, const char *help) {
    out << "  " << left << std::string(width - left.size() + 2, ' ') << help << "\n";
  };
  for (const OptionSpec &o : spec.options) {
    std::string left = std::string("--") + o.name;
    if (o.metavar != nullptr) left += std::string(" ") + o.metavar;
    line(left, o.help);
  }
  line("-h, --help", "show this help and exit");
  if (spec.details != nullptr) out << "\n" << spec.details;
  return out.str();
}

std::string human_bytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace ctn_cli
