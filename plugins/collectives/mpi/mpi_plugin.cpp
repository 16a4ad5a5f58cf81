// ctn-mpi.so: the collective plugin over Open MPI (collective.h). Host memory only.
//
// Every collective is non-blocking underneath (MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier) and
// polled against the communicator's timeout, so a rank that hangs is reported instead of
// hanging the job. To name the missing ranks, each collective is announced: every rank sends its
// collective number to rank 0 and rank 0 sends its own to everyone (2(N-1) 8-byte messages on a
// duplicate communicator), so on a timeout rank 0 lists the ranks that never arrived and the
// others say whether rank 0 did. A rank can also stop after announcing (SIGSTOP, a debugger, a
// swapped-out VM) and block the collective from inside: while waiting, every rank sends a
// heartbeat every 0.1 s on the same duplicate communicator (to rank 0; rank 0 to everyone), so a
// timeout also names the ranks that arrived but have shown no sign of life for a while. A rank
// killed outright is mpirun's to notice: Open MPI 4.1 has
// no fault-tolerant MPI, so mpirun ends the job and names the rank (docs/DISTRIBUTED.md).
#include <chutney/collective.h>

#include <mpi.h>

#include <dlfcn.h>

#include <ctime>
#include <sched.h>
#include <time.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "../collective_plugin.h"

namespace {

const ctn_host_api *g_host = nullptr;
constexpr int kTagArrive = 7301;
constexpr int kTagBeat = 7302;
constexpr double kBeatInterval = 0.1;  // seconds between heartbeats while waiting
constexpr double kStaleAfter = 1.0;    // no heartbeat for this long while waiting: not responding
const int64_t kBeat = 0;               // the heartbeat's payload (never written: Isend reads it)
constexpr double kYieldFor = 0.01;     // seconds a wait yields the core before it sleeps between polls

constexpr uint64_t kShmBytes = 32ull << 20;  // each rank's shared-memory allreduce ring (CHUTNEY_MPI_SHM_BYTES)

// An allreduce started by allreduce_start and not yet waited (collective.h, since 1.7).
struct Pending {
  uint64_t ticket = 0;
  int64_t seq = 0;  // its collective number (announce)
  MPI_Request req = MPI_REQUEST_NULL;  // the MPI path
  int64_t shm_k = 0;                   // the shared-memory path: its number there (> 0), and
  uint64_t shm_off = 0;                // where every rank's copy lies in its ring
  bool done = false;
  void *buf = nullptr;
  uint64_t count = 0;
  ctn_dtype dtype = CTN_F32;
  uint32_t op = CTN_REDUCE_SUM;
};

// The shared-memory allreduce of ranks on one host. Every rank has a segment of an MPI shared
// window: two counters, each on its own cache line, and a ring of kShmBytes. Allreduce number k
// (the same sequence on every rank) copies this rank's buffer into its ring at an offset that
// depends only on the sizes (so it is the same on every rank) and publishes k; completing it
// waits until every rank has published k, sums the N copies in rank order into the buffer (the
// same bytes on every rank), and sets `completed` to k. Allreduces complete in start order, so
// each counter is monotonic. A rank reuses ring bytes only once every rank has completed the
// allreduce that held them. One handshake per allreduce, and none of it needs MPI's progress:
// a start made during backward is done by the peers whenever they publish.
struct ShmHeader {
  alignas(64) int64_t published;
  alignas(64) int64_t completed;
};
struct Shm {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
  std::vector<ShmHeader *> head;  // per rank
  std::vector<char *> ring;       // per rank
  uint64_t bytes = 0;             // of each ring
  uint64_t next = 0;              // where the next allreduce goes in the ring
  int64_t k = 0;                  // shared-memory allreduces started
  struct Region {
    int64_t k;
    uint64_t off, bytes;
  };
  std::deque<Region> used;  // ring bytes the ranks may still read, oldest first
};

struct Comm {
  MPI_Comm world = MPI_COMM_NULL;   // collectives
  MPI_Comm notes = MPI_COMM_NULL;   // arrival announcements
  int rank = 0, size = 1;
  double timeout_s = 60;
  bool we_initialised = false;
  int64_t seq = 0;                  // collectives started by this rank
  std::vector<int64_t> arrived;     // rank 0: last collective each rank announced; others: [0] = rank 0's
  std::vector<int64_t> inbox;       // receive buffers of the posted announcements
  std::vector<MPI_Request> recvs;
  std::vector<int64_t> beat_inbox;  // heartbeats: same peers as `arrived`
  std::vector<MPI_Request> beat_recvs;
  std::vector<double> last_seen;    // when each peer last showed a sign of life (note or heartbeat)
  double last_beat_sent = 0;
  std::deque<Pending> pending;      // started allreduces, oldest first
  Shm shm;                          // ranks all on one host: shm.win != MPI_WIN_NULL
  uint64_t tickets = 0;             // tickets handed out
  std::string description, error;
};

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

CTN_COLLECTIVE_FAIL(Comm)

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}

