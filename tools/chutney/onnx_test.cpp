// `chutney onnx test DIR`: runs ONNX backend-test cases. Each case runs in a forked child (with
// its own context) under a time limit, so a crash or hang is that case's failure and the run
// goes on. Lists: --expected (cases that must pass: the run fails if one does not), --skip
// (`NAME[*]: reason`, every entry with a reason; a trailing * matches a prefix), and a floor on
// the number of cases found (a suite that silently found nothing must not pass).
#include "npy.h"
#include "onnx_cli.h"

#include <chutney/desc.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ctn_cli {
namespace {

const char kHelp[] =
    "usage: chutney onnx test DIR... [options]\n"
    "  each DIR holds one case (model.onnx + test_data_set_N/) or one case per subdirectory.\n"
    "  --expected FILE     case names (one a line) that must pass; the run fails when one does\n"
    "                      not, or when a case fails that is neither expected nor skipped\n"
    "  --skip FILE         'NAME: reason' or 'PREFIX*: reason' lines; listed cases are not run\n"
    "  --min-cases N       fail when fewer than N cases are found\n"
    "  --filter TEXT       run only cases whose name contains TEXT\n"
    "  --rtol R --atol A   float tolerance |out - ref| <= atol + rtol |ref| (default 1e-3, 1e-7;\n"
    "                      f16 and bf16 values decoded, bf16 with rtol at least 2^-7: one ulp)\n"
    "  --timeout S         seconds per case (default 60)\n"
    "  --report FILE       write 'name<TAB>status<TAB>reason' per case\n"
    "  --write-passing FILE  write the names of the passing cases (an --expected list)\n"
    "  -v                  print every case, not only failures of expected cases\n";

struct Options {
  std::vector<std::string> dirs;
  std::string expected, skip, filter, report, write_passing;
  long min_cases = 0;
  double rtol = 1e-3, atol = 1e-7;
  int timeout = 60;
  bool verbose = false;
};

std::vector<std::string> list_dir(const std::string &d) {
  std::vector<std::string> v;
  if (DIR *dp = ::opendir(d.c_str())) {
    while (dirent *e = ::readdir(dp))
      if (e->d_name[0] != '.') v.push_back(e->d_name);
    ::closedir(dp);
  }
  std::sort(v.begin(), v.end());
  return v;
}

bool exists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string tensor_str(const ctn_tensor *t) {
  ctn_dtype dt;
  uint32_t nd = 0;
  int64_t s[CTN_MAX_DIMS];
  ctn_tensor_dtype(t, &dt);
  ctn_tensor_shape(t, &nd, s);
  std::string r = std::string(ctn_dtype_name(dt)) + "[";
  for (uint32_t k = 0; k < nd; ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + "]";
}

// Element i of a floating buffer of dtype dt as a double (16-bit floats decoded exactly), so
// every floating dtype is compared with the same tolerance and NaN is NaN whatever its payload.
double float_at(const char *p, ctn_dtype dt, int64_t i) {
  uint16_t h = 0;
  if (dt == CTN_F16 || dt == CTN_BF16) std::memcpy(&h, p + 2 * i, 2);
  switch (dt) {
    case CTN_F32: return reinterpret_cast<const float *>(p)[i];
    case CTN_F16: return ctn_desc_f16_to_f32(h);
    case CTN_BF16: return ctn_desc_bf16_to_f32(h);
    default: return reinterpret_cast<const double *>(p)[i];
  }
}

// "" when `out` matches `ref`, else what differs.
std::string compare(const ctn_tensor *out, const ctn_tensor *ref, double rtol, double atol) {
  if (tensor_str(out) != tensor_str(ref)) return "got " + tensor_str(out) + ", expected " + tensor_str(ref);
  ctn_dtype dt;
  int64_t n = 0;
  ctn_tensor_dtype(ref, &dt);
  ctn_tensor_numel(ref, &n);
  const size_t es = ctn_dtype_size(dt);
  std::vector<char> a(static_cast<size_t>(n) * es), b(a.size());
  check(ctn_tensor_read(out, a.data(), a.size()), "ctn_tensor_read");
  check(ctn_tensor_read(ref, b.data(), b.size()), "ctn_tensor_read");
  int64_t bad = 0, first = -1;
  double worst = 0;
  const bool floating = dt == CTN_F32 || dt == CTN_F64 || dt == CTN_F16 || dt == CTN_BF16;
  // bfloat16 keeps 8 significant bits: a result one unit in the last place from the reference
  // (a rounding step done differently) is as close as the format can say, whatever rtol asks.
  const double rel = dt == CTN_BF16 ? std::max(rtol, 0x1p-7) : rtol;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (floating) {
      const double x = float_at(a.data(), dt, i), y = float_at(b.data(), dt, i);
      ok = (std::isnan(x) && std::isnan(y)) || x == y || std::fabs(x - y) <= atol + rel * std::fabs(y);
      if (!ok) worst = std::max(worst, std::fabs(x - y));
    } else {
      ok = std::memcmp(a.data() + i * es, b.data() + i * es, es) == 0;
    }
    if (!ok && first < 0) first = i;
    bad += !ok;
  }
  if (!bad) return "";
  std::ostringstream m;
  m << bad << " of " << n << " elements differ (first at " << first;
  if (floating) m << ", max abs diff " << worst;
  m << ")";
  return m.str();
}

// Runs one case in this process; returns "" on success or the reason it failed.
std::string run_case(ctn_context *ctx, const std::string &dir, const Options &o) {
  std::vector<std::string> sets;
  for (const std::string &e : list_dir(dir))
    if (e.rfind("test_data_set_", 0) == 0) sets.push_back(dir + "/" + e);
  if (sets.empty()) return "no test_data_set_* directory";
  for (const std::string &set : sets) {
    NamedTensors inputs, refs;
    for (int k = 0;; ++k) {
      std::string p = set + "/input_" + std::to_string(k) + ".pb";
      if (!exists(p)) break;
      ctn_tensor *t = nullptr;
      const char *name = nullptr;
      check(ctn_onnx_tensor_load(p.c_str(), &t, &name), p.c_str());
      inputs.emplace_back(name, TensorPtr(t));
    }
    for (int k = 0;; ++k) {
      std::string p = set + "/output_" + std::to_string(k) + ".pb";
      if (!exists(p)) break;
      ctn_tensor *t = nullptr;
      check(ctn_onnx_tensor_load(p.c_str(), &t, nullptr), p.c_str());
      refs.emplace_back("", TensorPtr(t));
    }
    // Input files name their tensors, but not always; they follow the model's input order.
    LoadedModel probe = load_onnx(ctx, dir + "/model.onnx", {}, CTN_ONNX_INSPECT_ONLY);
    for (size_t k = 0; k < inputs.size() && k < probe.input_names.size(); ++k) inputs[k].first = probe.input_names[k];
    LoadedModel m = load_onnx(ctx, dir + "/model.onnx", inputs, 0);
    NamedTensors outs = run_onnx(m, inputs);
    if (outs.size() != refs.size())
      return "the model has " + std::to_string(outs.size()) + " outputs, the case " + std::to_string(refs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      std::string d = compare(outs[k].second.get(), refs[k].second.get(), o.rtol, o.atol);
      if (!d.empty()) return "output " + std::to_string(k) + " (" + outs[k].first + "): " + d;
    }
  }
  return "";
}

// Forks, runs the case in the child, reads "" or the reason back through a pipe. The child uses
// the parent's context (created once: plugin loading dominates a small case's time), which has
// one worker thread, so that no pool thread the child lacks is waited for.
std::string run_isolated(ctn_context *ctx, const std::string &dir, const Options &o) {
  int fds[2];
  if (::pipe(fds) != 0) throw Failure("pipe failed");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) throw Failure("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    std::string r;
    try {
      r = run_case(ctx, dir, o);
    } catch (const std::exception &e) {
      r = e.what();
    }
    r = "R" + r;
    ssize_t w = ::write(fds[1], r.data(), r.size());
    (void)w;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout);
  bool timed_out = false;
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out) return "timed out after " + std::to_string(o.timeout) + " s";
  if (WIFSIGNALED(status)) return "crashed (signal " + std::to_string(WTERMSIG(status)) + ")";
  if (got.empty() || got[0] != 'R') return "the case's process ended without a result";
  return got.substr(1);
}

