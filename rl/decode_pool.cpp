// Helper threads for the decode kernels, in place of OpenMP's parallel regions.
//
// A decode step calls the kernels a few hundred times, each for tens to hundreds of microseconds.
// Under OpenMP every call wakes the sleeping second thread (the `hs` processes set
// OMP_WAIT_POLICY=PASSIVE so that a thread never spins while a busy neighbour holds its core) and
// waits for it at a barrier; on an idle machine that costs a third of decode speed
// (benchmarks/omp_wait.py). Here a call splits its work into chunks that the calling thread and
// the helpers claim one by one from a shared counter: the caller starts at once, never waits for
// a helper that has not started (it does the unclaimed chunks itself), and waits only for the
// chunks a helper is running. Helpers spin for a short while after their last chunk, so the next
// call of the same step finds them awake, then sleep on a futex until the next call.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using Body = void (*)(void* context, int64_t chunk);

constexpr auto kSpin = std::chrono::microseconds(200);  // how long an idle helper keeps polling
constexpr int kMaxHelpers = 63;

inline void relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// The call being shared. `claim` packs the call's number (24 bits), its number of chunks (20 bits)
// and the next unclaimed chunk (20 bits) in one word, so a claim is checked against the call and
// the count it belongs to at once: a helper that read an older (or a half-written newer) call's body
// can never claim a chunk with it, since a call's fields are rewritten only after all its chunks
// were claimed and run.
constexpr int kCountBits = 20;
constexpr uint64_t kCountMask = (uint64_t(1) << kCountBits) - 1;
constexpr uint64_t kCallMask = (uint64_t(1) << 24) - 1;

inline uint64_t claim_word(uint32_t call, int64_t chunks) {
  return (uint64_t(call) & kCallMask) << (2 * kCountBits) | uint64_t(chunks) << kCountBits;
}

struct Shared {
  std::atomic<uint64_t> claim{0};
  std::atomic<uint32_t> call{0};  // what sleeping helpers wait on
  std::atomic<Body> body{nullptr};
  std::atomic<void*> context{nullptr};
  std::atomic<int> helpers_wanted{0};
  std::atomic<int64_t> finished{0};  // chunks done in this call, by anyone
  std::atomic<int> sleeping{0};
};

Shared shared;
std::mutex caller;   // one call shared at a time; a second concurrent caller runs its chunks alone
std::mutex growing;  // starting helper threads
std::atomic<int> started{0};
std::atomic<pid_t> owner{0};  // the process the helpers were started in (none survive a fork)

bool claim_one(uint32_t call, int64_t* chunk) {
  uint64_t seen = shared.claim.load(std::memory_order_acquire);
  for (;;) {
    const int64_t next = int64_t(seen & kCountMask), chunks = int64_t((seen >> kCountBits) & kCountMask);
    if ((seen >> (2 * kCountBits)) != (uint64_t(call) & kCallMask) || next >= chunks) return false;
    if (shared.claim.compare_exchange_weak(seen, seen + 1, std::memory_order_acq_rel)) {
      *chunk = next;
      return true;
    }
  }
}

void helper(int index) {
  uint32_t seen = shared.call.load(std::memory_order_acquire);
  for (;;) {
    const auto idle_since = std::chrono::steady_clock::now();
    uint32_t now = shared.call.load(std::memory_order_acquire);
    while (now == seen) {
      if (std::chrono::steady_clock::now() - idle_since > kSpin) {
        shared.sleeping.fetch_add(1, std::memory_order_seq_cst);
        shared.call.wait(seen, std::memory_order_seq_cst);
        shared.sleeping.fetch_sub(1, std::memory_order_seq_cst);
      } else {
        relax();
      }
      now = shared.call.load(std::memory_order_acquire);
    }
    seen = now;
    if (index >= shared.helpers_wanted.load(std::memory_order_relaxed)) continue;
    const Body body = shared.body.load(std::memory_order_acquire);
    void* const context = shared.context.load(std::memory_order_acquire);
    int64_t chunk;
    while (claim_one(now, &chunk)) {  // a successful claim proves body and context are this call's
      body(context, chunk);
      shared.finished.fetch_add(1, std::memory_order_acq_rel);
    }
  }
}

void ensure_helpers(int wanted) {
  const pid_t self = getpid();
  if (owner.load(std::memory_order_acquire) == self && started.load(std::memory_order_acquire) >= wanted) return;
  std::lock_guard<std::mutex> lock(growing);
  if (owner.load() != self) {  // first use, or a forked child: its parent's helpers do not exist here
    started.store(0);
    owner.store(self, std::memory_order_release);
  }
  for (int i = started.load(); i < wanted; ++i) {
    std::thread(helper, i).detach();
    started.store(i + 1, std::memory_order_release);
  }
}

}  // namespace

// Runs body(context, c) for every chunk c < chunks, on the calling thread and up to threads - 1
// helpers; returns when all have run.
extern "C" void hs_parallel_chunks(int64_t chunks, int threads, Body body, void* context) {
  const int helpers = std::min(std::max(threads - 1, 0), kMaxHelpers);
  std::unique_lock<std::mutex> lock(caller, std::try_to_lock);
  if (helpers == 0 || chunks <= 1 || chunks > int64_t(kCountMask) || !lock.owns_lock()) {
    for (int64_t c = 0; c < chunks; ++c) body(context, c);
    return;
  }
  ensure_helpers(helpers);
  const uint32_t call = shared.call.load(std::memory_order_relaxed) + 1;
  shared.body.store(body, std::memory_order_relaxed);
  shared.context.store(context, std::memory_order_relaxed);
  shared.helpers_wanted.store(helpers, std::memory_order_relaxed);
  shared.finished.store(0, std::memory_order_relaxed);
  shared.claim.store(claim_word(call, chunks), std::memory_order_release);
  shared.call.store(call, std::memory_order_seq_cst);
  if (shared.sleeping.load(std::memory_order_seq_cst) > 0) shared.call.notify_all();
  int64_t chunk, mine = 0;
  while (claim_one(call, &chunk)) {
    body(context, chunk);
    ++mine;
  }
  shared.finished.fetch_add(mine, std::memory_order_acq_rel);
  for (int spins = 0; shared.finished.load(std::memory_order_acquire) < chunks; ++spins) {
    if (spins < 4096) {  // only chunks a helper is running; a helper descheduled mid-chunk gets the core
      relax();
    } else {
      std::this_thread::yield();
    }
  }
}
