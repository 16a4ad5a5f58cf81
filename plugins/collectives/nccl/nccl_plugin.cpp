// ctn-nccl.so: the collective plugin over NCCL (collective.h). libnccl.so.2 and the CUDA runtime
// are dlopen-ed like the CUDA backend's libraries (backends/cuda/libs.cpp), so the plugin loads
// everywhere and reports "unavailable: <why>" where there is no NCCL, driver or GPU.
//
// Buffers are host memory (CTN_COLLECTIVE_HOST_MEMORY): each collective copies through a device
// scratch buffer (cudaMemcpy in, ncclAllReduce / ncclBroadcast on one stream, cudaMemcpy out).
// Collectives on device-resident gradients without the host copies are future work
// (docs/DISTRIBUTED.md). Rendezvous: "file:PATH" (rank 0 writes the unique id to PATH
// atomically, the others wait for it); rank and size default to mpirun's environment.
#include <chutney/collective.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "../collective_plugin.h"

namespace {

const ctn_host_api *g_host = nullptr;

// The NCCL and CUDA runtime entry points this plugin uses, resolved by dlsym.
struct Api {
  void *nccl = nullptr, *cudart = nullptr;
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::cudaGetDeviceCount) GetDeviceCount = nullptr;
  decltype(&::cudaSetDevice) SetDevice = nullptr;
  cudaError_t (*Malloc)(void **, size_t) = nullptr;
  decltype(&::cudaFree) Free = nullptr;
  decltype(&::cudaMemcpy) Memcpy = nullptr;
  decltype(&::cudaStreamCreate) StreamCreate = nullptr;
  decltype(&::cudaStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cudaStreamQuery) StreamQuery = nullptr;
  decltype(&::cudaGetErrorString) GetCudaErrorString = nullptr;
};
Api g_api;
int g_devices = 0;

void *open_first(const char *const *names, std::string *why) {
  for (const char *const *n = names; *n; ++n) {
    if (void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL)) return h;
    const char *e = dlerror();
    *why += (why->empty() ? "" : "; ") + std::string(e ? e : *n);
  }
  return nullptr;
}

bool load(std::string *why) {
  if (g_api.nccl) return true;
  static const char *const nccl[] = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", nullptr};
  static const char *const cudart[] = {"libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so.13",
                                       "/usr/local/cuda/lib64/libcudart.so.12", nullptr};
  Api a;
  if (!(a.nccl = open_first(nccl, why))) return false;
  if (!(a.cudart = open_first(cudart, why))) {
    dlclose(a.nccl);
    return false;
  }
  bool ok = true;
  auto sym = [&](void *lib, const char *name, auto *slot) {
    void *p = dlsym(lib, name);
    if (!p && ok) {
      *why = std::string("missing symbol ") + name;
      ok = false;
    }
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(p);
  };
  sym(a.nccl, "ncclGetVersion", &a.GetVersion);
  sym(a.nccl, "ncclGetUniqueId", &a.GetUniqueId);
  sym(a.nccl, "ncclCommInitRank", &a.CommInitRank);
  sym(a.nccl, "ncclCommDestroy", &a.CommDestroy);
  sym(a.nccl, "ncclCommAbort", &a.CommAbort);
  sym(a.nccl, "ncclCommGetAsyncError", &a.CommGetAsyncError);
  sym(a.nccl, "ncclAllReduce", &a.AllReduce);
  sym(a.nccl, "ncclBroadcast", &a.Broadcast);
  sym(a.nccl, "ncclGetErrorString", &a.GetErrorString);
  sym(a.cudart, "cudaGetDeviceCount", &a.GetDeviceCount);
  sym(a.cudart, "cudaSetDevice", &a.SetDevice);
  sym(a.cudart, "cudaMalloc", &a.Malloc);
  sym(a.cudart, "cudaFree", &a.Free);
  sym(a.cudart, "cudaMemcpy", &a.Memcpy);
  sym(a.cudart, "cudaStreamCreate", &a.StreamCreate);
  sym(a.cudart, "cudaStreamDestroy", &a.StreamDestroy);
  sym(a.cudart, "cudaStreamQuery", &a.StreamQuery);
  sym(a.cudart, "cudaGetErrorString", &a.GetCudaErrorString);
  if (!ok) {
    dlclose(a.cudart);
    dlclose(a.nccl);
    return false;
  }
  g_api = a;
  return true;
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Comm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void *scratch = nullptr;
  uint64_t scratch_bytes = 0;
  int rank = 0, size = 1;
  double timeout_s = 60;
  std::string description, error;
};

