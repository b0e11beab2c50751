// BLAS-1 kernels (ops/blas1.py).
//
// flat_partials<M> + flat_finish<M>: an all-element reduction of one or two compact
//   inputs (vdot: sum of conj(a) * b; norm_squared: sum of |a|^2). Block s reduces elements
//   [s*chunk, (s+1)*chunk) with 16-byte loads (chunk is a multiple of the vector width and
//   the inputs start 16-byte aligned) and writes one partial; flat_finish reduces the
//   partials in one block and converts to the result dtype. A fixed tree, no atomics: the
//   bits of a result do not change from run to run.
// axpby_contig / axpby_strided: y <- alpha*x + beta*y in place, arithmetic in the compute
//   type (float for half/bfloat16, wrapping unsigned for integers). When beta_zero is set, y
//   is not read (BLAS convention: NaN or garbage in y does not propagate).
#include "tenferro/reduce.cuh"

namespace tf {
namespace bl {

template <class T> struct Vdot {
  typedef T value;
  typedef T out;
  typedef typename rd::wrap<T>::type acc;
  static const bool binary = true;
  static __device__ __forceinline__ acc map(T a, T b) {
    return rd::mul(rd::cv<acc, T>::go(a), rd::cv<acc, T>::go(b));
  }
};
template <class R> struct Vdot<complex<R> > {
  typedef complex<R> value;
  typedef complex<R> out;
  typedef complex<R> acc;
  static const bool binary = true;
  static __device__ __forceinline__ acc map(complex<R> a, complex<R> b) {
    return complex<R>(a.re * b.re + a.im * b.im, a.re * b.im - a.im * b.re);
  }
};

template <class T> struct NormSq {
  typedef T value;
  typedef T out;
  typedef typename rd::wrap<T>::type acc;
  static const bool binary = false;
  static __device__ __forceinline__ acc map(T a, T) {
    const acc x = rd::cv<acc, T>::go(a);
    return x * x;
  }
};
template <class R> struct NormSq<complex<R> > {
  typedef complex<R> value;
  typedef R out;
  typedef R acc;
  static const bool binary = false;
  static __device__ __forceinline__ acc map(complex<R> a, complex<R>) {
    return a.re * a.re + a.im * a.im;
  }
};

template <class M, int V>
__device__ __forceinline__ typename M::acc fold_map(typename M::acc s,
                                                    const rd::vec16<typename M::value>& x,
                                                    const rd::vec16<typename M::value>& y) {
#pragma unroll
  for (int j = 0; j < V; ++j) s = rd::add(s, M::map(x.e[j], y.e[j]));
  return s;
}

template <class T>
__device__ __forceinline__ T axpby_one(T x, T y, T alpha, T beta, int beta_zero) {
  typedef typename rd::wrap<T>::type A;
  A r = rd::mul(rd::cv<A, T>::go(alpha), rd::cv<A, T>::go(x));
  if (!beta_zero) r = rd::add(r, rd::mul(rd::cv<A, T>::go(beta), rd::cv<A, T>::go(y)));
  return rd::cv<T, A>::go(r);
}

}  // namespace bl

template <class M>
__global__ void __launch_bounds__(256)
flat_partials(const typename M::value* __restrict__ a, const typename M::value* __restrict__ b,
              u64 n, u64 chunk, typename M::acc* __restrict__ partials) {
  tf::grid_wait();
  typedef typename M::value T;
  typedef typename M::acc A;
  typedef rd::vec16<T> Vec;
  constexpr int V = Vec::n;
  __shared__ __align__(16) unsigned char smem[32 * sizeof(A)];
  const u64 start = (u64)blockIdx.x * chunk;
  const u32 len = (u32)(n - start < chunk ? n - start : chunk);
  const T* pa = a + start;
  const T* pb = M::binary ? b + start : pa;
  const Vec* va = reinterpret_cast<const Vec*>(pa);
  const Vec* vb = reinterpret_cast<const Vec*>(pb);
  const u32 nv = len / V, step = blockDim.x;
  A s = rd::num<A>::zero();
  u32 v = threadIdx.x;
  for (; v + 3 * step < nv; v += 4 * step) {
    const Vec x0 = va[v], x1 = va[v + step], x2 = va[v + 2 * step], x3 = va[v + 3 * step];
    if constexpr (M::binary) {
      const Vec y0 = vb[v], y1 = vb[v + step], y2 = vb[v + 2 * step], y3 = vb[v + 3 * step];
      s = bl::fold_map<M, V>(s, x0, y0);
      s = bl::fold_map<M, V>(s, x1, y1);
      s = bl::fold_map<M, V>(s, x2, y2);
      s = bl::fold_map<M, V>(s, x3, y3);
    } else {
      s = bl::fold_map<M, V>(s, x0, x0);
      s = bl::fold_map<M, V>(s, x1, x1);
      s = bl::fold_map<M, V>(s, x2, x2);
      s = bl::fold_map<M, V>(s, x3, x3);
    }
  }
  for (; v < nv; v += step) {
    const Vec x = va[v];
    if constexpr (M::binary) {
      s = bl::fold_map<M, V>(s, x, vb[v]);
    } else {
      s = bl::fold_map<M, V>(s, x, x);
    }
  }
  for (u32 t = nv * V + threadIdx.x; t < len; t += step) s = rd::add(s, M::map(pa[t], pb[t]));
  s = rd::block_reduce<rd::Sum<A> >(s, reinterpret_cast<A*>(smem));
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

template <class M>
__global__ void __launch_bounds__(256)
flat_finish(const typename M::acc* __restrict__ partials, u32 n,
            typename M::out* __restrict__ out) {
  tf::grid_wait();
  typedef typename M::acc A;
  __shared__ __align__(16) unsigned char smem[32 * sizeof(A)];
  A s = rd::num<A>::zero();
  for (u32 t = threadIdx.x; t < n; t += blockDim.x) s = rd::add(s, partials[t]);
  s = rd::block_reduce<rd::Sum<A> >(s, reinterpret_cast<A*>(smem));
  if (threadIdx.x == 0) *out = rd::cv<typename M::out, A>::go(s);
}

template <class T>
__global__ void axpby_contig(T* __restrict__ y, const T* __restrict__ x, T alpha, T beta,
                             int beta_zero, u64 n) {
  tf::grid_wait();
  typedef rd::vec16<T> Vec;
  constexpr int V = Vec::n;
  const u64 nv = n / V;
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  Vec* vy = reinterpret_cast<Vec*>(y);
  const Vec* vx = reinterpret_cast<const Vec*>(x);
  for (u64 v = tid; v < nv; v += stride) {
    const Vec xv = vx[v];
    Vec yv;
    if (!beta_zero) yv = vy[v];
#pragma unroll
    for (int j = 0; j < V; ++j) yv.e[j] = bl::axpby_one(xv.e[j], yv.e[j], alpha, beta, beta_zero);
    vy[v] = yv;
  }
  for (u64 i = nv * V + tid; i < n; i += stride) {
    y[i] = bl::axpby_one(x[i], beta_zero ? x[i] : y[i], alpha, beta, beta_zero);
  }
}

template <class T, class I>
__global__ void axpby_strided(T* __restrict__ y, Layout yl, const T* __restrict__ x, Layout xl,
                              T alpha, T beta, int beta_zero, I n) {
  tf::grid_wait();
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 oy, ox;
    offsets_of2<I>(yl, xl, i, oy, ox);
    y[oy] = bl::axpby_one(x[ox], beta_zero ? x[ox] : y[oy], alpha, beta, beta_zero);
  }
}

}  // namespace tf
