// The checkpoint directory of `chutney train` (ckpt_dir.h).
#include "ckpt_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <tuple>
#include <utility>

namespace ctn_cli {
namespace {

struct CheckpointDeleter {
  void operator()(ctn_checkpoint *p) const { ctn_checkpoint_release(p); }
};

std::string parent_of(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string new_run_id() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

namespace {

// What checkpoint_run_id read, by path, valid while the file's inode, size and modification time
// are unchanged (a save renames a new file over the old one): retention asks about the same files at every epoch, and reading a run id loads the
// whole checkpoint (the C API has no metadata-only read).
struct RunIdCache {
  std::mutex mu;
  std::map<std::string, std::tuple<ino_t, off_t, int64_t, std::string>> by_path;  // inode, size, mtime ns, id
};
RunIdCache &run_id_cache() {
  static RunIdCache c;
  return c;
}

std::string read_run_id(const std::string &path);

}  // namespace

std::string checkpoint_run_id(const std::string &path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  RunIdCache &c = run_id_cache();
  {
    std::lock_guard<std::mutex> lk(c.mu);
    auto it = c.by_path.find(path);
    if (it != c.by_path.end() && it->second == std::make_tuple(st.st_ino, st.st_size, mtime, std::get<3>(it->second)))
      return std::get<3>(it->second);
  }
  std::string id = read_run_id(path);
  std::lock_guard<std::mutex> lk(c.mu);
  c.by_path[path] = {st.st_ino, st.st_size, mtime, id};
  return id;
}

namespace {

std::string read_run_id(const std::string &path) {
  ctn_checkpoint *raw = nullptr;
  if (ctn_checkpoint_load(path.c_str(), &raw) != CTN_OK) return "";
  std::unique_ptr<ctn_checkpoint, CheckpointDeleter> ck(raw);
  const char *format = nullptr, *id = nullptr;
  if (ctn_checkpoint_metadata_get(ck.get(), "format", &format) != CTN_OK || format == nullptr ||
      std::strcmp(format, "chutney-train-1") != 0)
    return "";
  if (ctn_checkpoint_metadata_get(ck.get(), "run_id", &id) != CTN_OK || id == nullptr) return "";
  return id;
}

}  // namespace

std::string epoch_checkpoint_path(const std::string &dir, const std::string &model, int64_t epoch) {
  char file[64];
  std::snprintf(file, sizeof file, "-epoch%03lld.safetensors", static_cast<long long>(epoch));
  return dir + "/" + model + file;
}

void prepare_checkpoint_dir(const std::string &dir) {
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw Failure("cannot create --checkpoint-dir " + dir + ": " + std::strerror(errno));
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0)
    throw Failure("--checkpoint-dir " + dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) throw Failure("--checkpoint-dir " + dir + " exists and is not a directory");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw Failure("--checkpoint-dir " + dir + " is not writable: " + std::strerror(errno));
}

void ensure_replaceable(const std::string &path, const std::string &run_id) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return;  // nothing there
  const std::string owner = S_ISREG(st.st_mode) ? checkpoint_run_id(path) : "";
  if (!owner.empty() && owner == run_id) return;  // an earlier epoch of this run
  const char *what = !S_ISREG(st.st_mode) ? "something that is not a regular file"
                     : owner.empty()      ? "a file that is not a checkpoint of this run"
                                          : "a checkpoint of another training run";
  throw Failure("--checkpoint-dir: " + path + " already exists (" + what +
                ") and this run would replace it; nothing was written. Use another --checkpoint-dir, move "
                "the file away, or continue that run with --resume");
}

void check_output_file(const std::string &flag, const std::string &path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Failure("--" + flag + " " + path + " is a directory, not a file");
    if (access(path.c_str(), W_OK) != 0)
      throw Failure("--" + flag + " " + path + " cannot be written: " + std::strerror(errno));
    return;
  }
  const std::string dir = parent_of(path);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Failure("--" + flag + " " + path + ": the folder " + dir + " does not exist (or is not a folder)");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw Failure("--" + flag + " " + path + ": the folder " + dir + " is not writable: " + std::strerror(errno));
}