CTN_COLLECTIVE_FAIL(Comm)

int env_int(const char *name, int fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

ctn_status probe(const ctn_host_api *host) {
  g_host = host;
  std::string why;
  if (!load(&why)) return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: %s", why.c_str());
  int n = 0;
  cudaError_t e = g_api.GetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: no CUDA device (cudaGetDeviceCount: %s)",
                           e == cudaSuccess ? "0 devices" : g_api.GetCudaErrorString(e));
  g_devices = n;
  return CTN_OK;
}

ctn_status scratch(Comm *c, uint64_t bytes) {
  if (bytes <= c->scratch_bytes) return CTN_OK;
  if (c->scratch) g_api.Free(c->scratch);
  c->scratch = nullptr;
  c->scratch_bytes = 0;
  if (cudaError_t e = g_api.Malloc(&c->scratch, bytes); e != cudaSuccess)
    return fail(c, CTN_ERR_OUT_OF_MEMORY, "nccl: cudaMalloc(%llu): %s", static_cast<unsigned long long>(bytes), g_api.GetCudaErrorString(e));
  c->scratch_bytes = bytes;
  return CTN_OK;
}

// Waits for the stream, watching NCCL's asynchronous errors and the timeout.
ctn_status finish(Comm *c, const char *what) {
  const double deadline = now_s() + c->timeout_s;
  for (;;) {
    cudaError_t e = g_api.StreamQuery(c->stream);
    if (e == cudaSuccess) return CTN_OK;
    if (e != cudaErrorNotReady) return fail(c, CTN_ERR_IO, "nccl: %s: %s", what, g_api.GetCudaErrorString(e));
    ncclResult_t async = ncclSuccess;
    g_api.CommGetAsyncError(c->comm, &async);
    if (async != ncclSuccess) return fail(c, CTN_ERR_IO, "nccl: rank %d: %s: %s", c->rank, what, g_api.GetErrorString(async));
    if (now_s() > deadline)
      return fail(c, CTN_ERR_IO, "nccl: rank %d: %s did not complete within %g s: another rank is not responding", c->rank, what,
                  c->timeout_s);
    timespec ts{0, 20000};
    nanosleep(&ts, nullptr);
  }
}

