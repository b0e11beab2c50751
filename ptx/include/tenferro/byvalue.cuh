// Scalar operands passed to the elementwise kernels by value (ewkernel.cuh), not uploaded.
// Bit TF_EW_VALUE << k of a kernel's `flags` / `mode` (bits 4-6 for operands a, b, c)
// says that operand k is a scalar: its bytes 0-7 are the bits of its pointer slot, its
// bytes 8-15 (only a complex<double> has them) the word hi.w[k] of the kernel's last three
// parameters. Only binary and ternary ops take them.
#pragma once
#include "types.cuh"

#define TF_EW_VALUE 16  // must match elementwise_engine.VALUE

namespace tf {

// Bytes 8-15 of the operands passed by value (the kernels' last three parameters).
struct Words { u64 w[3]; };

// Whether operand k of an ARITY-operand op is passed by value (unary ops: never).
template <int ARITY>
__device__ __forceinline__ bool by_value_at(int flags, int k) {
  return ARITY >= 2 && k < ARITY && (flags & (TF_EW_VALUE << k)) != 0;
}

// The value of a by-value operand: its pointer slot's bits, then `hi`.
template <class X> __device__ __forceinline__ X by_value(const void* slot, u64 hi) {
  static_assert(sizeof(X) <= 16, "a by-value operand has at most 16 bytes");
  const u64 w[2] = {(u64)(size_t)slot, hi};
  X x;
  memcpy(&x, w, sizeof(X));
  return x;
}

}  // namespace tf
