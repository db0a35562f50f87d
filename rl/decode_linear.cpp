// A decode step's fp32 projection for a few rows: y[m, n] = sum_k x[m, k] * w[n, k] + bias[n].
//
// The weight is read in its own [N, K] row-major layout (nn.Linear's), so no packed copy is kept
// and a weight changed by an update is read as it is. Each tile of 3 weight rows x 4 input rows keeps
// its 12 dot products in vector registers along K (one weight row's chunk is loaded once per 4
// input rows, one input row's chunk once per 3 weight rows) and sums each one across its lanes
// at the end. Weight tiles are split over the OpenMP threads when the product is large enough
// to repay waking them (sleeping threads take tens of microseconds to wake).
//
// The bf16 entry does the same for bf16 weights and inputs on CPUs with AVX-512 BF16, in tiles of
// 4 weight rows x 4 input rows: one vdpbf16ps multiplies 32 pairs of adjacent K elements into 16
// fp32 sums, so both operands are read in their own layout too; a tile's 16 sums are reduced
// across lanes together, stay fp32, and each output is rounded to bf16 once (to nearest even), as
// oneDNN's bf16 matmul rounds it. Where the compiler targets no AVX-512 BF16 it is not built and
// reports so.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "decode_pool.h"
#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kChunks = 16;  // ranges of weight tiles claimed one at a time, so a late thread still shares
// Checks the sizes, then runs weight_rows(W, n0) for every tile of W weight rows (split over the
// threads when the product has at least `threaded_macs` multiply-adds) and weight_rows(1, n0) for
// the rows left over. 1 for sizes that do not fit together, else 0.
template <int W, class P, class WeightRows>
int all_weight_rows(const P& p, int64_t threaded_macs, WeightRows weight_rows) {
  if (p.rows < 0 || p.outputs < 0 || p.depth < 0 || p.x_stride < p.depth || p.y_stride < p.outputs) return 1;
  const int64_t tiles = p.outputs / W;
  parallel_ranges(tiles, kChunks, p.rows * p.outputs * p.depth >= threaded_macs,
                  [&](int64_t t) { weight_rows(std::integral_constant<int, W>{}, t * W); });
  for (int64_t n0 = tiles * W; n0 < p.outputs; ++n0) weight_rows(std::integral_constant<int, 1>{}, n0);
  return 0;
}

constexpr int kLanes = 8;            // floats in one 256-bit vector (AVX2; AVX-512 machines run it too)
constexpr int kWeightRows = 3;       // divides SmolLM2's 576, 192, 1,536 and 49,152 outputs
constexpr int kInputRows = 4;        // divides the usual 8, 16, 24, 32 rows of a decode step
constexpr int64_t kThreadedMacs = 6'000'000;  // multiply-adds from which both threads share the work

typedef float vec __attribute__((vector_size(kLanes * sizeof(float))));