// The peer a slot of `arrived`/`last_seen` stands for: on rank 0 every rank, elsewhere rank 0.
int peer_of(const Comm *c, size_t i) { return c->rank == 0 ? static_cast<int>(i) : 0; }

// Takes in every announcement and heartbeat that has arrived and reposts the receives.
void drain_notes(Comm *c) {
  const double t = now_s();
  for (size_t i = 0; i < c->recvs.size(); ++i) {
    while (c->recvs[i] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&c->recvs[i], &done, MPI_STATUS_IGNORE);
      if (!done) break;
      if (c->inbox[i] > c->arrived[i]) c->arrived[i] = c->inbox[i];
      c->last_seen[i] = t;
      MPI_Irecv(&c->inbox[i], 1, MPI_INT64_T, peer_of(c, i), kTagArrive, c->notes, &c->recvs[i]);
    }
    while (c->beat_recvs[i] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&c->beat_recvs[i], &done, MPI_STATUS_IGNORE);
      if (!done) break;
      c->last_seen[i] = t;
      MPI_Irecv(&c->beat_inbox[i], 1, MPI_INT64_T, peer_of(c, i), kTagBeat, c->notes, &c->beat_recvs[i]);
    }
  }
}

// Sends `what` (a tag) to rank 0, or from rank 0 to every other rank, without waiting.
void post_to_peers(Comm *c, const int64_t *what, int tag) {
  for (int r = c->rank == 0 ? 1 : 0; r < (c->rank == 0 ? c->size : 1); ++r) {
    MPI_Request q;
    MPI_Isend(what, 1, MPI_INT64_T, r, tag, c->notes, &q);
    MPI_Request_free(&q);
  }
}

void heartbeat(Comm *c) {
  const double t = now_s();
  if (c->size == 1 || t - c->last_beat_sent < kBeatInterval) return;
  c->last_beat_sent = t;
  post_to_peers(c, &kBeat, kTagBeat);
}

void announce(Comm *c) {
  ++c->seq;
  if (c->size == 1) return;
  if (c->rank == 0) c->arrived[0] = c->seq;
  post_to_peers(c, &c->seq, kTagArrive);
}

// Why peer slot `i` is holding up collective #seq, or "" when it is not known to be.
std::string holdup(const Comm *c, size_t i, double t, int64_t seq_) {
  const long long seq = static_cast<long long>(seq_), at = static_cast<long long>(c->arrived[i]);
  if (at < seq) return std::to_string(peer_of(c, i)) + " (last at collective #" + std::to_string(at) + ")";
  if (t - c->last_seen[i] > kStaleAfter)
    return std::to_string(peer_of(c, i)) + " (arrived at collective #" + std::to_string(seq) + " but no sign of life for " +
           std::to_string(static_cast<int>(t - c->last_seen[i] + 0.5)) + " s: stopped or hung)";
  return "";
}

