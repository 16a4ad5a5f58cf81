// `chutney graph --model mlp --out FILE.dot`: the training graph (forward, backward and the
// optimizer updates) as Graphviz DOT, rendered to SVG when Graphviz's `dot` is installed.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli.h"
#include "mlp.h"

namespace ctn_cli {
namespace {

// The first executable `name` on PATH, or "" when there is none.
std::string find_on_path(const char *name) {
  const char *path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string list = path;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    // An empty PATH entry means the current directory.
    std::string candidate =
        (end > start ? list.substr(start, end - start) : std::string(".")) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

// Runs `dot -Tsvg -o svg dotfile` without a shell, so file names need no quoting.
bool render_svg(const std::string &dot, const std::string &dotfile, const std::string &svg) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const char *argv[] = {dot.c_str(), "-Tsvg", "-o", svg.c_str(), dotfile.c_str(), nullptr};
    execv(dot.c_str(), const_cast<char *const *>(argv));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int run_graph(const ParsedArgs &args) {
  std::string model = args.str("model", "mlp");
  if (model != "mlp") throw UsageError("unknown model '" + model + "' (available: mlp)");
  if (!args.has("out")) throw UsageError("--out FILE is required");
  std::string out = args.str("out", "");
  MlpConfig cfg;
  cfg.hidden = args.integer("hidden", 256, 1, 1 << 16);
  cfg.batch = args.integer("batch-size", 128, 1, 60000);

  ContextPtr ctx = open_context("", 0);
  MlpTrainGraph tg = mlp_train_graph(ctx.get(), cfg, mlp_init(cfg));
  const char *text = nullptr;
  check(ctn_graph_to_dot(tg.graph.get(), &text), "ctn_graph_to_dot");
  uint32_t nodes = 0;
  check(ctn_graph_node_count(tg.graph.get(), &nodes), "ctn_graph_node_count");

  std::FILE *f = std::fopen(out.c_str(), "w");
  if (f == nullptr) throw Failure("cannot write " + out + ": " + std::strerror(errno));
  bool ok = std::fputs(text, f) >= 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw Failure("error while writing " + out);
  std::printf("wrote %s (training graph of mlp %lld-%lld-%lld: %u nodes)\n", out.c_str(),
              static_cast<long long>(cfg.inputs), static_cast<long long>(cfg.hidden),
              static_cast<long long>(cfg.classes), nodes);

  if (args.flag("no-svg")) return kExitOk;
  std::string svg = out;
  if (svg.size() > 4 && svg.compare(svg.size() - 4, 4, ".dot") == 0) svg.resize(svg.size() - 4);
  svg += ".svg";
  std::string dot = find_on_path("dot");
  if (dot.empty()) {
    std::printf("Graphviz `dot` is not on PATH: no SVG rendered (Debian: apt install graphviz; "
                "then: dot -Tsvg -o %s %s)\n",
                svg.c_str(), out.c_str());
    return kExitOk;
  }
  if (!render_svg(dot, out, svg)) throw Failure(dot + " -Tsvg failed on " + out);
  std::printf("rendered %s with %s\n", svg.c_str(), dot.c_str());
  return kExitOk;
}

}  // namespace

const CommandSpec &graph_command() {
  static const CommandSpec spec{
      "graph",
      "write a model's training graph (forward + backward) as Graphviz DOT",
      "When Graphviz's `dot` is on PATH, FILE.dot is also rendered to FILE.svg.\n",
      {
          {"model", "NAME", "model (only: mlp; default mlp)"},
          {"out", "FILE", "the DOT file to write (required)"},
          {"hidden", "N", "hidden units of the MLP (default 256)"},
          {"batch-size", "B", "batch size of the graph's inputs (default 128)"},
          {"no-svg", nullptr, "do not render SVG even when `dot` is available"},
      },
      run_graph};
  return spec;
}

}  // namespace ctn_cli