ctn_status init(const ctn_host_api *host, const ctn_collective_config *cfg, void **out) {
  g_host = host;
  if (!cfg || !out) return host->set_error(CTN_ERR_INVALID_ARGUMENT, "nccl: init: NULL argument");
  if (ctn_status s = probe(host); s != CTN_OK) return s;
  auto *c = new (std::nothrow) Comm;
  if (!c) return host->set_error(CTN_ERR_OUT_OF_MEMORY, "nccl: out of memory");
  c->rank = cfg->rank >= 0 ? cfg->rank : env_int("OMPI_COMM_WORLD_RANK", 0);
  c->size = cfg->world_size >= 1 ? cfg->world_size : env_int("OMPI_COMM_WORLD_SIZE", 1);
  c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 60.0;
  auto bail = [&](ctn_status s) {
    if (c->stream) g_api.StreamDestroy(c->stream);
    delete c;
    return s;
  };
  if (c->rank < 0 || c->rank >= c->size)
    return bail(host->set_error(CTN_ERR_INVALID_ARGUMENT, "nccl: rank %d outside 0..%d", c->rank, c->size - 1));
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", c->rank);
  if (cudaError_t e = g_api.SetDevice(local % g_devices); e != cudaSuccess)
    return bail(host->set_error(CTN_ERR_UNAVAILABLE, "nccl: cudaSetDevice(%d): %s", local % g_devices, g_api.GetCudaErrorString(e)));
  ncclUniqueId id{};
  std::string rendezvous_file;
  if (c->size > 1) {
    const char *rv = cfg->rendezvous;
    if (!rv || std::strncmp(rv, "file:", 5) != 0)
      return bail(host->set_error(CTN_ERR_INVALID_ARGUMENT, "nccl: %d ranks need a rendezvous \"file:PATH\" on a file system all ranks share",
                                  c->size));
    std::string path = rv + 5;
    rendezvous_file = path;
    if (c->rank == 0) {
      if (ncclResult_t r = g_api.GetUniqueId(&id); r != ncclSuccess)
        return bail(host->set_error(CTN_ERR_IO, "nccl: ncclGetUniqueId: %s", g_api.GetErrorString(r)));
      std::string tmp = path + ".tmp";
      std::FILE *f = std::fopen(tmp.c_str(), "wb");
      bool ok = f && std::fwrite(&id, sizeof id, 1, f) == 1;
      if (f) ok = std::fclose(f) == 0 && ok;
      if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
        return bail(host->set_error(CTN_ERR_IO, "nccl: cannot write the rendezvous file %s", path.c_str()));
    } else {
      const double deadline = now_s() + c->timeout_s;
      for (;;) {
        std::FILE *f = std::fopen(path.c_str(), "rb");
        bool ok = f && std::fread(&id, sizeof id, 1, f) == 1;
        if (f) std::fclose(f);
        if (ok) break;
        if (now_s() > deadline)
          return bail(host->set_error(CTN_ERR_IO, "nccl: rank %d: rank 0 did not write %s within %g s", c->rank, path.c_str(), c->timeout_s));
        usleep(20000);
      }
    }
  } else if (ncclResult_t r = g_api.GetUniqueId(&id); r != ncclSuccess) {
    return bail(host->set_error(CTN_ERR_IO, "nccl: ncclGetUniqueId: %s", g_api.GetErrorString(r)));
  }
  if (cudaError_t e = g_api.StreamCreate(&c->stream); e != cudaSuccess)
    return bail(host->set_error(CTN_ERR_IO, "nccl: cudaStreamCreate: %s", g_api.GetCudaErrorString(e)));
  if (ncclResult_t r = g_api.CommInitRank(&c->comm, c->size, id, c->rank); r != ncclSuccess)
    return bail(host->set_error(CTN_ERR_IO, "nccl: ncclCommInitRank(rank %d of %d): %s", c->rank, c->size, g_api.GetErrorString(r)));
  // Every rank has joined, so every rank has read the id: a later job must not find it.
  if (c->rank == 0 && !rendezvous_file.empty()) unlink(rendezvous_file.c_str());
  int v = 0;
  g_api.GetVersion(&v);
  c->description = "NCCL " + std::to_string(v) + ", rank " + std::to_string(c->rank) + " of " + std::to_string(c->size) +
                   " on CUDA device " + std::to_string(local % g_devices) + ", host buffers staged through the device";
  *out = c;
  return CTN_OK;
}

void shutdown(void *state) {
  auto *c = static_cast<Comm *>(state);
  if (c->comm) g_api.CommDestroy(c->comm);
  if (c->scratch) g_api.Free(c->scratch);
  if (c->stream) g_api.StreamDestroy(c->stream);
  delete c;
}

CTN_COLLECTIVE_ACCESSORS(Comm)

