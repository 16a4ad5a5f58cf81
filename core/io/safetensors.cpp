// Checkpoints in the safetensors layout (see abi/chutney/checkpoint.h for the format and the
// guarantees). Loading reads the whole file, then validates the header completely before any
// tensor is handed out: every entry's size against its offsets, and the offsets tiling the data
// section exactly, the rules the reference implementation enforces, so a file chutney accepts
// loads there too and vice versa.
#include <chutney/checkpoint.h>

#include "io/io_common.h"
#include "io/json.h"
#include "tensor/tensor.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

using namespace ctn;
using namespace ctn::io;

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit
constexpr const char *kMeta = "__metadata__";

struct DtypeName {
  const char *name;
  uint32_t size;
  int32_t ctn;  // -1: a safetensors dtype chutney has no equivalent for
};

constexpr DtypeName kDtypes[] = {
    {"F32", 4, CTN_F32},  {"F64", 8, CTN_F64},  {"I32", 4, CTN_I32},     {"I64", 8, CTN_I64},
    {"U8", 1, CTN_U8},    {"BOOL", 1, CTN_BOOL}, {"I8", 1, CTN_I8},      {"I16", 2, CTN_I16},
    {"U16", 2, CTN_U16},  {"F16", 2, CTN_F16},   {"BF16", 2, CTN_BF16},  {"U32", 4, CTN_U32},
    {"U64", 8, CTN_U64},  {"F8_E5M2", 1, -1},    {"F8_E4M3", 1, -1},     {"F8_E8M0", 1, -1},
    {"C64", 8, -1},
};

const DtypeName *dtype_by_name(const std::string &s) {
  for (const auto &d : kDtypes)
    if (s == d.name) return &d;
  return nullptr;
}

const char *st_name(int32_t dt) {
  for (const auto &d : kDtypes)
    if (d.ctn == dt) return d.name;
  return nullptr;
}

