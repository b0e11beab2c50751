// Reduction building blocks shared by ptx/reduce.cu and ptx/blas1.cu (namespace tf::rd):
// the four reduction operators with their accumulator types, conversions between storage,
// accumulator and partial types, fixed-shape warp/block combine trees (so results are
// bitwise reproducible: no atomics, the same tree every run) and 16-byte vector loads.
//
// Accumulators: float for half/bfloat16; wrapping unsigned integers for integer sums and
// products (u32 for 8-, 16- and 32-bit integers, u64 for 64-bit ones: the low bits of a
// wrapped sum or product do not depend on the width, so narrowing at the end equals
// wrapping in the input dtype); the input type otherwise. max/min propagate NaN. and/or (bool and integers) are
// bitwise on the input sign-extended into u32 (u64 for 8-byte types): the low bits of the
// result are the input-width result, and for bool (0 or 1) bitwise is logical.
#pragma once
#include "layout.cuh"

namespace tf {
namespace rd {

// ---- accumulator types -----------------------------------------------------------------
template <class T> struct wrap { typedef typename compute<T>::type type; };
template <> struct wrap<i8> { typedef u32 type; };
template <> struct wrap<u8> { typedef u32 type; };
template <> struct wrap<i16> { typedef u32 type; };
template <> struct wrap<u16> { typedef u32 type; };
template <> struct wrap<i32> { typedef u32 type; };
template <> struct wrap<u32> { typedef u32 type; };
template <> struct wrap<i64> { typedef u64 type; };
template <> struct wrap<u64> { typedef u64 type; };

template <class A> struct num {
  static __device__ __forceinline__ A zero() { return A(0); }
  static __device__ __forceinline__ A one() { return A(1); }
};
template <class R> struct num<complex<R> > {
  static __device__ __forceinline__ complex<R> zero() { return complex<R>(R(0), R(0)); }
  static __device__ __forceinline__ complex<R> one() { return complex<R>(R(1), R(0)); }
};

template <class A> struct bound {
  static __device__ __forceinline__ A lo() { return limits<A>::lo(); }
  static __device__ __forceinline__ A hi() { return limits<A>::hi(); }
};
template <> struct bound<float> {
  static __device__ __forceinline__ float lo() { return __int_as_float(0xff800000); }
  static __device__ __forceinline__ float hi() { return __int_as_float(0x7f800000); }
};
template <> struct bound<double> {
  static __device__ __forceinline__ double lo() {
    return __longlong_as_double((i64)0xfff0000000000000ULL);
  }
  static __device__ __forceinline__ double hi() {
    return __longlong_as_double((i64)0x7ff0000000000000ULL);
  }
};

// ---- arithmetic on accumulators ----------------------------------------------------------
template <class A> __device__ __forceinline__ A add(A a, A b) { return a + b; }
template <class R> __device__ __forceinline__ complex<R> add(complex<R> a, complex<R> b) {
  return complex<R>(a.re + b.re, a.im + b.im);
}
template <class A> __device__ __forceinline__ A mul(A a, A b) { return a * b; }
template <class R> __device__ __forceinline__ complex<R> mul(complex<R> a, complex<R> b) {
  return complex<R>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}

// ---- conversions between storage (T), accumulator (A) and partial types ----------------
template <class To, class From> struct cv {
  static __device__ __forceinline__ To go(From v) { return (To)v; }
};
template <> struct cv<float, half> {
  static __device__ __forceinline__ float go(half v) { return to_f32(v); }
};
template <> struct cv<float, bfloat16> {
  static __device__ __forceinline__ float go(bfloat16 v) { return to_f32(v); }
};
template <> struct cv<half, float> {
  static __device__ __forceinline__ half go(float v) { return make_half(v); }
};
template <> struct cv<bfloat16, float> {
  static __device__ __forceinline__ bfloat16 go(float v) { return make_bf16(v); }
};

// ---- the operators ----------------------------------------------------------------------
template <class T> struct Sum {
  typedef typename wrap<T>::type acc;
  static __device__ __forceinline__ acc identity() { return num<acc>::zero(); }
  static __device__ __forceinline__ acc combine(acc a, acc b) { return add(a, b); }
};
template <class T> struct Prod {
  typedef typename wrap<T>::type acc;
  static __device__ __forceinline__ acc identity() { return num<acc>::one(); }
  static __device__ __forceinline__ acc combine(acc a, acc b) { return mul(a, b); }
};
// NaN wins: `a != a` is true only for NaN (always false for integers).
template <class T> struct Max {
  typedef typename compute<T>::type acc;
  static __device__ __forceinline__ acc identity() { return bound<acc>::lo(); }
  static __device__ __forceinline__ acc combine(acc a, acc b) { return (a > b || a != a) ? a : b; }
};
template <class T> struct Min {
  typedef typename compute<T>::type acc;
  static __device__ __forceinline__ acc identity() { return bound<acc>::hi(); }
  static __device__ __forceinline__ acc combine(acc a, acc b) { return (a < b || a != a) ? a : b; }
};

// and/or: identity all ones / zero.
template <bool Wide, class A, class B> struct pick { typedef A type; };
template <class A, class B> struct pick<false, A, B> { typedef B type; };
template <class T> struct bits { typedef typename pick<(sizeof(T) > 4), u64, u32>::type type; };
template <class T> struct And {
  typedef typename bits<T>::type acc;
  static __device__ __forceinline__ acc identity() { return ~acc(0); }
  static __device__ __forceinline__ acc combine(acc a, acc b) { return a & b; }
};
template <class T> struct Or {
  typedef typename bits<T>::type acc;
  static __device__ __forceinline__ acc identity() { return acc(0); }
  static __device__ __forceinline__ acc combine(acc a, acc b) { return a | b; }
};

template <class Op, class In>
__device__ __forceinline__ typename Op::acc fold(typename Op::acc a, In v) {
  return Op::combine(a, cv<typename Op::acc, In>::go(v));
}

// ---- warp shuffles -------------------------------------------------------------------------
#define TF_FULL_MASK 0xffffffffu
__device__ __forceinline__ float shfl(float v, int m) {
  return __shfl_xor_sync(TF_FULL_MASK, v, m);
}
__device__ __forceinline__ double shfl(double v, int m) {
  return __shfl_xor_sync(TF_FULL_MASK, v, m);
}
__device__ __forceinline__ int shfl(int v, int m) { return __shfl_xor_sync(TF_FULL_MASK, v, m); }
__device__ __forceinline__ u32 shfl(u32 v, int m) { return __shfl_xor_sync(TF_FULL_MASK, v, m); }
__device__ __forceinline__ i64 shfl(i64 v, int m) { return __shfl_xor_sync(TF_FULL_MASK, v, m); }
__device__ __forceinline__ u64 shfl(u64 v, int m) { return __shfl_xor_sync(TF_FULL_MASK, v, m); }
__device__ __forceinline__ i8 shfl(i8 v, int m) {
  return (i8)__shfl_xor_sync(TF_FULL_MASK, (int)v, m);
}
__device__ __forceinline__ u8 shfl(u8 v, int m) {
  return (u8)__shfl_xor_sync(TF_FULL_MASK, (int)v, m);
}
__device__ __forceinline__ i16 shfl(i16 v, int m) {
  return (i16)__shfl_xor_sync(TF_FULL_MASK, (int)v, m);
}
__device__ __forceinline__ u16 shfl(u16 v, int m) {
  return (u16)__shfl_xor_sync(TF_FULL_MASK, (int)v, m);
}
template <class R> __device__ __forceinline__ complex<R> shfl(complex<R> v, int m) {
  return complex<R>(shfl(v.re, m), shfl(v.im, m));
}

// Butterfly over aligned groups of `group` lanes (a power of two <= 32). Every lane of the
// warp must call it; lane 0 of each group ends with its group's result.
template <class Op>
__device__ __forceinline__ typename Op::acc group_reduce(typename Op::acc v, int group) {
  for (int m = group >> 1; m > 0; m >>= 1) v = Op::combine(v, shfl(v, m));
  return v;
}

// Whole-block reduce (blockDim.x a multiple of 32); thread 0 ends with the result. Every
// thread of the block must call it; `smem` holds at least 32 accumulators.
template <class Op>
__device__ __forceinline__ typename Op::acc block_reduce(typename Op::acc v,
                                                         typename Op::acc* smem) {
  v = group_reduce<Op>(v, 32);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = (threadIdx.x < (blockDim.x >> 5)) ? smem[threadIdx.x] : Op::identity();
  if (warp == 0) v = group_reduce<Op>(v, 32);
  __syncthreads();  // smem may be reused right after
  return v;
}

// ---- layout offsets -------------------------------------------------------------------------
// Like offset_of / offsets_of2 (layout.cuh) but as a loop over the layout's own rank, not
// unrolled over TF_MAX_RANK: the reduction kernels take offsets once per output, run or
// row, so a smaller kernel (faster to compile, fewer registers) costs nothing measurable.
// Kernel parameters are indexed in place (ld.param), no local copy.
template <class I> __device__ __forceinline__ i64 offset(const Layout& L, I linear) {
  i64 off = L.offset;
#pragma unroll 1
  for (int d = L.ndim - 1; d >= 0; --d) {
    const I s = (I)L.shape[d];
    const I q = linear / s;
    off += (i64)(linear - q * s) * L.stride[d];
    linear = q;
  }
  return off;
}
template <class I>
__device__ __forceinline__ void offset2(const Layout& A, const Layout& B, I linear, i64& oa,
                                        i64& ob) {
  oa = A.offset;
  ob = B.offset;
#pragma unroll 1
  for (int d = A.ndim - 1; d >= 0; --d) {
    const I s = (I)A.shape[d];
    const I q = linear / s;
    const i64 i = (i64)(linear - q * s);
    oa += i * A.stride[d];
    ob += i * B.stride[d];
    linear = q;
  }
}

// ---- 16-byte vectors ---------------------------------------------------------------------
template <class T> struct __align__(16) vec16 {
  enum { n = 16 / sizeof(T) };
  T e[16 / sizeof(T)];
};

template <class Op, class T>
__device__ __forceinline__ typename Op::acc fold_vec(typename Op::acc a, const vec16<T>& v) {
#pragma unroll
  for (int i = 0; i < vec16<T>::n; ++i) a = fold<Op>(a, v.e[i]);
  return a;
}

// Elements before the next 16-byte boundary at p (p is element-aligned).
template <class T, class I> __device__ __forceinline__ I to_boundary(const T* p) {
  return (I)(((16u - ((unsigned)(unsigned long long)p & 15u)) & 15u) / sizeof(T));
}

}  // namespace rd
}  // namespace tf
