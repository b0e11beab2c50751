// Integer dot_general: a tiled, strided, batched GEMM
//   out[b, i, j] = alpha * sum_k lhs[b, i, k] * rhs[b, k, j] + beta * out[b, i, j]
// with wrapping arithmetic in the operand dtype: every product and sum is taken modulo
// 2^w (w = the dtype's width), exactly as if each step wrapped in the dtype. It is
// computed in an unsigned accumulator of at least w bits (u32 for 8/16/32-bit dtypes, u64
// for int64/uint64) and truncated once at the end; truncation commutes with + and *, so the
// result is the wrapped one. beta_zero != 0 means out is not read (overwritten).
//
// Strides are signed element strides (views, broadcasts and reversed axes all work).
// Tiles: 64 x 64 outputs per 256-thread block, K in steps of 16 through shared memory;
// each thread owns a 4 x 4 sub-tile (rows ty + 16 i, columns tx + 16 j) so that stores
// to out are coalesced along j. Grid: x over column tiles, y over row tiles, z over
// batch, each grid-strided so any size runs.
#include "tenferro/types.cuh"

#define TF_DOT_BM 64
#define TF_DOT_BN 64
#define TF_DOT_BK 16

namespace tf {

template <class T> struct dot_acc { typedef u32 type; };
template <> struct dot_acc<i64> { typedef u64 type; };
template <> struct dot_acc<u64> { typedef u64 type; };

template <class T>
__global__ void __launch_bounds__(256)
dot_int(T* __restrict__ out, const T* __restrict__ lhs, const T* __restrict__ rhs,
        i64 batch, i64 m, i64 n, i64 k,
        i64 lb, i64 lm, i64 lk, i64 rb, i64 rk, i64 rn, i64 ob, i64 om, i64 on,
        typename dot_acc<T>::type alpha, typename dot_acc<T>::type beta, int beta_zero) {
  tf::grid_wait();
  typedef typename dot_acc<T>::type A;
  __shared__ A As[TF_DOT_BK][TF_DOT_BM + 1];
  __shared__ A Bs[TF_DOT_BK][TF_DOT_BN + 1];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  // Load order: walk the operand's unit-stride direction across consecutive threads.
  const bool a_k_fast = (lk == 1);
  const bool b_n_fast = (rn == 1);
  const i64 tiles_m = (m + TF_DOT_BM - 1) / TF_DOT_BM;
  const i64 tiles_n = (n + TF_DOT_BN - 1) / TF_DOT_BN;
  for (i64 bz = blockIdx.z; bz < batch; bz += gridDim.z) {
    const T* lp = lhs + bz * lb;
    const T* rp = rhs + bz * rb;
    T* op = out + bz * ob;
    for (i64 tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      for (i64 tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const i64 m0 = tm * TF_DOT_BM, n0 = tn * TF_DOT_BN;
        A acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = 0;
        for (i64 k0 = 0; k0 < k; k0 += TF_DOT_BK) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int e = tid + 256 * r;
            const int ai = a_k_fast ? e / TF_DOT_BK : e % TF_DOT_BM;
            const int ak = a_k_fast ? e % TF_DOT_BK : e / TF_DOT_BM;
            const i64 gi = m0 + ai, gk = k0 + ak;
            As[ak][ai] = (gi < m && gk < k) ? (A)lp[gi * lm + gk * lk] : (A)0;
            const int bj = b_n_fast ? e % TF_DOT_BN : e / TF_DOT_BK;
            const int bk = b_n_fast ? e / TF_DOT_BN : e % TF_DOT_BK;
            const i64 gj = n0 + bj, gk2 = k0 + bk;
            Bs[bk][bj] = (gj < n && gk2 < k) ? (A)rp[gk2 * rk + gj * rn] : (A)0;
          }
          __syncthreads();
#pragma unroll
          for (int kk = 0; kk < TF_DOT_BK; ++kk) {
            A a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
              for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
          }
          __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const i64 gi = m0 + ty + 16 * i;
          if (gi >= m) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const i64 gj = n0 + tx + 16 * j;
            if (gj >= n) continue;
            T* p = op + gi * om + gj * on;
            A v = alpha * acc[i][j];
            if (!beta_zero) v += beta * (A)(*p);
            *p = (T)v;
          }
        }
      }
    }
  }
}

}  // namespace tf
