// Indexing helpers shared by gather.cu, scatter.cu and slicing.cu:
// - IndexMap: how the k components of an index vector (read from an int32/int64 tensor on
//   the device) become an operand offset, clamped (gather, dynamic slices) or checked
//   (scatter skips windows that do not fit);
// - Geometry: the map from a result/update linear index to the operand offset (a), the
//   index-tensor offset (b) and a window key (c): three layouts of the coalesced shape;
// - read-only loads of storage units and CAS-based atomics for 8/16-bit types (no
//   cuda_fp16.h: half and bfloat16 are updated through the 32-bit word that holds them).
// Every helper is force-inlined and indexes parameter arrays with unrolled constant
// indices, so kernel parameters stay in parameter space.
#pragma once
#include "layout.cuh"

namespace tf {

struct IndexMap {
  i64 stride[TF_MAX_RANK];  // operand stride (elements or units) of component k
  i64 hi[TF_MAX_RANK];      // component k must lie in [0, hi[k]] (clamped or checked)
  i64 ivs;                  // stride between the components of one index vector
  i32 k;                    // number of components (0..TF_MAX_RANK)
  i32 wide;                 // 1: int64 indices, 0: int32 indices
};

struct Geometry {
  Layout a, b, c;
};

__device__ __forceinline__ i64 load_index(const void* p, i64 off, int wide) {
  return wide ? (i64)__ldg((const long long*)p + off) : (i64)__ldg((const int*)p + off);
}

__device__ __forceinline__ i64 clamp_index(i64 v, i64 hi) {
  return v < 0 ? 0 : (v > hi ? hi : v);
}

// sum_k clamp(idx[ioff + k * ivs], 0, hi[k]) * stride[k]
__device__ __forceinline__ i64 clamped_start(const IndexMap& m, const void* idx, i64 ioff) {
  i64 off = 0;
#pragma unroll
  for (int k = 0; k < TF_MAX_RANK; ++k) {
    if (k < m.k) off += clamp_index(load_index(idx, ioff + k * m.ivs, m.wide), m.hi[k]) * m.stride[k];
  }
  return off;
}

// Unclamped; false when a component lies outside [0, hi[k]] (the window does not fit).
__device__ __forceinline__ bool checked_start(const IndexMap& m, const void* idx, i64 ioff,
                                              i64& off) {
  off = 0;
  bool ok = true;
#pragma unroll
  for (int k = 0; k < TF_MAX_RANK; ++k) {
    if (k < m.k) {
      const i64 v = load_index(idx, ioff + k * m.ivs, m.wide);
      ok = ok && v >= 0 && v <= m.hi[k];
      off += v * m.stride[k];
    }
  }
  return ok;
}

// Offsets in three layouts of equal shape (one division chain).
template <class I>
__device__ __forceinline__ void offsets_of3(const Layout& A, const Layout& B, const Layout& C,
                                            I linear, i64& oa, i64& ob, i64& oc) {
  oa = A.offset;
  ob = B.offset;
  oc = C.offset;
#pragma unroll
  for (int d = TF_MAX_RANK - 1; d >= 0; --d) {
    if (d < A.ndim) {
      I s = (I)A.shape[d];
      I q = linear / s;
      i64 i = (i64)(linear - q * s);
      oa += i * A.stride[d];
      ob += i * B.stride[d];
      oc += i * C.stride[d];
      linear = q;
    }
  }
}

// (a, b[, c]) of linear index i; c only when KEY.
template <class I, bool KEY>
__device__ __forceinline__ void geometry_offsets(const Geometry& g, I i, i64& a, i64& b, i64& c) {
  c = 0;
  if (KEY) offsets_of3<I>(g.a, g.b, g.c, i, a, b, c);
  else offsets_of2<I>(g.a, g.b, i, a, b);
}

// Row offsets with 32-bit division when the row count allows it.
__device__ __forceinline__ void row_offsets(const Layout& A, const Layout& B, i64 r, i64 rows,
                                            i64& oa, i64& ob) {
  if (rows <= 0xffffffffll) offsets_of2<u32>(A, B, (u32)r, oa, ob);
  else offsets_of2<u64>(A, B, (u64)r, oa, ob);
}

// ---- read-only loads of storage units ---------------------------------------------------
template <class S> __device__ __forceinline__ S ldg(const S* p) { return __ldg(p); }
template <> __device__ __forceinline__ b128 ldg<b128>(const b128* p) {
  const ulonglong2 v = __ldg((const ulonglong2*)p);
  b128 r;
  r.lo = v.x;
  r.hi = v.y;
  return r;
}

// ---- bit views of 8/16-bit values -------------------------------------------------------
template <class T> struct bits16;
template <> struct bits16<half> {
  static __device__ __forceinline__ u32 get(half v) { return v.bits; }
  static __device__ __forceinline__ half make(u32 b) { half h; h.bits = (unsigned short)b; return h; }
};
template <> struct bits16<bfloat16> {
  static __device__ __forceinline__ u32 get(bfloat16 v) { return v.bits; }
  static __device__ __forceinline__ bfloat16 make(u32 b) { bfloat16 h; h.bits = (unsigned short)b; return h; }
};
template <> struct bits16<signed char> {
  static __device__ __forceinline__ u32 get(signed char v) { return (u32)(unsigned char)v; }
  static __device__ __forceinline__ signed char make(u32 b) { return (signed char)(unsigned char)b; }
};
template <> struct bits16<unsigned char> {
  static __device__ __forceinline__ u32 get(unsigned char v) { return v; }
  static __device__ __forceinline__ unsigned char make(u32 b) { return (unsigned char)b; }
};
template <> struct bits16<short> {
  static __device__ __forceinline__ u32 get(short v) { return (u32)(unsigned short)v; }
  static __device__ __forceinline__ short make(u32 b) { return (short)(unsigned short)b; }
};
template <> struct bits16<unsigned short> {
  static __device__ __forceinline__ u32 get(unsigned short v) { return v; }
  static __device__ __forceinline__ unsigned short make(u32 b) { return (unsigned short)b; }
};

// *p = f(*p) atomically for a 1- or 2-byte T, by CAS on the aligned 32-bit word holding it.
// Output buffers of 1/2-byte dtypes are allocated to a multiple of 4 bytes by the host.
template <class T, class F>
__device__ __forceinline__ void atomic_subword(T* p, F f) {
  const unsigned long long addr = (unsigned long long)p;
  u32* w = (u32*)(addr & ~3ull);
  const u32 shift = (u32)(addr & 3ull) * 8u;
  const u32 mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
  u32 old = *(volatile u32*)w, assumed;
  do {
    assumed = old;
    const T cur = bits16<T>::make((assumed & mask) >> shift);
    const u32 upd = (assumed & ~mask) | ((bits16<T>::get(f(cur)) << shift) & mask);
    if (upd == assumed) return;
    old = atomicCAS(w, assumed, upd);
  } while (old != assumed);
}

template <class F>
__device__ __forceinline__ void atomic_f32(float* p, F f) {
  u32* w = (u32*)p;
  u32 old = *(volatile u32*)w, assumed;
  do {
    assumed = old;
    const u32 upd = __float_as_uint(f(__uint_as_float(assumed)));
    if (upd == assumed) return;
    old = atomicCAS(w, assumed, upd);
  } while (old != assumed);
}

template <class F>
__device__ __forceinline__ void atomic_f64(double* p, F f) {
  u64* w = (u64*)p;
  u64 old = *(volatile u64*)w, assumed;
  do {
    assumed = old;
    const u64 upd = (u64)__double_as_longlong(f(__longlong_as_double((long long)assumed)));
    if (upd == assumed) return;
    old = atomicCAS(w, assumed, upd);
  } while (old != assumed);
}

// ---- ordered combine: NaN propagates, +0 is above -0 (so the result is order-free) ------
__device__ __forceinline__ bool neg_bit(float v) { return (__float_as_uint(v) >> 31) != 0; }
__device__ __forceinline__ bool neg_bit(double v) { return __double_as_longlong(v) < 0; }

template <class R> __device__ __forceinline__ R max_of(R a, R b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return neg_bit(a) ? b : a;
  return a > b ? a : b;
}
template <class R> __device__ __forceinline__ R min_of(R a, R b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return neg_bit(a) ? a : b;
  return a < b ? a : b;
}
template <class T> __device__ __forceinline__ T imax(T a, T b) { return a > b ? a : b; }
template <class T> __device__ __forceinline__ T imin(T a, T b) { return a < b ? a : b; }

// ---- atomic add / max / min per dtype ---------------------------------------------------
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(unsigned int* p, unsigned int v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v);  // two's complement wraps
}
__device__ __forceinline__ void atomic_add(unsigned long long* p, unsigned long long v) {
  atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(signed char* p, signed char v) {
  atomic_subword(p, [v](signed char c) { return (signed char)(unsigned char)((unsigned)c + (unsigned)v); });
}
__device__ __forceinline__ void atomic_add(unsigned char* p, unsigned char v) {
  atomic_subword(p, [v](unsigned char c) { return (unsigned char)(c + v); });
}
__device__ __forceinline__ void atomic_add(short* p, short v) {
  atomic_subword(p, [v](short c) { return (short)(unsigned short)((unsigned)c + (unsigned)v); });
}
__device__ __forceinline__ void atomic_add(unsigned short* p, unsigned short v) {
  atomic_subword(p, [v](unsigned short c) { return (unsigned short)((unsigned)c + (unsigned)v); });
}
__device__ __forceinline__ void atomic_add(half* p, half v) {
  atomic_subword(p, [v](half c) { return make_half(to_f32(c) + to_f32(v)); });
}
__device__ __forceinline__ void atomic_add(bfloat16* p, bfloat16 v) {
  atomic_subword(p, [v](bfloat16 c) { return make_bf16(to_f32(c) + to_f32(v)); });
}
template <class R> __device__ __forceinline__ void atomic_add(complex<R>* p, complex<R> v) {
  atomic_add(&p->re, v.re);  // per component: each part is an independent sum
  atomic_add(&p->im, v.im);
}

__device__ __forceinline__ void atomic_max(int* p, int v) { atomicMax(p, v); }
__device__ __forceinline__ void atomic_min(int* p, int v) { atomicMin(p, v); }
__device__ __forceinline__ void atomic_max(long long* p, long long v) { atomicMax(p, v); }
__device__ __forceinline__ void atomic_min(long long* p, long long v) { atomicMin(p, v); }
__device__ __forceinline__ void atomic_max(unsigned int* p, unsigned int v) { atomicMax(p, v); }
__device__ __forceinline__ void atomic_min(unsigned int* p, unsigned int v) { atomicMin(p, v); }
__device__ __forceinline__ void atomic_max(unsigned long long* p, unsigned long long v) {
  atomicMax(p, v);
}
__device__ __forceinline__ void atomic_min(unsigned long long* p, unsigned long long v) {
  atomicMin(p, v);
}
__device__ __forceinline__ void atomic_max(float* p, float v) {
  atomic_f32(p, [v](float c) { return max_of(c, v); });
}
__device__ __forceinline__ void atomic_min(float* p, float v) {
  atomic_f32(p, [v](float c) { return min_of(c, v); });
}
__device__ __forceinline__ void atomic_max(double* p, double v) {
  atomic_f64(p, [v](double c) { return max_of(c, v); });
}
__device__ __forceinline__ void atomic_min(double* p, double v) {
  atomic_f64(p, [v](double c) { return min_of(c, v); });
}
template <class T> __device__ __forceinline__ void atomic_max(T* p, T v) {  // 8/16-bit ints
  atomic_subword(p, [v](T c) { return imax(c, v); });
}
template <class T> __device__ __forceinline__ void atomic_min(T* p, T v) {
  atomic_subword(p, [v](T c) { return imin(c, v); });
}
__device__ __forceinline__ void atomic_max(half* p, half v) {
  atomic_subword(p, [v](half c) { return make_half(max_of(to_f32(c), to_f32(v))); });
}
__device__ __forceinline__ void atomic_min(half* p, half v) {
  atomic_subword(p, [v](half c) { return make_half(min_of(to_f32(c), to_f32(v))); });
}
__device__ __forceinline__ void atomic_max(bfloat16* p, bfloat16 v) {
  atomic_subword(p, [v](bfloat16 c) { return make_bf16(max_of(to_f32(c), to_f32(v))); });
}
__device__ __forceinline__ void atomic_min(bfloat16* p, bfloat16 v) {
  atomic_subword(p, [v](bfloat16 c) { return make_bf16(min_of(to_f32(c), to_f32(v))); });
}

}  // namespace tf