std::vector<std::string> read_lines(const std::string &path) {
  std::vector<std::string> v;
  if (path.empty()) return v;
  std::istringstream f(read_user_file(path));
  for (std::string line; std::getline(f, line);) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    size_t b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) v.push_back(line.substr(b, e - b + 1));
  }
  return v;
}

struct SkipRule {
  std::string pattern, reason;
  bool prefix = false;
};

std::vector<SkipRule> read_skips(const std::string &path) {
  std::vector<SkipRule> rules;
  for (const std::string &l : read_lines(path)) {
    size_t colon = l.find(':');
    std::string reason = colon == std::string::npos ? "" : l.substr(colon + 1);
    size_t b = reason.find_first_not_of(" \t");
    reason = b == std::string::npos ? "" : reason.substr(b);
    if (reason.empty()) throw Failure(path + ": the skip entry '" + l + "' has no reason ('NAME: reason')");
    SkipRule r{l.substr(0, colon), reason, false};
    while (!r.pattern.empty() && (r.pattern.back() == ' ' || r.pattern.back() == '\t')) r.pattern.pop_back();
    if (!r.pattern.empty() && r.pattern.back() == '*') r.prefix = true, r.pattern.pop_back();
    rules.push_back(r);
  }
  return rules;
}

const SkipRule *find_skip(const std::vector<SkipRule> &rules, const std::string &name) {
  for (const SkipRule &r : rules)
    if (r.prefix ? name.rfind(r.pattern, 0) == 0 : name == r.pattern) return &r;
  return nullptr;
}

bool expanded(const std::string &name) { return name.find("_expanded") != std::string::npos; }

}  // namespace