std::string shape_str(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Element-wise byte order swap, for big-endian hosts (files are little-endian).
void swap_bytes(char *p, size_t bytes, size_t elem) {
  if constexpr (std::endian::native == std::endian::little) {
    (void)p, (void)bytes, (void)elem;
  } else {
    for (size_t i = 0; i + elem <= bytes; i += elem) std::reverse(p + i, p + i + elem);
  }
}

struct Entry {
  std::string name;
  std::string st_dtype;
  uint32_t elem = 0;
  int32_t dtype = -1;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// ------------------------------------------------------------------------------------------
// Saving
// ------------------------------------------------------------------------------------------

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Removes the temporary file unless released (the save reached the rename).
struct TempGuard {
  std::string path;
  bool armed = true;
  ~TempGuard() {
    if (armed && !path.empty()) ::unlink(path.c_str());
  }
};

struct SaveItem {
  const ctn_tensor *t;
  int32_t dtype;
  std::vector<int64_t> shape;
  uint64_t bytes;
};

std::string metadata_object(const char *metadata_json) {
  if (metadata_json == nullptr) return {};
  Json m;
  std::string err;
  if (!json_parse(metadata_json, &m, &err))
    fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: metadata is not valid JSON: %s", err.c_str());
  if (m.kind != Json::Object) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: metadata is not a JSON object");
  for (const auto &kv : m.members)
    if (kv.second.kind != Json::String)
      fail(CTN_ERR_INVALID_ARGUMENT,
           "ctn_checkpoint_save: metadata value of \"%s\" is not a string (safetensors allows only strings)",
           kv.first.c_str());
  std::string out;
  json_write(out, m);
  return out;
}

void save(const char *path, uint32_t n, const char *const *names, const ctn_tensor *const *tensors,
          const char *metadata_json) {
  std::vector<SaveItem> items(n);
  std::unordered_map<std::string, uint32_t> seen;
  for (uint32_t i = 0; i < n; ++i) {
    if (names[i] == nullptr) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: names[%u] is NULL", i);
    if (tensors[i] == nullptr) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: tensors[%u] is NULL", i);
    std::string nm = names[i];
    if (nm.empty() || nm == kMeta || !utf8_valid(nm))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: names[%u] \"%s\" is empty, reserved or not UTF-8", i,
           names[i]);
    if (!seen.emplace(nm, i).second)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: names[%u] \"%s\" repeats names[%u]", i, names[i],
           seen[nm]);
    SaveItem &it = items[i];
    it.t = tensors[i];
    ctn_dtype dt{};
    check(ctn_tensor_dtype(it.t, &dt), "ctn_checkpoint_save: " + nm);
    if (st_name(dt) == nullptr)
      fail(CTN_ERR_DTYPE, "ctn_checkpoint_save: tensor \"%s\" has dtype %d with no safetensors name", names[i], dt);
    it.dtype = dt;
    uint32_t nd = 0;
    int64_t sh[CTN_MAX_DIMS];
    check(ctn_tensor_shape(it.t, &nd, sh), "ctn_checkpoint_save: " + nm);
    it.shape.assign(sh, sh + nd);
    int64_t numel = 0;
    check(ctn_tensor_numel(it.t, &numel), "ctn_checkpoint_save: " + nm);
    it.bytes = static_cast<uint64_t>(numel) * ctn_dtype_size(dt);
  }
  std::string meta = metadata_object(metadata_json);

  // Header: metadata first (as the Python package writes it), then the tensors in the caller's
  // order, packed back to back.
  std::string header = "{";
  if (!meta.empty()) {
    json_quote(header, kMeta);
    header += ':' + meta;
  }
  uint64_t off = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (header.size() > 1) header += ',';
    json_quote(header, names[i]);
    header += ":{\"dtype\":\"";
    header += st_name(items[i].dtype);
    header += "\",\"shape\":[";
    for (size_t d = 0; d < items[i].shape.size(); ++d) header += (d ? "," : "") + std::to_string(items[i].shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + items[i].bytes) + "]}";
    off += items[i].bytes;
  }
  header += '}';
  // Pad with spaces so the data section starts 8-byte aligned (mmap users rely on it).
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeader)
    fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_save: header of %zu bytes exceeds the 100 MB limit", header.size());

  atomic_write("ctn_checkpoint_save", path, [&](int fd, const std::string &tmp) {
    char len[8];
    uint64_t hl = header.size();
    for (int k = 0; k < 8; ++k) len[k] = static_cast<char>((hl >> (8 * k)) & 0xff);
    write_all(fd, len, 8, tmp);
    write_all(fd, header.data(), header.size(), tmp);
    std::vector<char> buf;
    for (const SaveItem &it : items) {
      if (it.bytes == 0) continue;
      int32_t contiguous = 0;
      check(ctn_tensor_is_contiguous(it.t, &contiguous), "ctn_checkpoint_save");
      void *p = nullptr;
      if (contiguous && std::endian::native == std::endian::little) {
        // ctn_tensor_data takes a mutable handle; the data is only read here.
        check(ctn_tensor_data(const_cast<ctn_tensor *>(it.t), &p), "ctn_checkpoint_save");
        write_all(fd, static_cast<const char *>(p), it.bytes, tmp);
      } else {
        buf.resize(it.bytes);
        check(ctn_tensor_read(it.t, buf.data(), buf.size()), "ctn_checkpoint_save");
        swap_bytes(buf.data(), buf.size(), ctn_dtype_size(static_cast<ctn_dtype>(it.dtype)));
        write_all(fd, buf.data(), buf.size(), tmp);
      }
    }
  });
}

}  // namespace

void ctn::io::write_all(int fd, const char *p, size_t n, const std::string &path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(CTN_ERR_IO, "cannot write %s: %s", path.c_str(), std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Writes `path` atomically: `body` writes the content to the temporary file's descriptor.
void ctn::io::atomic_write(const char *fn, const char *path, const std::function<void(int, const std::string &)> &body) {
  const std::string target = path;
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : target.substr(0, slash));
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  if (base.empty()) fail(CTN_ERR_INVALID_ARGUMENT, "%s: \"%s\" names a directory", fn, path);

  TempGuard guard;
  Fd f;
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; f.fd < 0; ++attempt) {
    guard.path = dir + "/." + base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    f.fd = ::open(guard.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0 && (errno != EEXIST || attempt > 100)) {
      int e = errno;
      guard.armed = false;  // nothing was created
      fail(CTN_ERR_IO, "%s: cannot create a temporary file in %s for %s: %s", fn, dir.c_str(), path,
           std::strerror(e));
    }
  }

  body(f.fd, guard.path);
  if (::fsync(f.fd) != 0)
    fail(CTN_ERR_IO, "%s: fsync of %s failed: %s", fn, guard.path.c_str(), std::strerror(errno));
  int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0)
    fail(CTN_ERR_IO, "%s: close of %s failed: %s", fn, guard.path.c_str(), std::strerror(errno));
  if (::rename(guard.path.c_str(), path) != 0)
    fail(CTN_ERR_IO, "%s: cannot rename %s to %s: %s", fn, guard.path.c_str(), path,
         std::strerror(errno));
  guard.armed = false;
  // Make the rename itself durable. Some file systems cannot fsync a directory (EINVAL): the
  // data is safe then, only the rename might not survive a crash, which those systems accept.
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0)
    fail(CTN_ERR_IO, "%s: %s was written but its directory %s cannot be opened to sync: %s", fn, path,
         dir.c_str(), std::strerror(errno));
  if (::fsync(d.fd) != 0 && errno != EINVAL && errno != EROFS)
    fail(CTN_ERR_IO, "%s: %s was written but fsync of directory %s failed: %s", fn, path, dir.c_str(),
         std::strerror(errno));
}

