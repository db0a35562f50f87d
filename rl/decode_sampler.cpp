// One decode step's sampler on CPU (rl/decode_kernel.py builds it with decode_attention.cpp).
// Per row of logits [rows, vocab] it draws one token from softmax(logits / temperature)
// restricted to the top-p nucleus, by inverse CDF on that row's uniform, and gives the token's
// log-prob under softmax(logits / temperature), before top-p: the draw of rl/decode.py's torch
// sampler, in a few vector passes over the row (non-finite check, maximum, weights and their sum)
// and a draw that skips whole blocks.
//  - temperature <= 0: the first largest logit, with its log-prob under softmax(logits);
//  - top_p >= 1: the first token, in vocabulary order, whose cumulative weight passes u * total;
//  - else the nucleus: tokens ranked by probability (ties: lower id first), each kept while the
//    mass ranked above it is below top_p; the draw walks the kept ones in that order.
// The nucleus is found without sorting the vocabulary: the tokens of weight >= tau are a prefix of
// the ranking, so once their mass reaches top_p only they are sorted. tau starts at 1/64 of the
// largest weight and drops 64-fold until the mass is reached; at tau = (1 - top_p) / vocab of the
// total it always is (the tokens below hold less than 1 - top_p), and tau = 0 takes every token.
// Built with -ffast-math: non-finite logits are found by their bits (temperature divides as a
// multiplication by its inverse). A row with a NaN or +inf logit gets the first such token and a
// NaN log-prob; -inf logits have weight 0. Rows run in parallel (rl/decode_pool.cpp, OpenMP's
// thread count), each thread on its own weights buffer, kept between calls.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "decode_pool.h"

namespace {

inline float to_float(float x) { return x; }
inline float to_float(uint16_t x) { uint32_t bits = uint32_t(x) << 16; float f; std::memcpy(&f, &bits, 4); return f; }
inline uint32_t bits_of(float x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
inline bool nan_or_plus_inf(float x) {  // bitwise, so -ffast-math keeps it
  const uint32_t b = bits_of(x);
  return bool(uint32_t((b & 0x7fffffffu) >= 0x7f800000u) & uint32_t(b != 0xff800000u));
}

constexpr int64_t kBlock = 256;  // weights summed in float per block, blocks added in double

// the sum of the weights in [start, stop) that are >= bound (bound 0: all of them)
inline float block_sum(const float* w, int64_t start, int64_t stop, float bound) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = start; i < stop; ++i) sum += w[i] >= bound ? w[i] : 0.f;
  return sum;
}

// the first position whose cumulative weight (in the order of ids, or of positions) passes target;
// rounding can leave the last sum at the target: then the last position of positive weight
int64_t first_past(const float* weights, const int64_t* ids, int64_t n, double target) {
  double cumulative = 0.0;
  int64_t last_positive = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float weight = weights[ids ? ids[j] : j];
    cumulative += weight;
    if (cumulative > target) return j;
    if (weight > 0.f) last_positive = j;
  }
  return last_positive;
}

// the same over positions [0, n), skipping whole blocks whose sum does not reach the target
int64_t first_past_blocked(const float* weights, int64_t n, double target) {
  double cumulative = 0.0;
  int64_t start = 0, last_nonempty = 0;
  for (; start < n; start += kBlock) {
    const double block = block_sum(weights, start, std::min(n, start + kBlock), 0.f);
    if (cumulative + block > target) break;
    cumulative += block;
    if (block > 0.0) last_nonempty = start;
  }
  if (start >= n) start = last_nonempty;  // rounding: the last block with weight, walked below
  const int64_t j = first_past(weights + start, nullptr, std::min(n, start + kBlock) - start, target - cumulative);
  return start + j;
}