int onnx_test_main(int argc, char **argv) {
  Options o;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](double lo) {
      std::string v = value();
      char *end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(x >= lo)) throw UsageError(a + ": bad value '" + v + "'");
      return x;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (a == "--expected") o.expected = value();
    else if (a == "--skip") o.skip = value();
    else if (a == "--filter") o.filter = value();
    else if (a == "--report") o.report = value();
    else if (a == "--write-passing") o.write_passing = value();
    else if (a == "--min-cases") o.min_cases = static_cast<long>(number(0));
    else if (a == "--rtol") o.rtol = number(0);
    else if (a == "--atol") o.atol = number(0);
    else if (a == "--timeout") o.timeout = static_cast<int>(number(1));
    else if (a == "-v") o.verbose = true;
    else if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
    else o.dirs.push_back(a);
  }
  if (o.dirs.empty()) throw UsageError("missing DIR");
  std::vector<std::pair<std::string, std::string>> cases;  // name, dir
  for (const std::string &dir : o.dirs) {
    if (exists(dir + "/model.onnx")) {
      std::string d = dir;
      while (d.size() > 1 && d.back() == '/') d.pop_back();
      cases.emplace_back(d.substr(d.rfind('/') == std::string::npos ? 0 : d.rfind('/') + 1), d);
    } else {
      for (const std::string &e : list_dir(dir))
        if (exists(dir + "/" + e + "/model.onnx")) cases.emplace_back(e, dir + "/" + e);
    }
  }
  const std::vector<SkipRule> skips = read_skips(o.skip);
  ContextPtr ctx = open_context("", 1);
  std::vector<std::string> exp_list = read_lines(o.expected);
  std::set<std::string> expected(exp_list.begin(), exp_list.end());
  std::set<std::string> found;
  for (auto &c : cases) found.insert(c.first);
  std::map<std::string, int> skipped_by;
  std::vector<std::string> passing, expected_failed, newly, unlisted;
  long n_pass = 0, n_fail = 0, n_skip = 0, pass_top = 0, pass_exp = 0, n_run = 0;
  std::ofstream report;
  if (!o.report.empty()) {
    report.open(o.report);
    if (!report) throw Failure("cannot create " + o.report);
  }
  for (auto &[name, dir] : cases) {
    if (!o.filter.empty() && name.find(o.filter) == std::string::npos) continue;
    std::string status, reason;
    if (const SkipRule *r = find_skip(skips, name)) {
      ++n_skip;
      ++skipped_by[r->reason];
      status = "skip";
      reason = r->reason;
      if (expected.count(name)) throw Failure(name + " is both expected to pass and skipped");
    } else {
      ++n_run;
      reason = run_isolated(ctx.get(), dir, o);
      status = reason.empty() ? "pass" : "fail";
      if (reason.empty()) {
        ++n_pass;
        (expanded(name) ? pass_exp : pass_top)++;
        passing.push_back(name);
        if (!expected.empty() && !expected.count(name)) newly.push_back(name);
      } else {
        ++n_fail;
        // With lists, every case must be accounted for: expected to pass, or skipped for a reason.
        if (expected.count(name)) expected_failed.push_back(name + ": " + reason);
        else if (!o.expected.empty()) unlisted.push_back(name + ": " + reason);
      }
      if (o.verbose || (!reason.empty() && !o.expected.empty()))
        std::printf("%s %s%s%s\n", reason.empty() ? "PASS" : "FAIL", name.c_str(), reason.empty() ? "" : ": ", reason.c_str());
    }
    if (report) report << name << '\t' << status << '\t' << reason << '\n';
  }
  for (const std::string &e : exp_list)
    if (!found.count(e)) expected_failed.push_back(e + ": expected to pass but not found");
  if (!o.write_passing.empty()) {
    std::ofstream w(o.write_passing);
    for (const std::string &p : passing) w << p << '\n';
  }
  std::printf("onnx test: %zu cases found; %ld run: %ld passed (%ld top-level, %ld _expanded), %ld failed; %ld skipped\n",
              cases.size(), n_run, n_pass, pass_top, pass_exp, n_fail, n_skip);
  if (!skipped_by.empty()) {
    std::printf("onnx test: skipped by reason:\n");
    for (auto &[r, k] : skipped_by) std::printf("  %5d  %s\n", k, r.c_str());
  }
  if (!newly.empty()) {
    std::printf("onnx test: %zu cases pass that the expected list lacks (add them):", newly.size());
    for (const std::string &n : newly) std::printf(" %s", n.c_str());
    std::printf("\n");
  }
  bool ok = true;
  if (static_cast<long>(cases.size()) < o.min_cases) {
    std::printf("onnx test: FAILED: %zu cases found, fewer than the floor of %ld\n", cases.size(), o.min_cases);
    ok = false;
  }
  if (!unlisted.empty()) {
    std::printf("onnx test: FAILED: %zu cases failed that are neither expected to pass nor skipped with a reason:\n",
                unlisted.size());
    for (const std::string &e : unlisted) std::printf("  %s\n", e.c_str());
    ok = false;
  }
  if (!expected_failed.empty()) {
    std::printf("onnx test: FAILED: %zu expected cases did not pass:\n", expected_failed.size());
    for (const std::string &e : expected_failed) std::printf("  %s\n", e.c_str());
    ok = false;
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace ctn_cli
