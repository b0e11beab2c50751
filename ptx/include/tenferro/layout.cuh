// Strided layouts passed to kernels by value: shapes, signed element strides and an
// element offset, up to TF_MAX_RANK axes. The host coalesces axes first, so most
// kernels see rank 1-3. Index arithmetic is in I (unsigned for < 2^32 elements).
#pragma once
#include "types.cuh"

#define TF_MAX_RANK 8

namespace tf {

struct Layout {
  i64 shape[TF_MAX_RANK];
  i64 stride[TF_MAX_RANK];
  i64 offset;
  i32 ndim;
  i32 pad_;
};

// Element offset of the row-major linear index `linear` in L.
template <class I>
__device__ __forceinline__ i64 offset_of(const Layout& L, I linear) {
  i64 off = L.offset;
#pragma unroll
  for (int d = TF_MAX_RANK - 1; d >= 0; --d) {
    if (d < L.ndim) {
      I s = (I)L.shape[d];
      I q = linear / s;
      off += (i64)(linear - q * s) * L.stride[d];
      linear = q;
    }
  }
  return off;
}

// Offsets in two layouts of equal shape at once (one division chain).
template <class I>
__device__ __forceinline__ void offsets_of2(const Layout& A, const Layout& B, I linear,
                                            i64& oa, i64& ob) {
  oa = A.offset;
  ob = B.offset;
#pragma unroll
  for (int d = TF_MAX_RANK - 1; d >= 0; --d) {
    if (d < A.ndim) {
      I s = (I)A.shape[d];
      I q = linear / s;
      i64 i = (i64)(linear - q * s);
      oa += i * A.stride[d];
      ob += i * B.stride[d];
      linear = q;
    }
  }
}

// Deferred device error: the first failing op's code wins; kernels never trap.
__device__ __forceinline__ void raise_error(int* err, int code) {
  if (err) atomicCAS(err, 0, code);
}

}  // namespace tf