ctn_status allreduce(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op) {
  auto *c = static_cast<Comm *>(state);
  ncclDataType_t t;
  uint64_t esz;
  switch (dtype) {
    case CTN_F32: t = ncclFloat32; esz = 4; break;
    case CTN_F64: t = ncclFloat64; esz = 8; break;
    case CTN_I32: t = ncclInt32; esz = 4; break;
    case CTN_I64: t = ncclInt64; esz = 8; break;
    default: return fail(c, CTN_ERR_DTYPE, "nccl: allreduce supports f32, f64, i32, i64 (dtype %d)", static_cast<int>(dtype));
  }
  if (op != CTN_REDUCE_SUM && op != CTN_REDUCE_MEAN) return fail(c, CTN_ERR_INVALID_ARGUMENT, "nccl: unknown reduction %u", op);
  if (count == 0) return CTN_OK;
  const uint64_t bytes = count * esz;
  if (ctn_status s = scratch(c, bytes); s != CTN_OK) return s;
  if (cudaError_t e = g_api.Memcpy(c->scratch, buf, bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
    return fail(c, CTN_ERR_IO, "nccl: cudaMemcpy: %s", g_api.GetCudaErrorString(e));
  if (ncclResult_t r = g_api.AllReduce(c->scratch, c->scratch, count, t, op == CTN_REDUCE_MEAN ? ncclAvg : ncclSum, c->comm, c->stream);
      r != ncclSuccess)
    return fail(c, CTN_ERR_IO, "nccl: ncclAllReduce: %s", g_api.GetErrorString(r));
  if (ctn_status s = finish(c, "allreduce"); s != CTN_OK) return s;
  if (cudaError_t e = g_api.Memcpy(buf, c->scratch, bytes, cudaMemcpyDeviceToHost); e != cudaSuccess)
    return fail(c, CTN_ERR_IO, "nccl: cudaMemcpy: %s", g_api.GetCudaErrorString(e));
  return CTN_OK;
}

ctn_status broadcast(void *state, void *buf, uint64_t bytes, int32_t root) {
  auto *c = static_cast<Comm *>(state);
  if (root < 0 || root >= c->size) return fail(c, CTN_ERR_INVALID_ARGUMENT, "nccl: broadcast root %d outside 0..%d", root, c->size - 1);
  if (bytes == 0) return CTN_OK;
  if (ctn_status s = scratch(c, bytes); s != CTN_OK) return s;
  if (cudaError_t e = g_api.Memcpy(c->scratch, buf, bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
    return fail(c, CTN_ERR_IO, "nccl: cudaMemcpy: %s", g_api.GetCudaErrorString(e));
  if (ncclResult_t r = g_api.Broadcast(c->scratch, c->scratch, bytes, ncclUint8, root, c->comm, c->stream); r != ncclSuccess)
    return fail(c, CTN_ERR_IO, "nccl: ncclBroadcast: %s", g_api.GetErrorString(r));
  if (ctn_status s = finish(c, "broadcast"); s != CTN_OK) return s;
  if (cudaError_t e = g_api.Memcpy(buf, c->scratch, bytes, cudaMemcpyDeviceToHost); e != cudaSuccess)
    return fail(c, CTN_ERR_IO, "nccl: cudaMemcpy: %s", g_api.GetCudaErrorString(e));
  return CTN_OK;
}

ctn_status barrier(void *state) {
  int32_t one = 1;
  return allreduce(state, &one, 1, CTN_I32, CTN_REDUCE_SUM);
}

void abort_job(void *state, int32_t code, const char *why) {
  auto *c = static_cast<Comm *>(state);
  std::fprintf(stderr, "chutney: rank %d aborts the job: %s\n", c ? c->rank : -1, why ? why : "");
  std::fflush(stderr);
  if (c && c->comm) g_api.CommAbort(c->comm);
  // Without MPI there is no job to end but this process; mpirun ends the others when it exits.
  std::_Exit(code ? code : 1);
}


}  // namespace

CTN_COLLECTIVE_PLUGIN("nccl", CTN_COLLECTIVE_HOST_MEMORY)