template <typename T>
void sample_row(const T* logits, int64_t vocab, float temperature, float top_p, float uniform, float* w,
                std::vector<int64_t>& kept, int64_t* token, float* logp) {
  const float inverse = temperature > 0.f ? 1.f / temperature : 1.f;
  const float lowest = std::numeric_limits<float>::lowest();
  uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < vocab; ++i) bad |= uint32_t(nan_or_plus_inf(to_float(logits[i])));
  if (bad) {
    int64_t first = 0;
    while (!nan_or_plus_inf(to_float(logits[first]))) ++first;
    *token = first;
    *logp = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  float top = lowest;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < vocab; ++i) {
    float x = to_float(logits[i]) * inverse;
    x = x > lowest ? x : lowest;  // -inf -> the lowest float, whose weight is 0
    w[i] = x;
    top = top > x ? top : x;
  }
  int64_t argmax = 0;  // the first largest: find its block of 64 with vector compares, then walk it
  for (int64_t start = 0; start < vocab; start += 64) {
    const int64_t stop = std::min(vocab, start + 64);
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (int64_t i = start; i < stop; ++i) hit |= int(w[i] == top);
    if (hit) {
      for (argmax = start; w[argmax] != top; ++argmax) {}
      break;
    }
  }
#pragma omp simd
  for (int64_t i = 0; i < vocab; ++i) w[i] = std::exp(w[i] - top);
  double total = 0.0;
  for (int64_t start = 0; start < vocab; start += kBlock) total += block_sum(w, start, std::min(vocab, start + kBlock), 0.f);
  int64_t chosen = argmax;
  if (temperature > 0.f && top_p >= 1.f) {
    chosen = first_past_blocked(w, vocab, double(uniform) * total);
  } else if (temperature > 0.f) {
    const double need = double(top_p) * total;
    const double floor = (1.0 - double(top_p)) / double(vocab) * total;
    double tau = 1.0 / 64.0;
    for (;;) {  // the mass at or above tau, in vector passes; the ids only once it is enough
      double mass = 0.0;
      for (int64_t start = 0; start < vocab; start += kBlock)
        mass += block_sum(w, start, std::min(vocab, start + kBlock), float(tau));
      if (mass >= need || tau == 0.0) break;
      tau = tau / 64.0 > floor ? tau / 64.0 : tau > floor ? floor : 0.0;
    }
    kept.clear();
    for (int64_t i = 0; i < vocab; ++i)
      if (w[i] >= float(tau)) kept.push_back(i);
    std::sort(kept.begin(), kept.end(), [w](int64_t a, int64_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
    double above = 0.0;
    int64_t n = 0;
    while (n < int64_t(kept.size()) && above < need) above += w[kept[n++]];
    chosen = kept[first_past(w, kept.data(), n, double(uniform) * above)];
  }
  *token = chosen;
  *logp = float(std::log(double(w[chosen])) - std::log(total));
}

template <typename T>
void run(const void* logits, int64_t rows, int64_t vocab, int64_t row_stride, float temperature, float top_p,
         const float* uniforms, int64_t* tokens, float* logps) {
  const T* base = static_cast<const T*>(logits);
  parallel_ranges(rows, rows, true, [&](int64_t r) {
    thread_local std::vector<float> weights;  // each thread's own scratch, kept between calls
    thread_local std::vector<int64_t> kept;
    if (int64_t(weights.size()) < vocab) weights.resize(vocab);
    sample_row(base + r * row_stride, vocab, temperature, top_p, uniforms[r], weights.data(), kept, tokens + r,
               logps + r);
  });
}
}  // namespace

extern "C" int hs_sample(int dtype, const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                         float temperature, float top_p, const float* uniforms, int64_t* tokens, float* logps) {
  if (vocab < 1) return 1;
  if (dtype == 0) run<float>(logits, rows, vocab, row_stride, temperature, top_p, uniforms, tokens, logps);
  else if (dtype == 1) run<uint16_t>(logits, rows, vocab, row_stride, temperature, top_p, uniforms, tokens, logps);
  else return 2;
  return 0;
}