// Polls `req` (collective #seq) until it completes or the timeout passes; names the missing
// ranks on a timeout. Spins first, then yields the core (a peer or another job sharing it runs,
// and the poll comes back at once when nothing else wants the core), and only after kYieldFor
// sleeps between polls: a sleep costs a timer tick or more, far longer than a shared-memory
// transfer step, and slept between the many progress steps of a large allreduce it made a
// 2 MB allreduce take tens of milliseconds.
// `poll(done)` returns an MPI status and sets done once the wait is over.
template <class Poll>
ctn_status wait_for(Comm *c, Poll poll, const char *what, int64_t seq) {
  const double start = now_s(), deadline = start + c->timeout_s;
  for (long spins = 0;; ++spins) {
    bool done = false;
    int rc = poll(done);
    if (rc != MPI_SUCCESS) return fail(c, CTN_ERR_IO, "mpi: %s #%lld failed: %s", what, static_cast<long long>(seq), mpi_error(rc).c_str());
    if (done) return CTN_OK;
    if (spins > 2000) {
      // Oversubscribed ranks share cores: let the others run instead of spinning.
      if (now_s() - start > kYieldFor) {
        timespec ts{0, 50000};
        nanosleep(&ts, nullptr);
      } else {
        sched_yield();
      }
      if ((spins & 63) == 0) {
        drain_notes(c);
        heartbeat(c);
        if (now_s() > deadline) break;
      }
    }
  }
  drain_notes(c);
  const double t = now_s();
  std::string missing;
  for (size_t i = c->rank == 0 ? 1 : 0; i < c->arrived.size(); ++i)
    if (std::string why = holdup(c, i, t, seq); !why.empty()) missing += (missing.empty() ? "" : ", ") + why;
  if (missing.empty())
    missing = c->rank == 0 ? "none known (every rank arrived and is alive; the transport itself is stuck)"
                           : "see rank 0's message (rank 0 arrived and is alive)";
  return fail(c, CTN_ERR_IO, "mpi: rank %d: %s #%lld did not complete within %g s: rank(s) not responding: %s", c->rank,
              what, static_cast<long long>(seq), c->timeout_s, missing.c_str());
}

ctn_status wait(Comm *c, MPI_Request *req, const char *what, int64_t seq) {
  return wait_for(c, [&](bool &done) {
    int flag = 0;
    int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    done = flag != 0;
    return rc;
  }, what, seq);
}

MPI_Datatype mpi_type(ctn_dtype dt) {
  switch (dt) {
    case CTN_F32: return MPI_FLOAT;
    case CTN_F64: return MPI_DOUBLE;
    case CTN_I32: return MPI_INT32_T;
    case CTN_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

template <class T>
void divide(void *buf, uint64_t n, int size) {
  T *p = static_cast<T *>(buf);
  const T d = static_cast<T>(size);
  for (uint64_t i = 0; i < n; ++i) p[i] /= d;
}

// --- the shared-memory allreduce (Shm) ---

// Every rank on this host: a window of a header and a ring per rank. Collective (init).
void shm_setup(Comm *c) {
  Shm &m = c->shm;
  MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &m.node);
  int on_host = 0;
  MPI_Comm_size(m.node, &on_host);
  // The ring size: every rank must use the same (the offsets are computed, not sent).
  unsigned long long want = kShmBytes, low = 0, high = 0;
  if (const char *e = std::getenv("CHUTNEY_MPI_SHM_BYTES"); e && *e) {
    char *end = nullptr;
    want = std::strtoull(e, &end, 10);
    if (*end) want = kShmBytes;
  }
  MPI_Allreduce(&want, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, c->world);
  MPI_Allreduce(&want, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, c->world);
  if (on_host != c->size || c->size < 2 || low != high || low == 0) {  // the same answer on every rank
    MPI_Comm_free(&m.node);
    return;
  }
  m.bytes = (low + 63) & ~63ull;
  char *base = nullptr;
  MPI_Comm_set_errhandler(m.node, MPI_ERRORS_RETURN);
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(sizeof(ShmHeader) + m.bytes), 64, MPI_INFO_NULL, m.node,
                                         &base, &m.win);
  // Every rank must take the same path: without a window everywhere, nobody uses one (a window
  // some rank lacks is left to MPI_Finalize; freeing it is collective).
  int ok = rc == MPI_SUCCESS ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->world);
  if (!all_ok) {
    const std::string why = "no shared-memory window on some rank (here: " + (ok ? std::string("allocated") : mpi_error(rc)) +
                            "); allreduce goes through Open MPI";
    g_host->log(CTN_LOG_WARN, "mpi", why.c_str());
    m.win = MPI_WIN_NULL;
    return;
  }
  m.head.resize(static_cast<size_t>(c->size));
  m.ring.resize(static_cast<size_t>(c->size));
  for (int q = 0; q < c->size; ++q) {
    MPI_Aint bytes = 0;
    int unit = 0;
    char *seg = nullptr;
    MPI_Win_shared_query(m.win, q, &bytes, &unit, &seg);
    m.head[static_cast<size_t>(q)] = reinterpret_cast<ShmHeader *>(seg);
    m.ring[static_cast<size_t>(q)] = seg + sizeof(ShmHeader);
  }
  __atomic_store_n(&m.head[static_cast<size_t>(c->rank)]->published, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&m.head[static_cast<size_t>(c->rank)]->completed, 0, __ATOMIC_RELEASE);
  MPI_Barrier(m.node);  // every counter is zero before anyone reads one
}