// ------------------------------------------------------------------------------------------
// Loading
// ------------------------------------------------------------------------------------------

struct ctn_checkpoint {
  std::string path;
  std::vector<char> file;  // the whole file; data section at data_start
  size_t data_start = 0;
  std::vector<Entry> entries;  // header order
  std::unordered_map<std::string, size_t> index;
  std::string metadata = "{}";
  std::vector<std::pair<std::string, std::string>> meta_kv;

  const Entry &find(const char *name, const char *fn) const {
    auto it = index.find(name);
    if (it == index.end())
      fail(CTN_ERR_INVALID_ARGUMENT, "%s: %s has no tensor named \"%s\"", fn, path.c_str(), name);
    return entries[it->second];
  }
  void supported(const Entry &e, const char *fn) const {
    if (e.dtype < 0)
      fail(CTN_ERR_UNSUPPORTED, "%s: %s: tensor \"%s\" has dtype %s, which chutney does not support", fn,
           path.c_str(), e.name.c_str(), e.st_dtype.c_str());
  }
};

namespace {

[[noreturn]] void corrupt(const std::string &path, const std::string &why) {
  throw Error(CTN_ERR_CORRUPT, path + ": " + why);
}

Entry parse_entry(const std::string &path, const std::string &name, const Json &v, uint64_t data_len) {
  Entry e;
  e.name = name;
  auto bad = [&](const std::string &why) { corrupt(path, "tensor \"" + name + "\": " + why); };
  if (v.kind != Json::Object) bad("header entry is not an object");
  const Json *dt = v.find("dtype");
  const Json *sh = v.find("shape");
  const Json *of = v.find("data_offsets");
  if (!dt || !sh || !of) bad("header entry lacks dtype, shape or data_offsets");
  if (v.members.size() != 3) bad("header entry has keys other than dtype, shape and data_offsets");
  if (dt->kind != Json::String) bad("dtype is not a string");
  const DtypeName *d = dtype_by_name(dt->text);
  if (!d) bad("unknown dtype \"" + dt->text + "\"");
  e.st_dtype = d->name;
  e.elem = d->size;
  e.dtype = d->ctn;
  if (sh->kind != Json::Array) bad("shape is not an array");
  if (sh->items.size() > 64) bad("shape has " + std::to_string(sh->items.size()) + " dimensions");
  uint64_t bytes = e.elem;
  bool overflow = false;  // the product exceeds 2^64: it cannot match any offsets
  for (const Json &x : sh->items) {
    uint64_t dim = 0;
    if (!x.as_index(&dim)) bad("shape holds \"" + x.text + "\", not a non-negative integer");
    e.shape.push_back(static_cast<int64_t>(dim));
    if (dim == 0) overflow = false;
    if (__builtin_mul_overflow(bytes, dim, &bytes)) overflow = true;
  }
  if (overflow) bytes = UINT64_MAX;
  if (of->kind != Json::Array || of->items.size() != 2) bad("data_offsets is not a pair [begin, end]");
  if (!of->items[0].as_index(&e.begin) || !of->items[1].as_index(&e.end))
    bad("data_offsets are not non-negative integers");
  if (e.begin > e.end) bad("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] are reversed");
  if (e.end > data_len)
    bad("data_offsets end " + std::to_string(e.end) + " is beyond the data section of " + std::to_string(data_len) +
        " bytes (truncated file?)");
  if (e.end - e.begin != bytes)
    bad("shape " + shape_str(e.shape) + " of " + e.st_dtype + " needs " +
        (overflow ? std::string("more than 2^64 bytes") : std::to_string(bytes) + " bytes") +
        " but data_offsets span " + std::to_string(e.end - e.begin));
  return e;
}

std::unique_ptr<ctn_checkpoint> load(const char *path) {
  auto c = std::make_unique<ctn_checkpoint>();
  c->path = path;
  Fd f;
  // Non-blocking open: a FIFO would block a plain open until a writer came; it is refused below
  // like a directory or a device.
  f.fd = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) fail(CTN_ERR_IO, "cannot open checkpoint %s: %s", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(CTN_ERR_IO, "cannot stat %s: %s", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(CTN_ERR_IO, "%s is not a regular file", path);
  if (::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK) != 0)
    fail(CTN_ERR_IO, "cannot read %s: %s", path, std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) corrupt(path, "file of " + std::to_string(size) + " bytes is shorter than the 8-byte header length");
  // Check the header length before reading everything: a random file is rejected cheaply.
  unsigned char len[8];
  if (::pread(f.fd, len, 8, 0) != 8) fail(CTN_ERR_IO, "cannot read %s: %s", path, std::strerror(errno));
  uint64_t hl = 0;
  for (int k = 7; k >= 0; --k) hl = (hl << 8) | len[k];
  if (hl > kMaxHeader) corrupt(path, "header length " + std::to_string(hl) + " exceeds the 100 MB limit");
  if (hl > size - 8)
    corrupt(path, "header length " + std::to_string(hl) + " is beyond the end of the file (" + std::to_string(size - 8) +
                      " bytes follow the length)");
  c->file.resize(checked_buffer_bytes(size, (std::string("checkpoint ") + path).c_str()));
  size_t done = 0;
  while (done < size) {
    ssize_t r = ::pread(f.fd, c->file.data() + done, size - done, static_cast<off_t>(done));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(CTN_ERR_IO, "cannot read %s: %s", path, std::strerror(errno));
    }
    if (r == 0) corrupt(path, "file shrank while being read");
    done += static_cast<size_t>(r);
  }
  c->data_start = 8 + hl;
  const uint64_t data_len = size - c->data_start;
  std::string_view text(c->file.data() + 8, hl);
  if (text.empty() || text[0] != '{') corrupt(path, "header does not start with '{'");
  Json h;
  std::string err;
  if (!json_parse(text, &h, &err)) corrupt(path, "invalid JSON header: " + err);
  if (h.kind != Json::Object) corrupt(path, "header is not a JSON object");
  for (const auto &kv : h.members) {
    if (kv.first == kMeta) {
      if (kv.second.kind != Json::Object) corrupt(path, "__metadata__ is not an object");
      for (const auto &m : kv.second.members) {
        if (m.second.kind != Json::String) corrupt(path, "__metadata__ value of \"" + m.first + "\" is not a string");
        c->meta_kv.emplace_back(m.first, m.second.text);
      }
      c->metadata.clear();
      json_write(c->metadata, kv.second);
      continue;
    }
    c->index.emplace(kv.first, c->entries.size());  // keys are unique: the parser rejects repeats
    c->entries.push_back(parse_entry(path, kv.first, kv.second, data_len));
  }
  // The tensors must tile [0, data_len) exactly.
  std::vector<const Entry *> byoff;
  for (const auto &e : c->entries) byoff.push_back(&e);
  std::sort(byoff.begin(), byoff.end(), [](const Entry *a, const Entry *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const Entry *prev = nullptr;
  for (const Entry *e : byoff) {
    if (e->begin < at)
      corrupt(path, "tensors \"" + prev->name + "\" [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) +
                        ") and \"" + e->name + "\" [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                        ") overlap");
    if (e->begin > at)
      corrupt(path, "gap in the data section: bytes [" + std::to_string(at) + ", " + std::to_string(e->begin) +
                        ") belong to no tensor");
    at = e->end;
    prev = e;
  }
  if (at != data_len)
    corrupt(path, "the data section has " + std::to_string(data_len) + " bytes but the tensors cover " +
                      std::to_string(at));
  return c;
}

}  // namespace

namespace {
using TensorPtr = std::unique_ptr<ctn_tensor, void (*)(ctn_tensor *)>;

TensorPtr read_var(ctn_plan *plan, ctn_node node, const char *name, const char *fn) {
  ctn_tensor *t = nullptr;
  check(ctn_plan_variable_read(plan, node, &t), format("%s: variable \"%s\" (node %u)", fn, name, node));
  return TensorPtr(t, ctn_tensor_release);
}

std::string describe(const ctn_tensor *t, ctn_dtype *dt, std::vector<int64_t> *shape) {
  uint32_t nd = 0;
  int64_t sh[CTN_MAX_DIMS];
  check(ctn_tensor_dtype(t, dt), "");
  check(ctn_tensor_shape(t, &nd, sh), "");
  shape->assign(sh, sh + nd);
  return std::string(ctn_dtype_name(*dt)) + " " + shape_str(*shape);
}

// The argument checks of ctn_plan_save_variables and ctn_plan_load_variables (ctn_io_fn: which).
void need_plan_variables(const char *ctn_io_fn, ctn_plan *plan, uint32_t n, const char *const *names,
                         const ctn_node *nodes, const char *path) {
  CTN_IO_NEED(plan);
  CTN_IO_NEED(path);
  if (n > 0) {
    CTN_IO_NEED(names);
    CTN_IO_NEED(nodes);
  }
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_checkpoint_save(const char *path, uint32_t n, const char *const *names,
                                       const ctn_tensor *const *tensors, const char *metadata_json) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(path);
    if (n > 0) {
      CTN_IO_NEED(names);
      CTN_IO_NEED(tensors);
    }
    save(path, n, names, tensors, metadata_json);
  });
}