void remove_stale_temporaries(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent *e = readdir(d)) {
    const std::string name = e->d_name;
    const size_t at = name.rfind(".tmp-");
    if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at == 0) continue;
    // ".tmp-PID-N": both numbers, nothing else.
    const std::string tail = name.substr(at + 5);
    const size_t dash = tail.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == tail.size() ||
        tail.find_first_not_of("0123456789-") != std::string::npos || tail.find('-', dash + 1) != std::string::npos)
      continue;
    const long pid = std::strtol(tail.substr(0, dash).c_str(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(getpid())) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    stale.push_back(dir + "/" + name);
  }
  closedir(d);
  for (const std::string &p : stale) {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (unlink(p.c_str()) == 0)
      std::fprintf(stderr, "removed %s (left by a checkpoint writer that no longer runs)\n", p.c_str());
  }
}

void apply_retention(const std::string &dir, const std::string &model, int64_t keep, int64_t best_epoch,
                     const std::string &run_id, const std::string &just_written) {
  if (keep <= 0 || run_id.empty()) return;
  DIR *d = opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = model + "-epoch", suffix = ".safetensors";
  std::vector<std::pair<int64_t, std::string>> found;  // this run's epoch checkpoints
  while (dirent *e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string num = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::strtoll(num.c_str(), nullptr, 10), dir + "/" + name);
  }
  closedir(d);
  // Whose a file is, is read from the file itself: a name alone says nothing about the writer.
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const auto &f) {
                               struct stat st {};
                               return lstat(f.second.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
                                      checkpoint_run_id(f.second) != run_id;
                             }),
              found.end());
  std::sort(found.begin(), found.end());
  const size_t n = found.size(), keep_from = n > static_cast<size_t>(keep) ? n - static_cast<size_t>(keep) : 0;
  for (size_t i = 0; i < keep_from; ++i) {
    if (found[i].first == best_epoch || found[i].second == just_written) continue;
    if (unlink(found[i].second.c_str()) != 0)
      std::fprintf(stderr, "warning: cannot remove old checkpoint %s: %s\n", found[i].second.c_str(),
                   std::strerror(errno));
    else
      std::printf("removed checkpoint %s (--keep-last %lld: an older epoch of this run)\n", found[i].second.c_str(),
                  static_cast<long long>(keep));
  }
}

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::start(ctn_plan *plan, const std::vector<std::string> &names, const std::vector<ctn_node> &nodes,
                             const std::string &path, const std::string &metadata_json) {
  finish();
  // The snapshot, on this thread: training may update the variables as soon as start returns.
  auto values = std::make_shared<std::vector<TensorPtr>>();
  for (size_t i = 0; i < nodes.size(); ++i) {
    ctn_tensor *t = nullptr;
    check(ctn_plan_variable_read(plan, nodes[i], &t), ("saving the checkpoint: reading " + names[i]).c_str());
    values->emplace_back(t);
  }
  path_ = path;
  error_.clear();
  pending_ = true;
  thread_ = std::thread([this, values, names, metadata_json] {
    std::vector<const char *> name_ptrs;
    std::vector<const ctn_tensor *> ts;
    for (size_t i = 0; i < names.size(); ++i) {
      name_ptrs.push_back(names[i].c_str());
      ts.push_back((*values)[i].get());
    }
    if (ctn_checkpoint_save(path_.c_str(), static_cast<uint32_t>(ts.size()), name_ptrs.data(), ts.data(),
                            metadata_json.c_str()) != CTN_OK) {
      const char *e = ctn_last_error();
      error_ = e ? e : "unknown error";
    }
  });
}

std::string CheckpointWriter::finish() {
  if (!pending_) return "";
  thread_.join();
  pending_ = false;
  if (!error_.empty()) throw Failure("saving the checkpoint " + path_ + ": " + error_);
  return path_;
}

}  // namespace ctn_cli
