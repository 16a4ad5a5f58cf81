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
#include "models.h"

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
  const CnnWidths w = parse_widths(args.str("cnn-widths", "32,64,128"), "--cnn-widths");
  const ModelSpec spec = model_spec(model, w);
  if (!args.has("out")) throw UsageError("--out FILE is required");
  std::string out = args.str("out", "");
  const int64_t batch = args.integer("batch-size", spec.default_batch, 1, 60000);
  OptimConfig optim;
  optim.name = args.str("optimizer", "adam");

  ContextPtr ctx = open_context("", 0);
  BuiltModel tm = build_model(ctx.get(), model, batch, 1, true, optim, w);
  const char *text = nullptr;
  check(ctn_graph_to_dot(tm.graph.get(), &text), "ctn_graph_to_dot");
  uint32_t nodes = 0;
  check(ctn_graph_node_count(tm.graph.get(), &nodes), "ctn_graph_node_count");

  std::FILE *f = std::fopen(out.c_str(), "w");
  if (f == nullptr) throw Failure("cannot write " + out + ": " + std::strerror(errno));
  bool ok = std::fputs(text, f) >= 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw Failure("error while writing " + out);
  std::printf("wrote %s (training graph of %s, batch %lld, %s: %u nodes)\n", out.c_str(),
              spec.description.c_str(), static_cast<long long>(batch), optim.name.c_str(), nodes);

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
          {"model", "NAME", "mlp or cnn (default mlp)"},
          {"out", "FILE", "the DOT file to write (required)"},
          {"cnn-widths", "C1,C2[,C3],FC[,bn][,valid][,k3]", "cnn widths (default 32,64,128)"},
          {"batch-size", "B", "batch size of the graph's inputs (default: mlp 128, cnn 64)"},
          {"optimizer", "NAME", "optimizer whose updates the graph holds (default adam)"},
          {"no-svg", nullptr, "do not render SVG even when `dot` is available"},
      },
      run_graph};
  return spec;
}

}  // namespace ctn_cli
