// Real and complex math for the elementwise and analytic kernels.
//
// `tf::m::` wraps the CUDA math library per real type (float -> expf, double -> exp, ...),
// so templates over R = float/double call the right precision. The complex functions
// follow the textbook / FreeBSD msun formulations that numpy's npymath also uses (Smith's
// division, Kahan's tanh, the robust square root, log with log1p near |z| = 1, pow with
// exact binary powering for small integral real exponents), so complex64/complex128
// results agree with numpy to a few ulps for finite arguments. Special values (inf/nan)
// of the complex transcendental functions are not guaranteed to follow C99 Annex G.
#pragma once
#include "types.cuh"

namespace tf {
namespace m {

#define TF_M1(NAME, FN_F, FN_D)                                                        \
  __device__ __forceinline__ float NAME(float x) { return FN_F(x); }                  \
  __device__ __forceinline__ double NAME(double x) { return FN_D(x); }
#define TF_M2(NAME, FN_F, FN_D)                                                        \
  __device__ __forceinline__ float NAME(float x, float y) { return FN_F(x, y); }      \
  __device__ __forceinline__ double NAME(double x, double y) { return FN_D(x, y); }

TF_M1(exp, expf, ::exp)
TF_M1(log, logf, ::log)
TF_M1(sin, sinf, ::sin)
TF_M1(cos, cosf, ::cos)
TF_M1(tan, tanf, ::tan)
TF_M1(sinh, sinhf, ::sinh)
TF_M1(cosh, coshf, ::cosh)
TF_M1(tanh, tanhf, ::tanh)
TF_M1(sqrt, sqrtf, ::sqrt)
TF_M1(expm1, expm1f, ::expm1)
TF_M1(log1p, log1pf, ::log1p)
TF_M1(fabs, fabsf, ::fabs)
TF_M2(hypot, hypotf, ::hypot)
TF_M2(atan2, atan2f, ::atan2)
TF_M2(pow, powf, ::pow)
TF_M2(fmod, fmodf, ::fmod)
TF_M2(copysign, copysignf, ::copysign)
#undef TF_M1
#undef TF_M2

__device__ __forceinline__ void sincos(float x, float* s, float* c) { ::sincosf(x, s, c); }
__device__ __forceinline__ void sincos(double x, double* s, double* c) { ::sincos(x, s, c); }
__device__ __forceinline__ bool isnan(float x) { return x != x; }
__device__ __forceinline__ bool isnan(double x) { return x != x; }
__device__ __forceinline__ bool isinf(float x) { return ::isinf(x); }
__device__ __forceinline__ bool isinf(double x) { return ::isinf(x); }

template <class R> __device__ __forceinline__ R inf() { return R(1) / R(0); }
template <class R> __device__ __forceinline__ R nan() { return R(0) / R(0); }

}  // namespace m

// ---- complex arithmetic --------------------------------------------------------------
template <class R>
__device__ __forceinline__ complex<R> cadd(complex<R> a, complex<R> b) {
  return complex<R>(a.re + b.re, a.im + b.im);
}
template <class R>
__device__ __forceinline__ complex<R> csub(complex<R> a, complex<R> b) {
  return complex<R>(a.re - b.re, a.im - b.im);
}
template <class R>
__device__ __forceinline__ complex<R> cmul(complex<R> a, complex<R> b) {
  return complex<R>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
// Smith's algorithm (as numpy): scale by the larger component of the divisor.
template <class R>
__device__ __forceinline__ complex<R> cdiv(complex<R> a, complex<R> b) {
  R abr = m::fabs(b.re), abi = m::fabs(b.im);
  if (abr >= abi) {
    if (abr == R(0) && abi == R(0)) return complex<R>(a.re / abr, a.im / abi);
    R rat = b.im / b.re;
    R scl = R(1) / (b.re + b.im * rat);
    return complex<R>((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
  }
  R rat = b.re / b.im;
  R scl = R(1) / (b.im + b.re * rat);
  return complex<R>((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}
template <class R> __device__ __forceinline__ R cabs(complex<R> z) { return m::hypot(z.re, z.im); }

// ---- complex transcendental functions ------------------------------------------------
template <class R> __device__ __forceinline__ complex<R> cexp(complex<R> z) {
  R e = m::exp(z.re);
  if (z.im == R(0)) return complex<R>(e, z.im);  // real axis: exact, keeps the zero's sign
  R s, c;
  m::sincos(z.im, &s, &c);
  return complex<R>(e * c, e * s);
}

template <class R> __device__ __forceinline__ complex<R> clog(complex<R> z) {
  R ax = m::fabs(z.re), ay = m::fabs(z.im);
  if (ax < ay) { R t = ax; ax = ay; ay = t; }
  R re;
  if (ax > R(0.5) && ax < R(2)) {
    re = R(0.5) * m::log1p((ax - R(1)) * (ax + R(1)) + ay * ay);  // |z| near 1: no cancellation
  } else {
    re = m::log(m::hypot(z.re, z.im));
  }
  return complex<R>(re, m::atan2(z.im, z.re));
}

template <class R> __device__ __forceinline__ complex<R> csin(complex<R> z) {
  R s, c;
  m::sincos(z.re, &s, &c);
  if (z.im == R(0)) return complex<R>(s, z.im * c);
  return complex<R>(s * m::cosh(z.im), c * m::sinh(z.im));
}

template <class R> __device__ __forceinline__ complex<R> ccos(complex<R> z) {
  R s, c;
  m::sincos(z.re, &s, &c);
  if (z.im == R(0)) return complex<R>(c, -s * z.im);
  return complex<R>(c * m::cosh(z.im), -s * m::sinh(z.im));
}

// Kahan's formulation (FreeBSD ctanh): no overflow for large |Re z|.
template <class R> __device__ __forceinline__ complex<R> ctanh(complex<R> z) {
  R x = z.re, y = z.im;
  if (z.im == R(0)) return complex<R>(m::tanh(x), y);
  const R big = sizeof(R) == 4 ? R(9) : R(22);
  if (m::fabs(x) >= big) {
    R e = m::exp(-m::fabs(x));
    R s, c;
    m::sincos(y, &s, &c);
    return complex<R>(m::copysign(R(1), x), R(4) * s * c * e * e);
  }
  R t = m::tan(y);
  R beta = R(1) + t * t;
  R s = m::sinh(x);
  R rho = m::sqrt(R(1) + s * s);
  R denom = R(1) + beta * s * s;
  return complex<R>((beta * rho * s) / denom, t / denom);
}

template <class R> __device__ __forceinline__ complex<R> csqrt(complex<R> z) {
  R x = z.re, y = z.im;
  if (x == R(0) && y == R(0)) return complex<R>(R(0), y);
  if (m::isinf(y)) return complex<R>(m::inf<R>(), y);
  R t = m::sqrt((m::fabs(x) + m::hypot(x, y)) * R(0.5));
  if (x >= R(0)) return complex<R>(t, y / (R(2) * t));
  return complex<R>(m::fabs(y) / (R(2) * t), m::copysign(t, y));
}

template <class R> __device__ __forceinline__ complex<R> crsqrt(complex<R> z) {
  return cdiv(complex<R>(R(1), R(0)), csqrt(z));
}

// exp(z) - 1 without cancellation: Re = expm1(x) cos y - 2 sin^2(y/2).
template <class R> __device__ __forceinline__ complex<R> cexpm1(complex<R> z) {
  if (z.im == R(0)) return complex<R>(m::expm1(z.re), z.im);
  R sh = m::sin(R(0.5) * z.im);
  R s, c;
  m::sincos(z.im, &s, &c);
  return complex<R>(m::expm1(z.re) * c - R(2) * sh * sh, m::exp(z.re) * s);
}

// log(1 + z): for small |z|, Re = log1p(x (2 + x) + y^2) / 2 avoids forming 1 + x.
template <class R> __device__ __forceinline__ complex<R> clog1p(complex<R> z) {
  R x = z.re, y = z.im;
  if (m::fabs(x) < R(0.5) && m::fabs(y) < R(0.5)) {
    return complex<R>(R(0.5) * m::log1p(x * (R(2) + x) + y * y), m::atan2(y, R(1) + x));
  }
  return clog(complex<R>(R(1) + x, y));
}

// a ** b as numpy: 1 for b == 0; exact binary powering for small integral real b;
// exp(b log a) otherwise.
template <class R> __device__ __forceinline__ complex<R> cpow(complex<R> a, complex<R> b) {
  const complex<R> one(R(1), R(0));
  if (b.re == R(0) && b.im == R(0)) return one;
  if (a.re == R(0) && a.im == R(0)) {
    if (b.re > R(0)) return complex<R>(R(0), R(0));  // numpy: 0 ** b = 0 for Re(b) > 0
    return complex<R>(m::nan<R>(), m::nan<R>());
  }
  if (b.im == R(0) && m::fabs(b.re) < R(100) && b.re == (R)(int)b.re) {
    int n = (int)b.re;
    int k = n < 0 ? -n : n;
    complex<R> acc = one, p = a;
    bool first = true;
    while (k) {
      if (k & 1) { acc = first ? p : cmul(acc, p); first = false; }
      k >>= 1;
      if (k) p = cmul(p, p);
    }
    return n < 0 ? cdiv(one, acc) : acc;
  }
  return cexp(cmul(b, clog(a)));
}

}  // namespace tf