inline vec load(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float lanes_sum(vec v) {
  float s = 0.f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

struct Problem {
  const float* x;
  int64_t x_stride;  // elements between input rows
  const float* w;    // [n, k], rows contiguous
  const float* bias; // [n] or null
  float* y;
  int64_t y_stride;
  int64_t rows, outputs, depth;
};

template <int W, int R>
void tile(const Problem& p, int64_t n0, int64_t m0, bool fetch_next) {
  vec acc[W][R];
  for (int j = 0; j < W; ++j)
    for (int i = 0; i < R; ++i) acc[j][i] = vec{};
  int64_t k = 0;
  const float* next = p.w + (n0 + W) * p.depth;  // the next tile's weight rows, asked for ahead from memory
  for (; k + kLanes <= p.depth; k += kLanes) {
    if (fetch_next && k % (2 * kLanes) == 0)  // one 64-byte line per 16 floats
      for (int j = 0; j < W; ++j) __builtin_prefetch(next + j * p.depth + k);
    vec xs[R];
    for (int i = 0; i < R; ++i) xs[i] = load(p.x + (m0 + i) * p.x_stride + k);
    for (int j = 0; j < W; ++j) {
      const vec ws = load(p.w + (n0 + j) * p.depth + k);
      for (int i = 0; i < R; ++i) acc[j][i] += ws * xs[i];
    }
  }
  for (int j = 0; j < W; ++j) {
    const float b = p.bias ? p.bias[n0 + j] : 0.f;
    for (int i = 0; i < R; ++i) {
      float s = lanes_sum(acc[j][i]);
      for (int64_t kk = k; kk < p.depth; ++kk) s += p.x[(m0 + i) * p.x_stride + kk] * p.w[(n0 + j) * p.depth + kk];
      p.y[(m0 + i) * p.y_stride + n0 + j] = s + b;
    }
  }
}

template <int W>
void weight_rows(const Problem& p, int64_t n0) {
  const bool last = n0 + 2 * W > p.outputs;  // no next tile of this size to fetch
  int64_t m0 = 0;
  for (; m0 + kInputRows <= p.rows; m0 += kInputRows) tile<W, kInputRows>(p, n0, m0, m0 == 0 && !last);
  for (; m0 < p.rows; ++m0) tile<W, 1>(p, n0, m0, m0 == 0 && !last);
}

}  // namespace

extern "C" int hs_decode_linear(const float* x, int64_t x_stride, const float* w, const float* bias, float* y,
                                int64_t y_stride, int64_t rows, int64_t outputs, int64_t depth) {
  const Problem p{x, x_stride, w, bias, y, y_stride, rows, outputs, depth};
  return all_weight_rows<kWeightRows>(
      p, kThreadedMacs, [&p](auto tile, int64_t n0) { weight_rows<decltype(tile)::value>(p, n0); });
}

#if defined(__AVX512BF16__)
namespace {

constexpr int kPairs = 32;          // bf16 elements of K in one 512-bit vector
constexpr int kBf16WeightRows = 4;  // divides SmolLM2's 576, 192, 1,536 and 49,152 outputs
// Both threads from small products on: here the weight's reading, not the arithmetic, sets the
// time, and one core alone reads at about half the machine's bandwidth (docs/results.md).
constexpr int64_t kBf16ThreadedMacs = 65'536;

struct Bf16Problem {
  const uint16_t* x;
  int64_t x_stride;
  const uint16_t* w;
  const uint16_t* bias;
  uint16_t* y;
  int64_t y_stride;
  int64_t rows, outputs, depth;
};

inline float bf16_value(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t bf16_rounded(float f) {  // to nearest even, as torch rounds
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40u);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// The sums of 16 vectors in one: halves, then quarters, then pairs and single lanes of the vectors
// added crosswise, 15 additions in all where reducing each vector alone takes 64. Lane 4 q + r holds
// the sum of vector 4 r + q.
inline __m512 sum16(const __m512* v) {
  __m512 halves[8], quarters[4], pairs[2];
  for (int t = 0; t < 8; ++t)
    halves[t] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * t], v[2 * t + 1], 0x44),
                              _mm512_shuffle_f32x4(v[2 * t], v[2 * t + 1], 0xEE));
  for (int t = 0; t < 4; ++t)
    quarters[t] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * t], halves[2 * t + 1], 0x88),
                                _mm512_shuffle_f32x4(halves[2 * t], halves[2 * t + 1], 0xDD));
  for (int t = 0; t < 2; ++t)
    pairs[t] = _mm512_add_ps(_mm512_shuffle_ps(quarters[2 * t], quarters[2 * t + 1], 0x44),
                             _mm512_shuffle_ps(quarters[2 * t], quarters[2 * t + 1], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(pairs[0], pairs[1], 0x88), _mm512_shuffle_ps(pairs[0], pairs[1], 0xDD));
}

typedef float sums __attribute__((vector_size(64)));  // 16 fp32 sums; not may_alias, so they stay in registers

