// One decode step's attention on CPU (rl/decode_kernel.py builds and loads this file).
// Each row has one query per head; the query heads that share a key/value head (grouped-query
// attention) are served together, so each key and value of the row's own filled slots
// [0, lengths[b]) is read once, in blocks of kBlock slots with an online softmax (the running
// maximum and sum are rescaled per block). Work is split over (row, key/value head) pairs by
// rl/decode_pool.cpp's helper threads, as many as torch's OpenMP thread count.
// dtype 0 is float32 and 1 is bfloat16 (rounded to nearest even on output); the arithmetic is float32.
#include <cstdint>
#include <cstring>
#include <cmath>
#include <algorithm>
#include <limits>

#include "decode_pool.h"

namespace {
constexpr int64_t kBlock = 64;
constexpr int64_t kMaxDim = 256;
constexpr int64_t kMaxGroup = 16;

inline float to_float(float x) { return x; }
inline float to_float(uint16_t x) { uint32_t bits = uint32_t(x) << 16; float f; std::memcpy(&f, &bits, 4); return f; }
inline void from_float(float x, float* out) { *out = x; }
inline void from_float(float x, uint16_t* out) {  // round to nearest even
  uint32_t bits; std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) { *out = uint16_t((bits >> 16) | 0x40); return; }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  *out = uint16_t(bits >> 16);
}

template <typename T, int64_t kDim>
void attend(const T* q, int64_t q_head_stride, const T* k, const T* v, int64_t slot_stride, int64_t length,
            int64_t group, int64_t runtime_dim, float scale, T* out, int64_t out_head_stride) {
  const int64_t dim = kDim ? kDim : runtime_dim;
  alignas(64) float qf[kMaxGroup][kMaxDim];
  alignas(64) float acc[kMaxGroup][kMaxDim];
  alignas(64) float scores[kMaxGroup][kBlock];
  alignas(64) float row[kMaxDim];
  float running_max[kMaxGroup], running_sum[kMaxGroup];
  for (int64_t g = 0; g < group; ++g) {
    for (int64_t d = 0; d < dim; ++d) { qf[g][d] = to_float(q[g * q_head_stride + d]) * scale; acc[g][d] = 0.f; }
    running_max[g] = -std::numeric_limits<float>::infinity();
    running_sum[g] = 0.f;
  }
  for (int64_t start = 0; start < length; start += kBlock) {
    const int64_t n = std::min(kBlock, length - start);
    for (int64_t j = 0; j < n; ++j) {
      const T* key = k + (start + j) * slot_stride;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) row[d] = to_float(key[d]);
      for (int64_t g = 0; g < group; ++g) {
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t d = 0; d < dim; ++d) s += qf[g][d] * row[d];
        scores[g][j] = s;
      }
    }
    for (int64_t g = 0; g < group; ++g) {
      float block_max = running_max[g];
      for (int64_t j = 0; j < n; ++j) block_max = std::max(block_max, scores[g][j]);
      const float rescale = std::exp(running_max[g] - block_max);
      running_max[g] = block_max;
      float block_sum = 0.f;
#pragma omp simd reduction(+ : block_sum)
      for (int64_t j = 0; j < n; ++j) { scores[g][j] = std::exp(scores[g][j] - block_max); block_sum += scores[g][j]; }
      running_sum[g] = running_sum[g] * rescale + block_sum;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) acc[g][d] *= rescale;
    }
    for (int64_t j = 0; j < n; ++j) {
      const T* value = v + (start + j) * slot_stride;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) row[d] = to_float(value[d]);
      for (int64_t g = 0; g < group; ++g) {
        const float p = scores[g][j];
#pragma omp simd
        for (int64_t d = 0; d < dim; ++d) acc[g][d] += p * row[d];
      }
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    const float inv = running_sum[g] > 0.f ? 1.f / running_sum[g] : 0.f;
    for (int64_t d = 0; d < dim; ++d) from_float(acc[g][d] * inv, out + g * out_head_stride + d);
  }
}

template <typename T>
void run(const void* q, const int64_t* qs, const void* k, const void* v, const int64_t* ks, const int64_t* lengths,
         const int64_t* rows, int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t dim, float scale, void* out) {
  const int64_t group = q_heads / kv_heads;
  const T* qp = static_cast<const T*>(q);
  const T* kp = static_cast<const T*>(k);
  const T* vp = static_cast<const T*>(v);
  T* op = static_cast<T*>(out);
  parallel_ranges(batch * kv_heads, batch * kv_heads, true, [&](int64_t task) {
    const int64_t b = task / kv_heads, h = task % kv_heads;
    const int64_t r = rows ? rows[b] : b;  // the buffer row query b reads
    auto body = dim == 64 ? attend<T, 64> : dim == 128 ? attend<T, 128> : attend<T, 0>;
    body(qp + b * qs[0] + h * group * qs[1], qs[1], kp + r * ks[0] + h * ks[1], vp + r * ks[0] + h * ks[1],
              ks[2], lengths[b], group, dim, scale, op + (b * q_heads + h * group) * dim, dim);
  });
}
}  // namespace

// rows (may be null): the key/value buffer row that query b reads (rows[b]); null reads row b.
extern "C" int hs_decode_attention(int dtype, const void* q, const int64_t* q_strides, const void* k, const void* v,
                                   const int64_t* kv_strides, const int64_t* lengths, const int64_t* rows,
                                   int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t dim, float scale,
                                   void* out) {
  if (dim > kMaxDim || q_heads % kv_heads != 0 || q_heads / kv_heads > kMaxGroup) return 1;
  if (dtype == 0) run<float>(q, q_strides, k, v, kv_strides, lengths, rows, batch, q_heads, kv_heads, dim, scale, out);
  else if (dtype == 1)
    run<uint16_t>(q, q_strides, k, v, kv_strides, lengths, rows, batch, q_heads, kv_heads, dim, scale, out);
  else return 2;
  return 0;
}
