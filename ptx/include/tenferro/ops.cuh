// Elementwise op functors: the one definition of every elementwise, analytic and cast
// operation, shared by the library kernels (ptx/elementwise.cu, ptx/cast.cu) and by the
// code the fusion generator emits.
//
// Every functor F has
//   static const int arity;                          // 1, 2 or 3 operands
//   template <class T> struct types { a, b, c, out };// operand / result types over the
//                                                    // primary dtype T (default: all T)
//   template <class T> static out apply(a[, b[, c]], const Err& err);
// on *storage* types: half/bfloat16 are widened to float, computed there and rounded
// once (so + - * / sqrt match numpy/ml_dtypes bitwise); integers wrap; complex math is
// in cmath.cuh. Fallible functors (integer div/rem by zero, integer pow with a negative
// exponent) call err.raise() and return 0; `Err{nullptr, 0}` is valid for the others.
//
// Semantics (docs/dtypes.md): integer div truncates, INT_MIN / -1 wraps to INT_MIN and
// INT_MIN % -1 is 0; rem is C fmod (sign of the dividend); maximum/minimum propagate NaN
// (bool: logical or/and); sign maps NaN -> NaN, +-0 -> +-0 (as jax.lax.sign),
// complex z -> z/|z| (0 -> 0);
// abs of complex is real; compare on complex is EQ/NE only; tan, logistic, atan2 and cbrt
// of complex numbers follow the StableHLO reference formulas (tan z = -i tanh(iz),
// atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)), cbrt the principal root).
// The rounding, predicate and complex-part functors are in float_ops.cuh, the bitwise,
// shift and bit-count functors in bits.cuh (both included at the end).
#pragma once
#include "cmath.cuh"
#include "layout.cuh"