CTN_API ctn_status ctn_checkpoint_load(const char *path, ctn_checkpoint **out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(path);
    CTN_IO_NEED(out);
    *out = load(path).release();
  });
}

CTN_API void ctn_checkpoint_release(ctn_checkpoint *ckpt) { delete ckpt; }

CTN_API ctn_status ctn_checkpoint_count(const ctn_checkpoint *ckpt, uint32_t *out_count) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ckpt);
    CTN_IO_NEED(out_count);
    *out_count = static_cast<uint32_t>(ckpt->entries.size());
  });
}

CTN_API ctn_status ctn_checkpoint_name(const ctn_checkpoint *ckpt, uint32_t index, const char **out_name) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ckpt);
    CTN_IO_NEED(out_name);
    if (index >= ckpt->entries.size())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_checkpoint_name: index %u >= count %zu", index, ckpt->entries.size());
    *out_name = ckpt->entries[index].name.c_str();
  });
}

CTN_API ctn_status ctn_checkpoint_info(const ctn_checkpoint *ckpt, const char *name, ctn_dtype *out_dtype,
                                       uint32_t *out_ndim, int64_t *out_shape) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ckpt);
    CTN_IO_NEED(name);
    const Entry &e = ckpt->find(name, ctn_io_fn);
    ckpt->supported(e, ctn_io_fn);
    if (out_dtype) *out_dtype = static_cast<ctn_dtype>(e.dtype);
    if (out_ndim) *out_ndim = static_cast<uint32_t>(e.shape.size());
    if (out_shape) std::copy(e.shape.begin(), e.shape.end(), out_shape);
  });
}

