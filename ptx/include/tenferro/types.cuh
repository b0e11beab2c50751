// tenferro_cuda device types: fixed-width aliases, half/bfloat16 storage types with exact
// conversions (no CUDA toolkit headers needed, so NVRTC compiles them anywhere),
// complex<R>, and tf::convert<To>(from) implementing the `cast` projection rules
// (docs/dtypes.md): float->int truncates toward zero and saturates, NaN -> 0;
// complex->real drops the imaginary part; numeric->bool is != 0.
#pragma once

namespace tf {

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// The first statement of every library kernel (docs/graphs.md, "Programmatic edges"): in
// a replayed graph, an edge from another kernel into this one may be programmatic (sm_90
// and later), so that this grid is launched while its predecessor finishes; this waits
// until every predecessor grid has completed and its writes are visible. A kernel
// launched any other way returns from it at once. Nothing may touch memory before it.
__device__ __forceinline__ void grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

struct __align__(2) half { unsigned short bits; };
struct __align__(16) b128 { u64 lo, hi; };  // 16-byte storage unit
struct __align__(2) bfloat16 { unsigned short bits; };

template <class R>
struct __align__(2 * sizeof(R)) complex {
  R re, im;
  __device__ __forceinline__ complex() {}
  __device__ __forceinline__ complex(R r, R i) : re(r), im(i) {}
};

__device__ __forceinline__ float to_f32(half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ float to_f32(bfloat16 b) {
  return __uint_as_float(((unsigned)b.bits) << 16);
}
__device__ __forceinline__ half make_half(float f) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
__device__ __forceinline__ half make_half(double d) {
  half h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
  return h;
}
__device__ __forceinline__ bfloat16 make_bf16(float f) {
  bfloat16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
  return b;
}
// double -> bfloat16 rounded once: round to odd into float (24 bits >= 2*8+2), then RNE.
__device__ __forceinline__ bfloat16 make_bf16(double d) {
  float f = __double2float_rz(d);
  if (d == d && (double)f != d && !isinf(f)) {
    f = __uint_as_float(__float_as_uint(f) | 1u);
  }
  return make_bf16(f);
}

// ---- traits --------------------------------------------------------------------------
template <class T> struct is_complex { static const bool value = false; };
template <class R> struct is_complex<complex<R> > { static const bool value = true; };
template <class T> struct is_lowp { static const bool value = false; };
template <> struct is_lowp<half> { static const bool value = true; };
template <> struct is_lowp<bfloat16> { static const bool value = true; };
template <class T> struct is_float { static const bool value = false; };
template <> struct is_float<half> { static const bool value = true; };
template <> struct is_float<bfloat16> { static const bool value = true; };
template <> struct is_float<float> { static const bool value = true; };
template <> struct is_float<double> { static const bool value = true; };

// The type arithmetic on T is carried out in: float for half/bfloat16, T otherwise.
template <class T> struct compute { typedef T type; };
template <> struct compute<half> { typedef float type; };
template <> struct compute<bfloat16> { typedef float type; };

template <class T> struct real_of { typedef T type; };
template <class R> struct real_of<complex<R> > { typedef R type; };

template <class T> struct limits;
template <> struct limits<i8> { static __device__ i8 lo() { return -128; } static __device__ i8 hi() { return 127; } };
template <> struct limits<u8> { static __device__ u8 lo() { return 0; } static __device__ u8 hi() { return 255; } };
template <> struct limits<i16> { static __device__ i16 lo() { return -32768; } static __device__ i16 hi() { return 32767; } };
template <> struct limits<u16> { static __device__ u16 lo() { return 0; } static __device__ u16 hi() { return 65535; } };
template <> struct limits<i32> { static __device__ i32 lo() { return (-2147483647 - 1); } static __device__ i32 hi() { return 2147483647; } };
template <> struct limits<u32> { static __device__ u32 lo() { return 0u; } static __device__ u32 hi() { return 4294967295u; } };
template <> struct limits<i64> { static __device__ i64 lo() { return (-9223372036854775807LL - 1); } static __device__ i64 hi() { return 9223372036854775807LL; } };
template <> struct limits<u64> { static __device__ u64 lo() { return 0ull; } static __device__ u64 hi() { return 18446744073709551615ull; } };

// ---- load/store in the compute type ---------------------------------------------------
template <class T> __device__ __forceinline__ typename compute<T>::type widen(T v) { return v; }
template <> __device__ __forceinline__ float widen<half>(half v) { return to_f32(v); }
template <> __device__ __forceinline__ float widen<bfloat16>(bfloat16 v) { return to_f32(v); }

template <class T> __device__ __forceinline__ T narrow(typename compute<T>::type v) { return v; }
template <> __device__ __forceinline__ half narrow<half>(float v) { return make_half(v); }
template <> __device__ __forceinline__ bfloat16 narrow<bfloat16>(float v) { return make_bf16(v); }

// ---- cast: every pair of the 15 dtypes -------------------------------------------------
// Classify the source as a double (real part) and imaginary part, then project.
template <class From> struct parts {
  static __device__ __forceinline__ double re(From v) { return (double)v; }
  static __device__ __forceinline__ double im(From) { return 0.0; }
  static __device__ __forceinline__ bool nonzero(From v) { return v != From(0); }
};
template <> struct parts<bool> {
  static __device__ __forceinline__ double re(bool v) { return v ? 1.0 : 0.0; }
  static __device__ __forceinline__ double im(bool) { return 0.0; }
  static __device__ __forceinline__ bool nonzero(bool v) { return v; }
};
template <> struct parts<half> {
  static __device__ __forceinline__ double re(half v) { return (double)to_f32(v); }
  static __device__ __forceinline__ double im(half) { return 0.0; }
  static __device__ __forceinline__ bool nonzero(half v) { return to_f32(v) != 0.0f; }
};
template <> struct parts<bfloat16> {
  static __device__ __forceinline__ double re(bfloat16 v) { return (double)to_f32(v); }
  static __device__ __forceinline__ double im(bfloat16) { return 0.0; }
  static __device__ __forceinline__ bool nonzero(bfloat16 v) { return to_f32(v) != 0.0f; }
};
template <class R> struct parts<complex<R> > {
  static __device__ __forceinline__ double re(complex<R> v) { return (double)v.re; }
  static __device__ __forceinline__ double im(complex<R> v) { return (double)v.im; }
  static __device__ __forceinline__ bool nonzero(complex<R> v) { return v.re != R(0) || v.im != R(0); }
};

// float -> integer: truncate toward zero, saturate, NaN -> 0. (double)hi() of a 64-bit
// integer rounds up to 2^63 / 2^64, so every double below it converts exactly.
template <class I> __device__ __forceinline__ I sat_int(double d) {
  if (d != d) return I(0);
  if (d <= (double)limits<I>::lo()) return limits<I>::lo();
  if (d >= (double)limits<I>::hi()) return limits<I>::hi();
  return (I)d;
}

template <class To> struct caster {
  template <class From> static __device__ __forceinline__ To from(From v) {
    return (To)v;  // integer <-> integer wraps as in C; used only for integer/bool sources
  }
};

template <class To, class From>
__device__ __forceinline__ To convert(From v);

template <class From, class To, bool SrcFloat>
struct int_target {
  static __device__ __forceinline__ To go(From v) { return sat_int<To>(parts<From>::re(v)); }
};
template <class From, class To>
struct int_target<From, To, false> {
  static __device__ __forceinline__ To go(From v) { return (To)v; }
};

template <class To> struct conv;
#define TF_INT_CONV(I)                                                                  \
  template <> struct conv<I> {                                                          \
    template <class From> static __device__ __forceinline__ I go(From v) {              \
      return int_target<From, I, is_float<From>::value || is_complex<From>::value>::go(v); \
    }                                                                                   \
  };
TF_INT_CONV(i8)
TF_INT_CONV(u8)
TF_INT_CONV(i16)
TF_INT_CONV(u16)
TF_INT_CONV(i32)
TF_INT_CONV(u32)
TF_INT_CONV(i64)
TF_INT_CONV(u64)
#undef TF_INT_CONV

template <> struct conv<bool> {
  template <class From> static __device__ __forceinline__ bool go(From v) { return parts<From>::nonzero(v); }
};
template <> struct conv<float> {
  template <class From> static __device__ __forceinline__ float go(From v) { return (float)parts<From>::re(v); }
  static __device__ __forceinline__ float go(float v) { return v; }
  static __device__ __forceinline__ float go(half v) { return to_f32(v); }
  static __device__ __forceinline__ float go(bfloat16 v) { return to_f32(v); }
  static __device__ __forceinline__ float go(i64 v) { return (float)v; }
  static __device__ __forceinline__ float go(u64 v) { return (float)v; }  // once, not via double
  static __device__ __forceinline__ float go(i32 v) { return (float)v; }
  static __device__ __forceinline__ float go(u32 v) { return (float)v; }
  static __device__ __forceinline__ float go(complex<float> v) { return v.re; }
};
template <> struct conv<double> {
  template <class From> static __device__ __forceinline__ double go(From v) { return parts<From>::re(v); }
};
template <> struct conv<half> {
  template <class From> static __device__ __forceinline__ half go(From v) { return make_half(parts<From>::re(v)); }
  static __device__ __forceinline__ half go(half v) { return v; }
  static __device__ __forceinline__ half go(float v) { return make_half(v); }
  static __device__ __forceinline__ half go(complex<float> v) { return make_half(v.re); }
};
template <> struct conv<bfloat16> {
  template <class From> static __device__ __forceinline__ bfloat16 go(From v) { return make_bf16(parts<From>::re(v)); }
  static __device__ __forceinline__ bfloat16 go(bfloat16 v) { return v; }
  static __device__ __forceinline__ bfloat16 go(float v) { return make_bf16(v); }
  // int64 rounded once: toward zero into float, sticky bit when inexact, then RNE.
  static __device__ __forceinline__ bfloat16 go(i64 v) {
    float f = __ll2float_rz(v);
    if (__float2ll_rz(f) != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return make_bf16(f);
  }
  static __device__ __forceinline__ bfloat16 go(u64 v) {  // the same for uint64
    float f = __ull2float_rz(v);
    if (__float2ull_rz(f) != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return make_bf16(f);
  }
  static __device__ __forceinline__ bfloat16 go(complex<float> v) { return make_bf16(v.re); }
};
template <class R> struct conv<complex<R> > {
  template <class From> static __device__ __forceinline__ complex<R> go(From v) {
    return complex<R>((R)conv<R>::go(v), R(0));
  }
  template <class S> static __device__ __forceinline__ complex<R> go(complex<S> v) {
    return complex<R>((R)v.re, (R)v.im);
  }
};

template <class To, class From>
__device__ __forceinline__ To convert(From v) { return conv<To>::go(v); }

}  // namespace tf