void shm_release(Comm *c) {
  if (c->shm.win != MPI_WIN_NULL) MPI_Win_free(&c->shm.win);
  if (c->shm.node != MPI_COMM_NULL) MPI_Comm_free(&c->shm.node);
}

// The lowest of the ranks' counters (`published` or `completed`).
int64_t shm_lowest(const Comm *c, int64_t ShmHeader::*counter) {
  int64_t low = INT64_MAX;
  for (ShmHeader *h : c->shm.head) low = std::min(low, __atomic_load_n(&(h->*counter), __ATOMIC_ACQUIRE));
  return low;
}

// out = t_0 + t_1 + ... + t_{N-1} in rank order, t_q rank q's copy. This rank's term is read
// from `out` itself in the first pass (its ring copy holds the same bytes for the later ones),
// which saves copying rank 0's term first.
template <class T>
void shm_sum(const Comm *c, const Pending &p) {
  T *out = static_cast<T *>(p.buf);
  const size_t me = static_cast<size_t>(c->rank), n = c->shm.ring.size();  // n >= 2
  auto term = [&](size_t q) { return reinterpret_cast<const T *>(c->shm.ring[q] + p.shm_off); };
  const T *a = me == 0 ? out : term(0), *b = me == 1 ? out : term(1);
  for (uint64_t i = 0; i < p.count; ++i) out[i] = a[i] + b[i];
  for (size_t q = 2; q < n; ++q) {
    const T *t = term(q);
    for (uint64_t i = 0; i < p.count; ++i) out[i] += t[i];
  }
}

// Completes `p` (its sum, not the mean's division): every rank's copy, or MPI's request.
ctn_status complete(Comm *c, Pending &p) {
  if (p.done) return CTN_OK;
  if (!p.shm_k) {
    if (ctn_status s = wait(c, &p.req, "allreduce", p.seq); s != CTN_OK) return s;
    p.done = true;
    return CTN_OK;
  }
  auto all_published = [&](bool &done) {
    done = shm_lowest(c, &ShmHeader::published) >= p.shm_k;
    return MPI_SUCCESS;
  };
  if (ctn_status s = wait_for(c, all_published, "allreduce", p.seq); s != CTN_OK) return s;
  switch (p.dtype) {
    case CTN_F32: shm_sum<float>(c, p); break;
    case CTN_F64: shm_sum<double>(c, p); break;
    case CTN_I32: shm_sum<int32_t>(c, p); break;
    default: shm_sum<int64_t>(c, p); break;
  }
  __atomic_store_n(&c->shm.head[static_cast<size_t>(c->rank)]->completed, p.shm_k, __ATOMIC_RELEASE);
  p.done = true;
  return CTN_OK;
}

// Completes every pending allreduce up to and including ticket `upto`, oldest first.
ctn_status complete_upto(Comm *c, uint64_t upto) {
  for (Pending &p : c->pending) {
    if (p.ticket > upto) break;
    if (ctn_status s = complete(c, p); s != CTN_OK) return s;
  }
  return CTN_OK;
}