CTN_API ctn_status ctn_checkpoint_get(const ctn_checkpoint *ckpt, const char *name, ctn_tensor **out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ckpt);
    CTN_IO_NEED(name);
    CTN_IO_NEED(out);
    const Entry &e = ckpt->find(name, ctn_io_fn);
    ckpt->supported(e, ctn_io_fn);
    if (e.shape.size() > CTN_MAX_DIMS)
      fail(CTN_ERR_SHAPE, "ctn_checkpoint_get: %s: tensor \"%s\" has %zu dimensions (chutney allows %d)",
           ckpt->path.c_str(), name, e.shape.size(), CTN_MAX_DIMS);
    ctn_tensor *t = nullptr;
    check(ctn_tensor_create(static_cast<ctn_dtype>(e.dtype), static_cast<uint32_t>(e.shape.size()), e.shape.data(),
                            nullptr, &t),
          "ctn_checkpoint_get");
    std::unique_ptr<ctn_tensor, void (*)(ctn_tensor *)> owned(t, ctn_tensor_release);
    const size_t bytes = e.end - e.begin;
    if (bytes > 0) {
      void *p = nullptr;
      check(ctn_tensor_data(t, &p), "ctn_checkpoint_get");
      auto *dst = static_cast<char *>(p);
      std::memcpy(dst, ckpt->file.data() + ckpt->data_start + e.begin, bytes);
      swap_bytes(dst, bytes, e.elem);
      if (e.dtype == CTN_BOOL)  // chutney's bool is exactly 0 or 1
        for (size_t k = 0; k < bytes; ++k) dst[k] = dst[k] != 0;
    }
    *out = owned.release();
  });
}

