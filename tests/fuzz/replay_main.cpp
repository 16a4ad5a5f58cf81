// Replays fuzz corpora through a libFuzzer target without libFuzzer (any compiler): every file
// named on the command line, or inside a directory named there, is passed to
// LLVMFuzzerTestOneInput once. Exits non-zero when no input was found (an empty corpus must not
// pass silently). A crash is the test's failure.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
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
  for (int i = 1; i < argc; ++i) collect(argv[i], files);
  for (const std::string &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return files.empty() ? 1 : 0;
}
