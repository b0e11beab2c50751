// Structural kernels that are not plain permutations: the triangular masks tril / triu.
// Instantiated per element size S (tf::u8 .. tf::b128): the kept elements are copied bit
// for bit and the others are all-zero bits (0, 0.0, false and 0+0i in every dtype).
#include "tenferro/permute.cuh"

namespace tf {

// dst (compact, p.n elements, last two axes rows x cols) = src masked: element (r, c) of a
// matrix is kept when c - r <= k (tril) or c - r >= k (triu). Grid-stride over dst.
template <class S, class I>
__global__ void __launch_bounds__(256)
tri_copy(S* __restrict__ dst, const S* __restrict__ src, const TriPlan<I> p) {
  tf::grid_wait();
  const I stride = (I)gridDim.x * blockDim.x;
  const I start = (I)blockIdx.x * blockDim.x + threadIdx.x;
  for (u64 i64_ = start; i64_ < (u64)p.n; i64_ += stride) {
    I t = (I)i64_;
    const I c = t % p.cols;
    t /= p.cols;
    const I r = t % p.rows;
    t /= p.rows;
    const i64 diff = (i64)c - (i64)r;
    const bool keep = p.upper ? diff >= p.k : diff <= p.k;
    S v = S();
    if (keep) {
      I so = p.soff + r * p.srs + c * p.scs;
#pragma unroll
      for (int d = TF_TILE_RANK - 1; d >= 0; --d) {
        if (d < p.nd) {
          I e = p.ext[d];
          I q = t / e;
          so += (t - q * e) * p.ss[d];
          t = q;
        }
      }
      v = src[so];
    }
    dst[(I)i64_] = v;
  }
}

}  // namespace tf
