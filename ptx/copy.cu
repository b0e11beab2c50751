// Storage-level kernels: fill a compact range with one value, and copy between two
// strided layouts of equal shape. Instantiated per element *size* (S = 1, 2, 4, 8 or 16
// bytes), not per dtype: a copy moves bits. I is the index type (u32 below 2^32 elements).
#include "tenferro/layout.cuh"

namespace tf {

template <class T> __device__ __forceinline__ T scale_value(T v, T f) {
  return narrow<T>(widen(v) * widen(f));
}
// Integers wrap (multiply in the unsigned type: signed overflow is undefined in C++).
__device__ __forceinline__ i8 scale_value(i8 v, i8 f) { return (i8)(u8)((u8)v * (u8)f); }
__device__ __forceinline__ i16 scale_value(i16 v, i16 f) { return (i16)((u32)v * (u32)f); }
__device__ __forceinline__ u16 scale_value(u16 v, u16 f) { return (u16)((u32)v * (u32)f); }
__device__ __forceinline__ i32 scale_value(i32 v, i32 f) { return (i32)((u32)v * (u32)f); }
__device__ __forceinline__ i64 scale_value(i64 v, i64 f) { return (i64)((u64)v * (u64)f); }
template <class R> __device__ __forceinline__ complex<R> scale_value(complex<R> v, complex<R> f) {
  return complex<R>(v.re * f.re - v.im * f.im, v.re * f.im + v.im * f.re);
}

template <class S>
__global__ void fill(S* __restrict__ out, S value, i64 n) {
  tf::grid_wait();
  i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = value;
}

template <class S, class I>
__global__ void strided_copy(S* __restrict__ dst, Layout dl, const S* __restrict__ src,
                             Layout sl, I n) {
  tf::grid_wait();
  I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 od, os;
    offsets_of2<I>(dl, sl, i, od, os);
    dst[od] = src[os];
  }
}

}  // namespace tf

namespace tf {

// x[i] *= factor in place over a strided layout, arithmetic in the compute type.
template <class T, class I>
__global__ void scale_inplace(T* __restrict__ x, Layout l, T factor, I n) {
  tf::grid_wait();
  I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    T& v = x[offset_of<I>(l, i)];
    v = scale_value(v, factor);
  }
}

}  // namespace tf