template <int W, int R>
void bf16_tile(const Bf16Problem& p, int64_t n0, int64_t m0, bool fetch_next) {
  const int64_t depth = p.depth;
  const uint16_t* xs_at[R];
  const uint16_t* ws_at[W];
  for (int i = 0; i < R; ++i) xs_at[i] = p.x + (m0 + i) * p.x_stride;
  for (int j = 0; j < W; ++j) ws_at[j] = p.w + (n0 + j) * depth;
  const uint16_t* next = p.w + (n0 + W) * depth;
  sums acc[W][R] = {};
  const auto step = [&](int64_t k, auto load) {
    __m512bh xs[R];
    for (int i = 0; i < R; ++i) xs[i] = load(xs_at[i] + k);
    for (int j = 0; j < W; ++j) {
      const __m512bh ws = load(ws_at[j] + k);
      for (int i = 0; i < R; ++i) acc[j][i] = (sums)_mm512_dpbf16_ps((__m512)acc[j][i], ws, xs[i]);
    }
  };
  int64_t k = 0;
  for (; k + kPairs <= depth; k += kPairs) {
    if (fetch_next)  // one 64-byte line per 32 elements
      for (int j = 0; j < W; ++j) __builtin_prefetch(next + j * depth + k);
    step(k, [](const uint16_t* at) { return (__m512bh)_mm512_loadu_si512(at); });
  }
  if (k < depth) {  // the last few elements of K, the rest of the vector zero
    const __mmask32 mask = __mmask32((1u << (depth - k)) - 1u);
    step(k, [mask](const uint16_t* at) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, at); });
  }
  if constexpr (W == 4 && R == 4) {  // 16 sums reduced together: lanes 4 i .. 4 i + 3 are row i's 4 outputs
    __m512 v[16];
    for (int j = 0; j < W; ++j)
      for (int i = 0; i < R; ++i) v[j * R + i] = (__m512)acc[j][i];
    float b[4] = {};
    if (p.bias)
      for (int j = 0; j < W; ++j) b[j] = bf16_value(p.bias[n0 + j]);
    const __m512 bias = _mm512_broadcast_f32x4(_mm_loadu_ps(b));
    uint16_t out[16];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(sum16(v), bias)));
    for (int i = 0; i < R; ++i) std::memcpy(p.y + (m0 + i) * p.y_stride + n0, out + 4 * i, 4 * sizeof(uint16_t));
  } else {
    for (int j = 0; j < W; ++j) {
      const float b = p.bias ? bf16_value(p.bias[n0 + j]) : 0.f;
      for (int i = 0; i < R; ++i)
        p.y[(m0 + i) * p.y_stride + n0 + j] = bf16_rounded(_mm512_reduce_add_ps((__m512)acc[j][i]) + b);
    }
  }
}

template <int W>
void bf16_weight_rows(const Bf16Problem& p, int64_t n0) {
  const bool last = n0 + 2 * W > p.outputs;
  int64_t m0 = 0;
  for (; m0 + kInputRows <= p.rows; m0 += kInputRows) bf16_tile<W, kInputRows>(p, n0, m0, m0 == 0 && !last);
  for (; m0 < p.rows; ++m0) bf16_tile<W, 1>(p, n0, m0, m0 == 0 && !last);
}

}  // namespace
#endif

extern "C" int hs_decode_linear_bf16(const uint16_t* x, int64_t x_stride, const uint16_t* w, const uint16_t* bias,
                                     uint16_t* y, int64_t y_stride, int64_t rows, int64_t outputs, int64_t depth) {
#if defined(__AVX512BF16__)
  const Bf16Problem p{x, x_stride, w, bias, y, y_stride, rows, outputs, depth};
  return all_weight_rows<kBf16WeightRows>(
      p, kBf16ThreadedMacs, [&p](auto tile, int64_t n0) { bf16_weight_rows<decltype(tile)::value>(p, n0); });
#else
  (void)x, (void)x_stride, (void)w, (void)bias, (void)y, (void)y_stride, (void)rows, (void)outputs, (void)depth;
  return 2;  // not built for this CPU: no AVX-512 BF16
#endif
}