// A place in the ring for `bytes`, once no rank may still read what was there: frees what every
// rank has completed; when that is not enough, completes this rank's pending allreduces (the
// other ranks have published them: every rank starts the same ones in the same order) and
// waits for the others to complete theirs.
ctn_status shm_place(Comm *c, uint64_t bytes, uint64_t *out_off) {
  Shm &m = c->shm;
  // With nothing pending (a new step: the same on every rank, which make the same calls), start
  // the ring over: each step reuses the same, cache-warm bytes instead of sweeping the ring.
  if (c->pending.empty()) m.next = 0;
  uint64_t off = (m.next + 63) & ~uint64_t{63};
  if (off + bytes > m.bytes) off = 0;
  for (;;) {
    const int64_t done = shm_lowest(c, &ShmHeader::completed);
    while (!m.used.empty() && m.used.front().k <= done) m.used.pop_front();
    int64_t blocker = 0;
    for (const Shm::Region &r : m.used)
      if (r.off < off + bytes && off < r.off + r.bytes) blocker = std::max(blocker, r.k);
    if (!blocker) break;
    if (!c->pending.empty())
      if (ctn_status s = complete_upto(c, c->pending.back().ticket); s != CTN_OK) return s;
    auto freed = [&](bool &ok) {
      ok = shm_lowest(c, &ShmHeader::completed) >= blocker;
      return MPI_SUCCESS;
    };
    if (ctn_status s = wait_for(c, freed, "allreduce", c->seq); s != CTN_OK) return s;
  }
  m.next = off + bytes;
  *out_off = off;
  return CTN_OK;
}

// Starts `p` on the shared-memory path: this rank's copy into its ring, then published.
ctn_status shm_start(Comm *c, Pending &p, uint64_t bytes) {
  Shm &m = c->shm;
  if (ctn_status s = shm_place(c, bytes, &p.shm_off); s != CTN_OK) return s;
  p.shm_k = ++m.k;
  m.used.push_back(Shm::Region{p.shm_k, p.shm_off, bytes});
  std::memcpy(m.ring[static_cast<size_t>(c->rank)] + p.shm_off, p.buf, bytes);
  __atomic_store_n(&m.head[static_cast<size_t>(c->rank)]->published, p.shm_k, __ATOMIC_RELEASE);
  return CTN_OK;
}

ctn_status probe(const ctn_host_api *host) {
  g_host = host;
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  if (major < 3) return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: MPI %d.%d lacks non-blocking collectives (needs 3.0)", major, minor);
  return CTN_OK;
}

ctn_status init(const ctn_host_api *host, const ctn_collective_config *cfg, void **out) {
  g_host = host;
  if (!cfg || !out) return host->set_error(CTN_ERR_INVALID_ARGUMENT, "mpi: init: NULL argument");
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) return host->set_error(CTN_ERR_STATE, "mpi: MPI was finalized in this process; it cannot start again");
  // Open MPI's components (dlopen-ed by libmpi) need libmpi's symbols in the global scope; the
  // host loads plugins RTLD_LOCAL, so promote the copy this plugin already pulled in.
  dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  auto *c = new (std::nothrow) Comm;
  if (!c) return host->set_error(CTN_ERR_OUT_OF_MEMORY, "mpi: out of memory");
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
      delete c;
      return host->set_error(CTN_ERR_IO, "mpi: MPI_Init_thread failed: %s", mpi_error(rc).c_str());
    }
    c->we_initialised = true;
  }
  // Errors come back as codes (reported with the rank) instead of aborting inside MPI.
  MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
  MPI_Comm_dup(MPI_COMM_WORLD, &c->notes);
  MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(c->notes, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->world, &c->rank);
  MPI_Comm_size(c->world, &c->size);
  auto bad = [&](const char *fmt, int a, int b) {
    ctn_status s = host->set_error(CTN_ERR_INVALID_ARGUMENT, fmt, a, b);
    MPI_Comm_free(&c->world);
    MPI_Comm_free(&c->notes);
    if (c->we_initialised) MPI_Finalize();
    delete c;
    return s;
  };
  if (cfg->rank >= 0 && cfg->rank != c->rank)
    return bad("mpi: the configuration asks for rank %d, mpirun made this process rank %d", cfg->rank, c->rank);
  if (cfg->world_size >= 1 && cfg->world_size != c->size)
    return bad("mpi: the configuration asks for %d ranks, mpirun started %d", cfg->world_size, c->size);
  c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 60.0;
  const size_t peers = c->rank == 0 ? static_cast<size_t>(c->size) : 1;
  c->arrived.assign(peers, 0);
  c->inbox.assign(peers, 0);
  c->recvs.assign(peers, MPI_REQUEST_NULL);
  c->beat_inbox.assign(peers, 0);
  c->beat_recvs.assign(peers, MPI_REQUEST_NULL);
  c->last_seen.assign(peers, now_s());
  for (size_t i = c->rank == 0 ? 1 : 0; c->size > 1 && i < peers; ++i) {
    MPI_Irecv(&c->inbox[i], 1, MPI_INT64_T, peer_of(c, i), kTagArrive, c->notes, &c->recvs[i]);
    MPI_Irecv(&c->beat_inbox[i], 1, MPI_INT64_T, peer_of(c, i), kTagBeat, c->notes, &c->beat_recvs[i]);
  }
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string l(lib, static_cast<size_t>(len));
  if (size_t nl = l.find_first_of(",\n"); nl != std::string::npos) l.resize(nl);
  shm_setup(c);
  c->description = l + ", rank " + std::to_string(c->rank) + " of " + std::to_string(c->size) + ", timeout " +
                   std::to_string(static_cast<int>(c->timeout_s)) + " s" +
                   (c->shm.win != MPI_WIN_NULL ? ", allreduce over shared memory" : "");
  *out = c;
  return CTN_OK;
}

