// Data movement of slice, dynamic_slice, dynamic_update_slice, concatenate, reverse (strided
// copies between views, optionally shifted by clamped start indices read on the device) and
// pad (output-driven: each output element is an input element or the padding value).
// Instantiated per storage unit U (u8, unsigned short, u32, u64, b128): the host groups
// contiguous, aligned elements into units of up to 16 bytes.
//  copy_rows  rows of the coalesced shape: per block a row segment, per row one offset
//             computation, rows_unroll<U> independent loads (>= 64 bytes) per thread;
//  copy_elems short rows: one element per iteration with its own offsets;
//  pad_rows / pad_elems the same split for pad.
// The dynamic shift is clamped_start(m, starts, 0): added to the source (dyn_dst == 0,
// dynamic_slice) or to the destination (dyn_dst == 1, dynamic_update_slice); m.k == 0
// means no shift.
#include "tenferro/index.cuh"

namespace tf {

// Units in flight per thread and row tile: 64 bytes for 4/8/16-byte units (4 x 16, 8 x 8,
// 16 x 4); 8 for 1/2-byte units (more would spill).
template <class U> struct rows_unroll {
  static const int value = sizeof(U) >= 16 ? 4 : (sizeof(U) == 8 ? 8 : (sizeof(U) == 4 ? 16 : 8));
};

// Per-axis pad map of the output: o -> n = o - lo; an input element iff n >= 0,
// n % step == 0 and n / step < ext (input index n / step, at n / step * stride). The
// `outer` row axes sit in slots 0..outer-1, the last (column) axis in slot PAD_LAST, so
// every access uses a constant index.
#define PAD_LAST (TF_MAX_RANK - 1)
struct PadMap {
  i64 shape[TF_MAX_RANK];
  i64 lo[TF_MAX_RANK];
  i64 step[TF_MAX_RANK];
  i64 ext[TF_MAX_RANK];
  i64 stride[TF_MAX_RANK];
  i64 offset;
  i32 outer;
  i32 pad_;
};

__device__ __forceinline__ bool pad_axis(i64 o, i64 lo, i64 step, i64 ext, i64& q) {
  const i64 n = o - lo;
  if (n < 0) return false;
  if (step == 1) {
    q = n;
    return n < ext;
  }
  q = n / step;
  return q * step == n && q < ext;
}

template <class U>
__global__ void __launch_bounds__(256, 3) copy_rows(U* dst, Layout dl,
                                                    const U* __restrict__ src, Layout sl,
                                                    i64 rows, i64 cols, i64 dinc, i64 sinc,
                                                    const void* __restrict__ starts, IndexMap m,
                                                    int dyn_dst) {
  tf::grid_wait();
  constexpr int UN = rows_unroll<U>::value;
  const i64 shift = clamped_start(m, starts, 0);
  const i64 tile = (i64)blockDim.x * UN;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    i64 od, os;
    row_offsets(dl, sl, r, rows, od, os);
    if (dyn_dst) od += shift;
    else os += shift;
    for (i64 c0 = (i64)blockIdx.x * tile + threadIdx.x; c0 < cols; c0 += (i64)gridDim.x * tile) {
      const U* in = src + os + c0 * sinc;
      U* to = dst + od + c0 * dinc;
      const i64 sstep = (i64)blockDim.x * sinc, dstep = (i64)blockDim.x * dinc;
      const i64 left = cols - c0;  // > 0
      U v[UN];
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        if ((i64)j * blockDim.x < left) v[j] = ldg(in + j * sstep);
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        if ((i64)j * blockDim.x < left) to[j * dstep] = v[j];
      }
    }
  }
}

template <class U, class I>
__global__ void __launch_bounds__(256) copy_elems(U* dst, Layout dl, const U* __restrict__ src,
                                                  Layout sl, I n,
                                                  const void* __restrict__ starts, IndexMap m,
                                                  int dyn_dst) {
  tf::grid_wait();
  const i64 shift = clamped_start(m, starts, 0);
  const i64 dshift = dyn_dst ? shift : 0, sshift = dyn_dst ? 0 : shift;
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 od, os;
    offsets_of2<I>(dl, sl, i, od, os);
    dst[od + dshift] = ldg(src + os + sshift);
  }
}

// Source offset of output row r (all axes but the last); false when the row is padding.
__device__ __forceinline__ bool pad_row(const PadMap& p, i64 r, i64 rows, i64& off) {
  off = p.offset;
  bool ok = true;
  const bool narrow_rows = rows <= 0xffffffffll;
#pragma unroll
  for (int d = PAD_LAST - 1; d >= 0; --d) {
    if (d < p.outer) {
      i64 o;
      if (narrow_rows) {
        const u32 s = (u32)p.shape[d], q = (u32)r / s;
        o = (i64)((u32)r - q * s);
        r = q;
      } else {
        const i64 q = r / p.shape[d];
        o = r - q * p.shape[d];
        r = q;
      }
      i64 qd;
      ok = ok && pad_axis(o, p.lo[d], p.step[d], p.ext[d], qd);
      if (ok) off += qd * p.stride[d];
    }
  }
  return ok;
}

// Compact output: rows of p.shape[PAD_LAST] elements.
template <class S>
__global__ void __launch_bounds__(256) pad_rows(S* __restrict__ out, const S* __restrict__ src,
                                                PadMap p, i64 rows, S value) {
  tf::grid_wait();
  constexpr int UN = rows_unroll<S>::value;
  const i64 cols = p.shape[PAD_LAST], lo = p.lo[PAD_LAST], step = p.step[PAD_LAST],
            ext = p.ext[PAD_LAST], inc = p.stride[PAD_LAST];
  const i64 tile = (i64)blockDim.x * UN;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    i64 base;
    const bool row_ok = pad_row(p, r, rows, base);
    S* dst = out + r * cols;
    for (i64 c0 = (i64)blockIdx.x * tile + threadIdx.x; c0 < cols; c0 += (i64)gridDim.x * tile) {
      S v[UN];
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 c = c0 + (i64)j * blockDim.x;
        i64 q;
        v[j] = value;
        if (row_ok && c < cols && pad_axis(c, lo, step, ext, q)) v[j] = ldg(src + base + q * inc);
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 c = c0 + (i64)j * blockDim.x;
        if (c < cols) dst[c] = v[j];
      }
    }
  }
}

template <class S, class I>
__global__ void __launch_bounds__(256) pad_elems(S* __restrict__ out, const S* __restrict__ src,
                                                 PadMap p, I n, S value) {
  tf::grid_wait();
  const I cols = (I)p.shape[PAD_LAST];
  const i64 rows = (i64)(n / cols);
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const I r = i / cols;
    i64 base, q;
    S v = value;
    if (pad_row(p, (i64)r, rows, base) &&
        pad_axis((i64)(i - r * cols), p.lo[PAD_LAST], p.step[PAD_LAST], p.ext[PAD_LAST], q)) {
      v = ldg(src + base + q * p.stride[PAD_LAST]);
    }
    out[i] = v;
  }
}

}  // namespace tf
