// Replays fuzz corpora through a libFuzzer target without libFuzzer (any compiler): every file
// named on the command line, or inside a directory named there, is passed to
// LLVMFuzzerTestOneInput once. Exits non-zero when no input was found (an empty corpus must not
// pass silently). A crash is the test's failure. `--max-rss-mb N` (before the paths) also fails
// the replay when its peak resident set passed N MiB: the corpus must replay on a small machine
// (`meson test` sets MALLOC_PERTURB_, so whatever an input allocates is touched).
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {
void collect(const std::string &path, std::vector<std::string> &out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    out.push_back(path);
    return;
  }
  if (DIR *d = ::opendir(path.c_str())) {
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.') collect(path + "/" + e->d_name, out);
    ::closedir(d);
  }
}
}  // namespace

int main(int argc, char **argv) {
  std::vector<std::string> files;
  long max_rss_mb = 0;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--max-rss-mb") == 0) {
    max_rss_mb = std::strtol(argv[2], nullptr, 10);
    first = 3;
  }
  for (int i = first; i < argc; ++i) collect(argv[i], files);
  for (const std::string &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const long rss_mb = ru.ru_maxrss / 1024;  // Linux: kilobytes
  std::printf("replayed %zu inputs, peak resident set %ld MiB\n", files.size(), rss_mb);
  if (max_rss_mb > 0 && rss_mb > max_rss_mb) {
    std::printf("FAILED: the peak resident set passed --max-rss-mb %ld\n", max_rss_mb);
    return 1;
  }
  return files.empty() ? 1 : 0;
}