CTN_API ctn_status ctn_checkpoint_metadata(const ctn_checkpoint *ckpt, const char **out_json) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ckpt);
    CTN_IO_NEED(out_json);
    *out_json = ckpt->metadata.c_str();
  });
}

CTN_API ctn_status ctn_checkpoint_metadata_get(const ctn_checkpoint *ckpt, const char *key, const char **out_value) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ckpt);
    CTN_IO_NEED(key);
    CTN_IO_NEED(out_value);
    const char *v = nullptr;
    for (const auto &kv : ckpt->meta_kv)
      if (kv.first == key) v = kv.second.c_str();
    *out_value = v;
  });
}

// ------------------------------------------------------------------------------------------
// Plans
// ------------------------------------------------------------------------------------------


CTN_API ctn_status ctn_plan_save_variables(ctn_plan *plan, uint32_t n, const char *const *names,
                                           const ctn_node *nodes, const char *path, const char *metadata_json) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    need_plan_variables(ctn_io_fn, plan, n, names, nodes, path);
    std::vector<TensorPtr> owned;
    std::vector<const ctn_tensor *> ts;
    for (uint32_t i = 0; i < n; ++i) {
      if (names[i] == nullptr) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_save_variables: names[%u] is NULL", i);
      owned.push_back(read_var(plan, nodes[i], names[i], "ctn_plan_save_variables"));
      ts.push_back(owned.back().get());
    }
    save(path, n, names, ts.data(), metadata_json);
  });
}

CTN_API ctn_status ctn_plan_load_variables(ctn_plan *plan, uint32_t n, const char *const *names,
                                           const ctn_node *nodes, const char *path) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    need_plan_variables(ctn_io_fn, plan, n, names, nodes, path);
    auto ck = load(path);
    std::vector<TensorPtr> values;
    for (uint32_t i = 0; i < n; ++i) {
      if (names[i] == nullptr) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_load_variables: names[%u] is NULL", i);
      auto it = ck->index.find(names[i]);
      if (it == ck->index.end())
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_load_variables: %s has no tensor named \"%s\"", path, names[i]);
      const Entry &e = ck->entries[it->second];
      ck->supported(e, "ctn_plan_load_variables");
      TensorPtr cur = read_var(plan, nodes[i], names[i], "ctn_plan_load_variables");
      ctn_dtype vdt{};
      std::vector<int64_t> vshape;
      std::string vdesc = describe(cur.get(), &vdt, &vshape);
      std::string fdesc = std::string(ctn_dtype_name(static_cast<ctn_dtype>(e.dtype))) + " " + shape_str(e.shape);
      if (vdt != e.dtype)
        fail(CTN_ERR_DTYPE, "ctn_plan_load_variables: %s: tensor \"%s\" is %s but the variable (node %u) is %s", path,
             names[i], fdesc.c_str(), nodes[i], vdesc.c_str());
      if (vshape != e.shape)
        fail(CTN_ERR_SHAPE, "ctn_plan_load_variables: %s: tensor \"%s\" is %s but the variable (node %u) is %s", path,
             names[i], fdesc.c_str(), nodes[i], vdesc.c_str());
      ctn_tensor *t = nullptr;
      check(ctn_checkpoint_get(ck.get(), names[i], &t), "ctn_plan_load_variables");
      values.emplace_back(t, ctn_tensor_release);
    }
    for (uint32_t i = 0; i < n; ++i)
      check(ctn_plan_variable_write(plan, nodes[i], values[i].get()),
            format("ctn_plan_load_variables: variable \"%s\" (node %u)", names[i], nodes[i]));
  });
}

}  // extern "C"