void shutdown(void *state) {
  auto *c = static_cast<Comm *>(state);
  shm_release(c);
  for (auto *reqs : {&c->recvs, &c->beat_recvs})
    for (MPI_Request &r : *reqs)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
  MPI_Comm_free(&c->notes);
  MPI_Comm_free(&c->world);
  if (c->we_initialised) MPI_Finalize();
  delete c;
}

CTN_COLLECTIVE_ACCESSORS(Comm)

// allreduce_start (collective.h, since 1.7): the checks, the announcement and MPI_Iallreduce;
// the request joins c->pending. Polls the oldest pending one once: a start made while backward
// runs moves the earlier buckets along (Open MPI progresses non-blocking collectives only inside
// MPI calls, and any MPI_Test progresses them all).
ctn_status allreduce_start(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op, uint64_t *out_ticket) {
  auto *c = static_cast<Comm *>(state);
  MPI_Datatype t = mpi_type(dtype);
  if (!out_ticket) return fail(c, CTN_ERR_INVALID_ARGUMENT, "mpi: allreduce_start: out_ticket is NULL");
  if (t == MPI_DATATYPE_NULL) return fail(c, CTN_ERR_DTYPE, "mpi: allreduce supports f32, f64, i32, i64 (dtype %d)", static_cast<int>(dtype));
  if (op != CTN_REDUCE_SUM && op != CTN_REDUCE_MEAN) return fail(c, CTN_ERR_INVALID_ARGUMENT, "mpi: unknown reduction %u", op);
  if (count > static_cast<uint64_t>(INT32_MAX)) return fail(c, CTN_ERR_INVALID_ARGUMENT, "mpi: %llu elements in one allreduce (at most 2^31-1)", static_cast<unsigned long long>(count));
  Pending p;
  p.buf = buf;
  p.count = count;
  p.dtype = dtype;
  p.op = op;
  p.done = c->size == 1 || count == 0;
  const uint64_t bytes = count * static_cast<uint64_t>(dtype == CTN_F64 || dtype == CTN_I64 ? 8 : 4);
  if (!p.done && c->shm.win != MPI_WIN_NULL && bytes <= c->shm.bytes) {
    if (ctn_status s = shm_start(c, p, bytes); s != CTN_OK) return s;
  } else if (!p.done) {
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), t, MPI_SUM, c->world, &p.req);
    if (rc != MPI_SUCCESS) return fail(c, CTN_ERR_IO, "mpi: MPI_Iallreduce: %s", mpi_error(rc).c_str());
  }
  announce(c);
  p.seq = c->seq;
  p.ticket = ++c->tickets;
  c->pending.push_back(p);
  Pending &first = c->pending.front();
  if (!first.done && !first.shm_k) {
    int done = 0;
    MPI_Test(&first.req, &done, MPI_STATUS_IGNORE);
    first.done = done != 0;
  }
  *out_ticket = p.ticket;
  return CTN_OK;
}

