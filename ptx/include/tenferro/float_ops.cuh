// Rounding, predicate and complex-part functors of the elementwise family (StableHLO
// floor, ceil, round_nearest_even, round_nearest_afz, is_finite, real, imag, complex).
// Included by ops.cuh, whose conventions they follow (docs/dtypes.md):
// - the roundings take real floats and are exact: half/bfloat16 are widened to float and
//   rounded there, and every integral value of a half/bfloat16 is one of that type, so
//   narrowing back never rounds; -0.0, +-inf and NaN are returned as given, and results
//   keep the sign of their input (floor(-0.5) == -1, ceil(-0.5) == -0.0);
// - is_finite(x) is false for +-inf and NaN (real floats only; result bool);
// - real(x) / imag(x) take real floats and complex numbers and give the real dtype (for
//   a real float: x and +0.0); complex(re, im) takes float32 or float64 operands.
#pragma once
#include "ops.cuh"

namespace tf {
namespace m {  // more of cmath.cuh's per-precision wrappers
__device__ __forceinline__ float floor(float x) { return floorf(x); }
__device__ __forceinline__ double floor(double x) { return ::floor(x); }
__device__ __forceinline__ float ceil(float x) { return ceilf(x); }
__device__ __forceinline__ double ceil(double x) { return ::ceil(x); }
__device__ __forceinline__ float rint(float x) { return rintf(x); }    // ties to even
__device__ __forceinline__ double rint(double x) { return ::rint(x); }
__device__ __forceinline__ float round(float x) { return roundf(x); }  // ties away from 0
__device__ __forceinline__ double round(double x) { return ::round(x); }
__device__ __forceinline__ bool isfinite(float x) { return ::isfinite(x); }
__device__ __forceinline__ bool isfinite(double x) { return ::isfinite(x); }
}  // namespace m

namespace ew {
#define TF_ROUNDING(NAME, FN)                                                           \
  template <class T> __device__ __forceinline__ T NAME(T a) {                           \
    return narrow<T>(m::FN(widen(a)));                                                  \
  }
TF_ROUNDING(floor, floor)
TF_ROUNDING(ceil, ceil)
TF_ROUNDING(round_even, rint)
TF_ROUNDING(round_afz, round)
#undef TF_ROUNDING
}  // namespace ew

#define TF_FUNCTOR_ROUND(NAME, FN)                                                      \
  struct NAME : OpBase<1> {                                                             \
    template <class T> static __device__ __forceinline__ T apply(T a, const Err&) {     \
      return ew::FN(a);                                                                 \
    }                                                                                   \
  };
TF_FUNCTOR_ROUND(FloorOp, floor)
TF_FUNCTOR_ROUND(CeilOp, ceil)
TF_FUNCTOR_ROUND(RoundEvenOp, round_even)
TF_FUNCTOR_ROUND(RoundAfzOp, round_afz)
#undef TF_FUNCTOR_ROUND

struct IsFiniteOp : OpBase<1> {
  template <class T> struct types { typedef T a; typedef T b; typedef T c; typedef bool out; };
  template <class T> static __device__ __forceinline__ bool apply(T a, const Err&) {
    return m::isfinite(widen(a));
  }
};

struct RealOp : OpBase<1> {
  template <class T> struct types {
    typedef T a; typedef T b; typedef T c; typedef typename real_of<T>::type out;
  };
  template <class T>
  static __device__ __forceinline__ typename real_of<T>::type apply(T a, const Err&) {
    if constexpr (is_complex<T>::value) { return a.re; }
    else { return a; }
  }
};

struct ImagOp : OpBase<1> {
  template <class T> struct types {
    typedef T a; typedef T b; typedef T c; typedef typename real_of<T>::type out;
  };
  template <class T>
  static __device__ __forceinline__ typename real_of<T>::type apply(T a, const Err&) {
    if constexpr (is_complex<T>::value) { return a.im; }
    else { return narrow<T>(typename compute<T>::type(0)); }
  }
};

// complex(re, im): the primary dtype T is the real one (float or double).
struct ComplexOp : OpBase<2> {
  template <class T> struct types {
    typedef T a; typedef T b; typedef T c; typedef complex<T> out;
  };
  template <class T> static __device__ __forceinline__ complex<T> apply(T re, T im, const Err&) {
    return complex<T>(re, im);
  }
};

}  // namespace tf
