// The decode kernels' split of work over threads: the calling thread and the helpers of
// rl/decode_pool.cpp (HS_DECODE_POOL=0: OpenMP's parallel for instead, for comparison).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

extern "C" void hs_parallel_chunks(int64_t chunks, int threads, void (*body)(void*, int64_t), void* context);

// each(i) for every i < n, in `chunks` contiguous ranges claimed one at a time by the calling
// thread and up to OpenMP's thread count - 1 helpers (one thread when not `threaded`).
template <class F>
void parallel_ranges(int64_t n, int64_t chunks, bool threaded, F&& each) {
  const int threads = threaded ? omp_get_max_threads() : 1;
  chunks = threads > 1 ? std::max<int64_t>(1, std::min(n, chunks)) : 1;
  struct Split {
    F* each;
    int64_t n, chunks;
  } split{&each, n, chunks};
  const auto range = [](void* context, int64_t chunk) {
    const Split& s = *static_cast<Split*>(context);
    for (int64_t i = s.n * chunk / s.chunks; i < s.n * (chunk + 1) / s.chunks; ++i) (*s.each)(i);
  };
  const char* pool = std::getenv("HS_DECODE_POOL");
  if (pool && pool[0] == '0') {
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) range(&split, c);
    return;
  }
  hs_parallel_chunks(chunks, threads, range, &split);
}
