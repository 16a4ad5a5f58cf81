// `chutney`: command-line front end of the chutney runtime.
//   chutney <command> [options]      chutney <command> --help      chutney --help
// Exit status: 0 success, 1 run-time failure, 2 usage error.
#include "cli.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace ctn_cli {
namespace {

std::vector<const CommandSpec *> commands() {
  return {&version_command(), &plugins_command(), &train_command(), &eval_command(),
          &graph_command(), &quantize_command()};
}

const CommandSpec *find_command(const std::string &name) {
  for (const CommandSpec *c : commands()) {
    if (name == c->name) return c;
  }
  return nullptr;
}

void print_main_usage(std::FILE *f) {
  std::fprintf(f,
               "usage: chutney <command> [options]\n"
               "       chutney <command> --help\n\n"
               "commands:\n");
  for (const CommandSpec *c : commands()) std::fprintf(f, "  %-10s %s\n", c->name, c->summary);
  std::fprintf(f, "  %-10s %s\n", "onnx", "run, inspect or test ONNX models (chutney onnx --help)");
  std::fprintf(f, "  %-10s %s\n", "help", "show the help of a command");
  std::fprintf(f,
               "\nenvironment: CHUTNEY_BACKEND, CHUTNEY_NUM_THREADS, CHUTNEY_PLUGIN_PATH, "
               "CHUTNEY_LOG\n");
}

int run(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "chutney: missing command\n\n");
    print_main_usage(stderr);
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help") {
    print_main_usage(stdout);
    return kExitOk;
  }
  if (name == "--version") name = "version";
  // `onnx` has subcommands and repeated options: it parses its own arguments.
  if (name == "onnx") return onnx_main(argc - 2, argv + 2);
  if (name == "help") {
    if (argc < 3) {
      print_main_usage(stdout);
      return kExitOk;
    }
    const CommandSpec *c = find_command(argv[2]);
    if (c == nullptr) {
      std::fprintf(stderr, "chutney: unknown command '%s'\n\n", argv[2]);
      print_main_usage(stderr);
      return kExitUsage;
    }
    std::fputs(command_usage(*c).c_str(), stdout);
    return kExitOk;
  }
  const CommandSpec *cmd = find_command(name);
  if (cmd == nullptr) {
    std::fprintf(stderr, "chutney: unknown command '%s'\n\n", name.c_str());
    print_main_usage(stderr);
    return kExitUsage;
  }
  try {
    ParsedArgs args(*cmd, argc - 2, argv + 2);
    if (args.help()) {
      std::fputs(command_usage(*cmd).c_str(), stdout);
      return kExitOk;
    }
    return cmd->run(args);
  } catch (const UsageError &e) {
    std::fprintf(stderr,
                 "chutney %s: %s\nusage: chutney %s%s\n"
                 "run 'chutney %s --help' for the list of options\n",
                 cmd->name, e.what(), cmd->name, cmd->options.empty() ? "" : " [options]",
                 cmd->name);
    return kExitUsage;
  }
}

}  // namespace
}  // namespace ctn_cli

int main(int argc, char **argv) {
  try {
    return ctn_cli::run(argc, argv);
  } catch (const ctn_cli::Failure &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "chutney: error: %s\n", e.what());
    return ctn_cli::kExitFailure;
  } catch (const std::bad_alloc &) {
    std::fflush(stdout);
    std::fprintf(stderr, "chutney: error: out of memory\n");
    return ctn_cli::kExitFailure;
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "chutney: internal error: %s\n", e.what());
    return ctn_cli::kExitFailure;
  }
}