namespace tf {

struct Err {
  int* word;
  int code;
  __device__ __forceinline__ void raise() const { raise_error(word, code); }
};

template <class A, class B> struct same { static const bool value = false; };
template <class A> struct same<A, A> { static const bool value = true; };
template <class T> struct is_int { static const bool value = false; };
template <> struct is_int<i8> { static const bool value = true; };
template <> struct is_int<u8> { static const bool value = true; };
template <> struct is_int<i16> { static const bool value = true; };
template <> struct is_int<u16> { static const bool value = true; };
template <> struct is_int<i32> { static const bool value = true; };
template <> struct is_int<u32> { static const bool value = true; };
template <> struct is_int<i64> { static const bool value = true; };
template <> struct is_int<u64> { static const bool value = true; };
template <class T> struct is_sint { static const bool value = false; };
template <> struct is_sint<i8> { static const bool value = true; };
template <> struct is_sint<i16> { static const bool value = true; };
template <> struct is_sint<i32> { static const bool value = true; };
template <> struct is_sint<i64> { static const bool value = true; };
// The unsigned integer of T's width (the bits of T).
template <class T> struct uint_of { typedef T type; };
template <> struct uint_of<i8> { typedef u8 type; };
template <> struct uint_of<i16> { typedef u16 type; };
template <> struct uint_of<i32> { typedef u32 type; };
template <> struct uint_of<i64> { typedef u64 type; };
// The unsigned type integer + - * and pow wrap in (truncated to T at the end): T's own
// width, except 16 bits, whose operands C promotes to int, where a product can overflow.
template <class T> struct wrap_of { typedef typename uint_of<T>::type type; };
template <> struct wrap_of<i16> { typedef u32 type; };
template <> struct wrap_of<u16> { typedef u32 type; };

// Comparison directions (the values of tenferro_cuda.CompareDir's kernel codes).
enum { CMP_EQ = 0, CMP_NE = 1, CMP_LT = 2, CMP_LE = 3, CMP_GT = 4, CMP_GE = 5 };

namespace ew {

template <class T> __device__ __forceinline__ T add(T a, T b) {
  if constexpr (is_complex<T>::value) { return cadd(a, b); }
  else if constexpr (is_int<T>::value) { typedef typename wrap_of<T>::type U; return (T)(U)((U)a + (U)b); }
  else { return narrow<T>(widen(a) + widen(b)); }
}
template <class T> __device__ __forceinline__ T sub(T a, T b) {
  if constexpr (is_complex<T>::value) { return csub(a, b); }
  else if constexpr (is_int<T>::value) { typedef typename wrap_of<T>::type U; return (T)(U)((U)a - (U)b); }
  else { return narrow<T>(widen(a) - widen(b)); }
}
template <class T> __device__ __forceinline__ T mul(T a, T b) {
  if constexpr (is_complex<T>::value) { return cmul(a, b); }
  else if constexpr (is_int<T>::value) { typedef typename wrap_of<T>::type U; return (T)(U)((U)a * (U)b); }
  else { return narrow<T>(widen(a) * widen(b)); }
}
template <class T> __device__ __forceinline__ T neg(T a) {
  if constexpr (is_complex<T>::value) { return T(-a.re, -a.im); }
  else if constexpr (is_int<T>::value) { typedef typename wrap_of<T>::type U; return (T)(U)((U)0 - (U)a); }
  else if constexpr (is_lowp<T>::value) { T r; r.bits = (unsigned short)(a.bits ^ 0x8000u); return r; }
  else { return -a; }
}
template <class T> __device__ __forceinline__ T conj(T a) {
  if constexpr (is_complex<T>::value) { return T(a.re, -a.im); }
  else { return a; }
}
template <class T> __device__ __forceinline__ T div(T a, T b, const Err& e) {
  if constexpr (is_complex<T>::value) { return cdiv(a, b); }
  else if constexpr (is_int<T>::value) {
    if (b == T(0)) { e.raise(); return T(0); }
    if constexpr (is_sint<T>::value) { if (b == T(-1)) return neg(a); }  // INT_MIN / -1 wraps
    return (T)(a / b);
  } else { return narrow<T>(widen(a) / widen(b)); }
}
template <class T> __device__ __forceinline__ T rem(T a, T b, const Err& e) {
  if constexpr (is_int<T>::value) {
    if (b == T(0)) { e.raise(); return T(0); }
    if constexpr (is_sint<T>::value) { if (b == T(-1)) return T(0); }  // INT_MIN % -1 is 0
    return (T)(a % b);
  } else { return narrow<T>(m::fmod(widen(a), widen(b))); }
}
template <class T> __device__ __forceinline__ typename real_of<T>::type abs(T a) {
  if constexpr (is_complex<T>::value) { return cabs(a); }
  else if constexpr (is_sint<T>::value) { return a < T(0) ? neg(a) : a; }
  else if constexpr (is_int<T>::value) { return a; }
  else if constexpr (is_lowp<T>::value) { T r; r.bits = (unsigned short)(a.bits & 0x7fffu); return r; }
  else { return m::fabs(a); }
}
template <class T> __device__ __forceinline__ T sign(T a) {
  if constexpr (is_complex<T>::value) {
    typedef typename real_of<T>::type R;
    if (m::isnan(a.re) || m::isnan(a.im)) return T(m::nan<R>(), m::nan<R>());
    if (m::isinf(a.re) || m::isinf(a.im)) {
      R x = m::isinf(a.re) ? m::copysign(R(1), a.re) : R(0);
      R y = m::isinf(a.im) ? m::copysign(R(1), a.im) : R(0);
      R h = m::hypot(x, y);
      return T(x / h, y / h);
    }
    R h = cabs(a);
    if (h == R(0)) return T(R(0), R(0));
    return T(a.re / h, a.im / h);
  } else if constexpr (is_sint<T>::value) { return (T)((a > T(0)) - (a < T(0))); }
  else if constexpr (is_int<T>::value) { return (T)(a != T(0)); }
  else {
    typedef typename compute<T>::type F;
    F x = widen(a);
    F r = x > F(0) ? F(1) : (x < F(0) ? F(-1) : x);  // +-0 and NaN are returned as given
    return narrow<T>(r);
  }
}
template <class T> __device__ __forceinline__ T maximum(T a, T b) {
  if constexpr (same<T, bool>::value) { return a || b; }
  else if constexpr (is_int<T>::value) { return a >= b ? a : b; }
  else { auto x = widen(a); auto y = widen(b); return (x >= y || x != x) ? a : b; }
}
template <class T> __device__ __forceinline__ T minimum(T a, T b) {
  if constexpr (same<T, bool>::value) { return a && b; }
  else if constexpr (is_int<T>::value) { return a <= b ? a : b; }
  else { auto x = widen(a); auto y = widen(b); return (x <= y || x != x) ? a : b; }
}
template <int D, class T> __device__ __forceinline__ bool compare(T a, T b) {
  if constexpr (is_complex<T>::value) {
    static_assert(D == CMP_EQ || D == CMP_NE, "complex compare is EQ/NE only");
    bool eq = a.re == b.re && a.im == b.im;
    return D == CMP_EQ ? eq : !eq;
  } else {
    auto x = widen(a);
    auto y = widen(b);
    if constexpr (D == CMP_EQ) { return x == y; }
    else if constexpr (D == CMP_NE) { return x != y; }
    else if constexpr (D == CMP_LT) { return x < y; }
    else if constexpr (D == CMP_LE) { return x <= y; }
    else if constexpr (D == CMP_GT) { return x > y; }
    else { return x >= y; }
  }
}
template <class T> __device__ __forceinline__ T pow(T a, T b, const Err& e) {
  if constexpr (is_complex<T>::value) { return cpow(a, b); }
  else if constexpr (is_int<T>::value) {
    typedef typename wrap_of<T>::type U;
    if constexpr (is_sint<T>::value) { if (b < T(0)) { e.raise(); return T(0); } }
    U r = 1, base = (U)a, k = (U)b;
    while (k) {
      if (k & 1u) r = (U)(r * base);
      base = (U)(base * base);
      k >>= 1;
    }
    return (T)r;
  } else { return narrow<T>(m::pow(widen(a), widen(b))); }
}

__device__ __forceinline__ float cbrt_of(float x) { return cbrtf(x); }
__device__ __forceinline__ double cbrt_of(double x) { return ::cbrt(x); }

// Analytic functions of float and complex dtypes (half/bfloat16 through float).
#define TF_ANALYTIC(NAME, REAL, CPLX)                                                    \
  template <class T> __device__ __forceinline__ T NAME(T a) {                            \
    if constexpr (is_complex<T>::value) { return CPLX(a); }                             \
    else { typedef typename compute<T>::type F; F x = widen(a); return narrow<T>(REAL); } \
  }
TF_ANALYTIC(exp, m::exp(x), cexp)
TF_ANALYTIC(log, m::log(x), clog)
TF_ANALYTIC(sin, m::sin(x), csin)
TF_ANALYTIC(cos, m::cos(x), ccos)
TF_ANALYTIC(tanh, m::tanh(x), ctanh)
TF_ANALYTIC(sqrt, m::sqrt(x), csqrt)
TF_ANALYTIC(rsqrt, F(1) / m::sqrt(x), crsqrt)
TF_ANALYTIC(expm1, m::expm1(x), cexpm1)
TF_ANALYTIC(log1p, m::log1p(x), clog1p)
#undef TF_ANALYTIC

template <class T> __device__ __forceinline__ T tan(T a) {
  if constexpr (is_complex<T>::value) {
    T w = ctanh(T(-a.im, a.re));  // tan z = -i tanh(i z)
    return T(w.im, -w.re);
  } else { return narrow<T>(m::tan(widen(a))); }
}
template <class T> __device__ __forceinline__ T logistic(T a) {
  if constexpr (is_complex<T>::value) {
    typedef typename real_of<T>::type R;
    const T one(R(1), R(0));
    return cdiv(one, cadd(one, cexp(T(-a.re, -a.im))));
  } else {
    typedef typename compute<T>::type F;
    return narrow<T>(F(1) / (F(1) + m::exp(-widen(a))));
  }
}
// atan2(y, x): the angle of the point (x, y).
template <class T> __device__ __forceinline__ T atan2(T y, T x) {
  if constexpr (is_complex<T>::value) {
    T r = csqrt(cadd(cmul(x, x), cmul(y, y)));
    T l = clog(cdiv(cadd(x, T(-y.im, y.re)), r));
    return T(l.im, -l.re);  // -i * l
  } else { return narrow<T>(m::atan2(widen(y), widen(x))); }
}
template <class T> __device__ __forceinline__ T cbrt(T a) {
  if constexpr (is_complex<T>::value) {
    typedef typename real_of<T>::type R;
    const R r = cbrt_of(cabs(a));
    R s, c;
    m::sincos(m::atan2(a.im, a.re) / R(3), &s, &c);
    return T(r * c, r * s);
  } else { return narrow<T>(cbrt_of(widen(a))); }
}

// int64 -> bfloat16 rounded once (tf::convert goes through double: two roundings).
// Round to odd into float (24 bits >= 2*8 + 2), then to nearest even.
__device__ __forceinline__ bfloat16 i64_to_bf16(i64 v) {
  float f = __ll2float_rz(v);
  if (__float2ll_rz(f) != v) f = __uint_as_float(__float_as_uint(f) | 1u);
  return make_bf16(f);
}
template <class To, class From> __device__ __forceinline__ To cast(From v) {
  if constexpr (same<To, bfloat16>::value && same<From, i64>::value) { return i64_to_bf16(v); }
  else { return convert<To>(v); }
}

}  // namespace ew

// ---- functors ------------------------------------------------------------------------
template <int N> struct OpBase {
  static const int arity = N;
  template <class T> struct types { typedef T a; typedef T b; typedef T c; typedef T out; };
};

#define TF_FUNCTOR1(NAME, FN)                                                          \
  struct NAME : OpBase<1> {                                                            \
    template <class T> static __device__ __forceinline__ T apply(T a, const Err&) {    \
      return ew::FN(a);                                                                \
    }                                                                                  \
  };
#define TF_FUNCTOR2(NAME, FN)                                                          \
  struct NAME : OpBase<2> {                                                            \
    template <class T> static __device__ __forceinline__ T apply(T a, T b, const Err&) { \
      return ew::FN(a, b);                                                             \
    }                                                                                  \
  };
#define TF_FUNCTOR2E(NAME, FN)                                                         \
  struct NAME : OpBase<2> {                                                            \
    template <class T> static __device__ __forceinline__ T apply(T a, T b, const Err& e) { \
      return ew::FN(a, b, e);                                                          \
    }                                                                                  \
  };

TF_FUNCTOR2(AddOp, add)
TF_FUNCTOR2(SubOp, sub)
TF_FUNCTOR2(MulOp, mul)
TF_FUNCTOR2E(DivOp, div)
TF_FUNCTOR2E(RemOp, rem)
TF_FUNCTOR2E(PowOp, pow)
TF_FUNCTOR2(MaxOp, maximum)
TF_FUNCTOR2(MinOp, minimum)
TF_FUNCTOR1(NegOp, neg)
TF_FUNCTOR1(ConjOp, conj)
TF_FUNCTOR1(SignOp, sign)
TF_FUNCTOR1(ExpOp, exp)
TF_FUNCTOR1(LogOp, log)
TF_FUNCTOR1(SinOp, sin)
TF_FUNCTOR1(CosOp, cos)
TF_FUNCTOR1(TanhOp, tanh)
TF_FUNCTOR1(SqrtOp, sqrt)
TF_FUNCTOR1(RsqrtOp, rsqrt)
TF_FUNCTOR1(Expm1Op, expm1)
TF_FUNCTOR1(Log1pOp, log1p)
TF_FUNCTOR1(TanOp, tan)
TF_FUNCTOR1(LogisticOp, logistic)
TF_FUNCTOR1(CbrtOp, cbrt)
TF_FUNCTOR2(Atan2Op, atan2)
#undef TF_FUNCTOR1
#undef TF_FUNCTOR2
#undef TF_FUNCTOR2E

struct AbsOp : OpBase<1> {
  template <class T> struct types { typedef T a; typedef T b; typedef T c; typedef typename real_of<T>::type out; };
  template <class T> static __device__ __forceinline__ typename real_of<T>::type apply(T a, const Err&) {
    return ew::abs(a);
  }
};

template <int D> struct CmpOp : OpBase<2> {
  template <class T> struct types { typedef T a; typedef T b; typedef T c; typedef bool out; };
  template <class T> static __device__ __forceinline__ bool apply(T a, T b, const Err&) {
    return ew::compare<D>(a, b);
  }
};

// select(pred, on_true, on_false): the primary dtype T is that of the two branches.
struct SelectOp : OpBase<3> {
  template <class T> struct types { typedef bool a; typedef T b; typedef T c; typedef T out; };
  template <class T> static __device__ __forceinline__ T apply(bool p, T t, T f, const Err&) {
    return p ? t : f;
  }
};

// clamp(x, lo, hi) = minimum(maximum(x, lo), hi): NaN anywhere propagates.
struct ClampOp : OpBase<3> {
  template <class T> static __device__ __forceinline__ T apply(T x, T lo, T hi, const Err&) {
    return ew::minimum(ew::maximum(x, lo), hi);
  }
};

// cast to To (the projection of docs/dtypes.md); the primary dtype is the source's.
template <class To> struct CastOp : OpBase<1> {
  template <class T> struct types { typedef T a; typedef T b; typedef T c; typedef To out; };
  template <class T> static __device__ __forceinline__ To apply(T v, const Err&) {
    return ew::cast<To>(v);
  }
};

}  // namespace tf

#include "float_ops.cuh"
#include "bits.cuh"