// allreduce_wait (since 1.7): the pending allreduce `ticket`, in any order.
ctn_status allreduce_wait(void *state, uint64_t ticket) {
  auto *c = static_cast<Comm *>(state);
  auto it = c->pending.begin();
  while (it != c->pending.end() && it->ticket != ticket) ++it;
  if (it == c->pending.end())
    return fail(c, CTN_ERR_STATE, "mpi: allreduce_wait: ticket %llu is not a pending allreduce (%zu pending)",
                static_cast<unsigned long long>(ticket), c->pending.size());
  // In start order: the shared-memory ring is freed oldest first.
  if (ctn_status s = complete_upto(c, ticket); s != CTN_OK) return s;
  Pending p = *it;
  c->pending.erase(it);
  if (p.op == CTN_REDUCE_MEAN && c->size > 1) {
    switch (p.dtype) {
      case CTN_F32: divide<float>(p.buf, p.count, c->size); break;
      case CTN_F64: divide<double>(p.buf, p.count, c->size); break;
      case CTN_I32: divide<int32_t>(p.buf, p.count, c->size); break;
      default: divide<int64_t>(p.buf, p.count, c->size); break;
    }
  }
  return CTN_OK;
}

// Fails a blocking collective while started allreduces are still pending (collective.h).
ctn_status check_idle(Comm *c, const char *what) {
  if (c->pending.empty()) return CTN_OK;
  return fail(c, CTN_ERR_STATE, "mpi: %s while %zu started allreduce(s) are not waited", what, c->pending.size());
}

ctn_status allreduce(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op) {
  auto *c = static_cast<Comm *>(state);
  if (ctn_status s = check_idle(c, "allreduce"); s != CTN_OK) return s;
  uint64_t ticket = 0;
  if (ctn_status s = allreduce_start(state, buf, count, dtype, op, &ticket); s != CTN_OK) return s;
  return allreduce_wait(state, ticket);
}

ctn_status broadcast(void *state, void *buf, uint64_t bytes, int32_t root) {
  auto *c = static_cast<Comm *>(state);
  if (root < 0 || root >= c->size) return fail(c, CTN_ERR_INVALID_ARGUMENT, "mpi: broadcast root %d outside 0..%d", root, c->size - 1);
  if (bytes > static_cast<uint64_t>(INT32_MAX)) return fail(c, CTN_ERR_INVALID_ARGUMENT, "mpi: broadcast of %llu bytes (at most 2^31-1)", static_cast<unsigned long long>(bytes));
  if (ctn_status s = check_idle(c, "broadcast"); s != CTN_OK) return s;
  announce(c);
  if (c->size == 1 || bytes == 0) return CTN_OK;
  MPI_Request req;
  int rc = MPI_Ibcast(buf, static_cast<int>(bytes), MPI_BYTE, root, c->world, &req);
  if (rc != MPI_SUCCESS) return fail(c, CTN_ERR_IO, "mpi: MPI_Ibcast: %s", mpi_error(rc).c_str());
  return wait(c, &req, "broadcast", c->seq);
}

ctn_status barrier(void *state) {
  auto *c = static_cast<Comm *>(state);
  if (ctn_status s = check_idle(c, "barrier"); s != CTN_OK) return s;
  announce(c);
  if (c->size == 1) return CTN_OK;
  MPI_Request req;
  int rc = MPI_Ibarrier(c->world, &req);
  if (rc != MPI_SUCCESS) return fail(c, CTN_ERR_IO, "mpi: MPI_Ibarrier: %s", mpi_error(rc).c_str());
  return wait(c, &req, "barrier", c->seq);
}

void abort_job(void *state, int32_t code, const char *why) {
  auto *c = static_cast<Comm *>(state);
  std::fprintf(stderr, "chutney: rank %d aborts the job: %s\n", c ? c->rank : -1, why ? why : "");
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
  std::_Exit(code ? code : 1);  // MPI_Abort does not return; in case it does
}


}  // namespace

CTN_COLLECTIVE_PLUGIN_ASYNC("mpi", CTN_COLLECTIVE_HOST_MEMORY, allreduce_start, allreduce_wait)
