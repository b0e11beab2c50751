// Bitwise, shift and bit-count functors of the elementwise family (StableHLO and, or,
// xor, not, shift_left, shift_right_logical, shift_right_arithmetic, popcnt,
// count_leading_zeros). Included by ops.cuh, whose conventions they follow
// (docs/dtypes.md):
// - and/or/xor/not take bool (logical) and integers (bitwise, on the two's-complement
//   bits);
// - shifts take integers; the amount is the rhs read as unsigned, so an amount of the
//   bit width or more -- a negative one included -- gives 0 for shift_left and
//   shift_right_logical and the sign fill (0 or all ones, by the top bit) for
//   shift_right_arithmetic, which shifts the bits of every integer dtype, unsigned ones
//   included (as StableHLO's reference interpreter and XLA do);
// - popcnt and count_leading_zeros count the bits of the value in its own width
//   (clz(0) is the width) and return them in the operand's dtype.
#pragma once
#include "ops.cuh"

namespace tf {

template <class T> struct sint_of { typedef T type; };
template <> struct sint_of<u8> { typedef i8 type; };
template <> struct sint_of<u16> { typedef i16 type; };
template <> struct sint_of<u32> { typedef i32 type; };
template <> struct sint_of<u64> { typedef i64 type; };

namespace ew {

template <class T> __device__ __forceinline__ T bit_and(T a, T b) { return (T)(a & b); }
template <class T> __device__ __forceinline__ T bit_or(T a, T b) { return (T)(a | b); }
template <class T> __device__ __forceinline__ T bit_xor(T a, T b) { return (T)(a ^ b); }
template <class T> __device__ __forceinline__ T bit_not(T a) {
  if constexpr (same<T, bool>::value) { return !a; }
  else { return (T)~a; }
}

template <class T> __device__ __forceinline__ T shift_left(T a, T b) {
  typedef typename uint_of<T>::type U;
  const U n = (U)b;
  if (n >= (U)(8 * sizeof(T))) return T(0);
  return (T)(U)((U)a << n);
}
template <class T> __device__ __forceinline__ T shift_right_logical(T a, T b) {
  typedef typename uint_of<T>::type U;
  const U n = (U)b;
  if (n >= (U)(8 * sizeof(T))) return T(0);
  return (T)(U)((U)a >> n);
}
template <class T> __device__ __forceinline__ T shift_right_arithmetic(T a, T b) {
  typedef typename uint_of<T>::type U;
  typedef typename sint_of<T>::type S;
  const U n = (U)b;
  const S s = (S)a;
  if (n >= (U)(8 * sizeof(T))) return (T)(s < S(0) ? S(-1) : S(0));
  return (T)(S)(s >> n);  // the sign bit is replicated (arithmetic shift of a signed type)
}

template <class T> __device__ __forceinline__ T popcnt(T a) {
  typedef typename uint_of<T>::type U;
  if constexpr (sizeof(T) == 8) { return (T)__popcll((u64)(U)a); }
  else { return (T)__popc((u32)(U)a); }
}
template <class T> __device__ __forceinline__ T count_leading_zeros(T a) {
  typedef typename uint_of<T>::type U;
  if constexpr (sizeof(T) == 8) { return (T)__clzll((i64)(U)a); }
  else { return (T)(__clz((i32)(u32)(U)a) - (int)(32 - 8 * sizeof(T))); }
}

}  // namespace ew

#define TF_FUNCTOR_BITS1(NAME, FN)                                                      \
  struct NAME : OpBase<1> {                                                             \
    template <class T> static __device__ __forceinline__ T apply(T a, const Err&) {     \
      return ew::FN(a);                                                                 \
    }                                                                                   \
  };
#define TF_FUNCTOR_BITS2(NAME, FN)                                                      \
  struct NAME : OpBase<2> {                                                             \
    template <class T> static __device__ __forceinline__ T apply(T a, T b, const Err&) { \
      return ew::FN(a, b);                                                              \
    }                                                                                   \
  };
TF_FUNCTOR_BITS2(AndOp, bit_and)
TF_FUNCTOR_BITS2(OrOp, bit_or)
TF_FUNCTOR_BITS2(XorOp, bit_xor)
TF_FUNCTOR_BITS1(NotOp, bit_not)
TF_FUNCTOR_BITS2(ShiftLeftOp, shift_left)
TF_FUNCTOR_BITS2(ShiftRightLogicalOp, shift_right_logical)
TF_FUNCTOR_BITS2(ShiftRightArithmeticOp, shift_right_arithmetic)
TF_FUNCTOR_BITS1(PopcntOp, popcnt)
TF_FUNCTOR_BITS1(ClzOp, count_leading_zeros)
#undef TF_FUNCTOR_BITS1
#undef TF_FUNCTOR_BITS2

}  // namespace tf
