// A decode step's fp32 projection for a few rows: y[m, n] = sum_k x[m, k] * w[n, k] + bias[n].
//
// The weight is read in its own [N, K] row-major layout (nn.Linear's), so no packed copy is kept
// and a weight changed by an update is read as it is. Each tile of 3 weight rows x 4 input rows keeps
// its 12 dot products in vector registers along K (one weight row's chunk is loaded once per 4
// input rows, one input row's chunk once per 3 weight rows) and sums each one across its lanes
// at the end. Weight tiles are split over the OpenMP threads when the product is large enough
// to repay waking them (sleeping threads take tens of microseconds to wake).
#include <cstdint>
#include <cstring>

namespace {

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
  if (rows < 0 || outputs < 0 || depth < 0 || x_stride < depth || y_stride < outputs) return 1;
  const Problem p{x, x_stride, w, bias, y, y_stride, rows, outputs, depth};
  const int64_t tiles = outputs / kWeightRows;
#pragma omp parallel for schedule(static) if (rows * outputs * depth >= kThreadedMacs)
  for (int64_t t = 0; t < tiles; ++t) weight_rows<kWeightRows>(p, t * kWeightRows);
  for (int64_t n0 = tiles * kWeightRows; n0 < outputs; ++n0) weight_rows<1>(p, n0);
  return 0;
}
