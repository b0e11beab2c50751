// Kernel bodies shared by the elementwise-shaped families (ptx/elementwise.cu,
// ptx/cast.cu): out[i] = Op::apply(a[i], b[i], c[i]) for an op functor of ops.cuh over
// the primary dtype T. Every kernel takes three input slots; slots past Op::arity are
// ignored (pass null pointers / any layout).
//
// contig_body: every operand compact (or a rank-0 operand broadcast: `flags` bits 0-2
//   for a, b, c; its value is read once per thread). Bit 3 selects the vector path: the
//   host sets it only when every pointer is 16-byte aligned; then each thread moves
//   16-byte vectors (VEC elements of the widest operand), UNROLL of them per grid-stride
//   step, and the n % VEC tail is done element-wise.
// small_body: contig_body's operands and flags for a grid of one thread per element
//   (n < 2^31, no loop, no vector path): the kernel of small compact runs, whose
//   duration is the launch's (a CUDA graph node of it costs what a minimal kernel's
//   does; the contiguous kernel's larger body costs about 0.1 us more per node).
// strided_body: runtime shapes and signed strides (tf::Layout, coalesced on the host),
//   one division chain per element for all operands.
// Index math is 32-bit: the host launches at most 2^31 - 1 elements per kernel and
// splits larger tensors into chunks.
// tiled_body: rank 3 (batch, rows, cols) where some input is column-major relative to
//   the output: one 32x32 tile per block (grid: col tiles, row tiles, batch) staged
//   through shared memory (rows padded to 33: no bank conflicts), so that those inputs
//   are read, and the output written, along their stride-1 axes. `mode` bit 0 selects
//   it; bits 1-3 mark the inputs to stage; dynamic shared memory holds their tiles.
// By-value operands (binary and ternary ops; every body): bits 4-6 of `flags` / `mode`
//   mark scalar operands passed in the parameters (byvalue.cuh); such an operand is read
//   once, like a broadcast operand, and its layout is ignored.
#pragma once
#include "byvalue.cuh"
#include "layout.cuh"
#include "ops.cuh"

#define TF_EW_BLOCK 256
#ifndef TF_EW_UNROLL  // must match elementwise_engine.UNROLL
#define TF_EW_UNROLL 2
#endif
#define TF_EW_TILE 32
#define TF_EW_TILE_ROWS 8

namespace tf {

template <class Op, class T> struct sig {
  typedef typename Op::template types<T> S;
  typedef typename S::a A;
  typedef typename S::b B;
  typedef typename S::c C;
  typedef typename S::out R;
  static const int arity = Op::arity;
  static const int wa = sizeof(A) > sizeof(R) ? sizeof(A) : sizeof(R);
  static const int wb = arity >= 2 && sizeof(B) > wa ? sizeof(B) : wa;
  static const int widest = arity >= 3 && sizeof(C) > wb ? sizeof(C) : wb;
  static const int vec = 16 / widest;  // elements per 16-byte vector of the widest operand
};

template <class Op, class A, class B, class C>
__device__ __forceinline__ auto invoke(A a, B b, C c, const Err& e) {
  if constexpr (Op::arity == 1) { return Op::apply(a, e); }
  else if constexpr (Op::arity == 2) { return Op::apply(a, b, e); }
  else { return Op::apply(a, b, c, e); }
}

template <int BYTES> struct raw_of;
template <> struct raw_of<1> { typedef unsigned char type; };
template <> struct raw_of<2> { typedef unsigned short type; };
template <> struct raw_of<4> { typedef unsigned int type; };
template <> struct raw_of<8> { typedef u64 type; };
template <> struct raw_of<16> { typedef b128 type; };

// N consecutive elements at p (aligned to N * sizeof(T)) in one load / store.
template <class T, int N> __device__ __forceinline__ void vload(T (&dst)[N], const T* p) {
  typedef typename raw_of<sizeof(T) * N>::type Raw;
  Raw r = *reinterpret_cast<const Raw*>(p);
  memcpy(dst, &r, sizeof(Raw));
}
template <class T, int N> __device__ __forceinline__ void vstore(T* p, const T (&src)[N]) {
  typedef typename raw_of<sizeof(T) * N>::type Raw;
  Raw r;
  memcpy(&r, src, sizeof(Raw));
  *reinterpret_cast<Raw*>(p) = r;
}

template <class Op, class T, class I>
__device__ __forceinline__ void contig_body(typename sig<Op, T>::R* __restrict__ out,
                                            const typename sig<Op, T>::A* __restrict__ a,
                                            const typename sig<Op, T>::B* __restrict__ b,
                                            const typename sig<Op, T>::C* __restrict__ c,
                                            I n, int flags, const Err& e, const Words& hi) {
  typedef sig<Op, T> S;
  typedef typename S::A A;
  typedef typename S::B B;
  typedef typename S::C C;
  typedef typename S::R R;
  const int N = S::vec;
  const bool va = by_value_at<S::arity>(flags, 0), vb = by_value_at<S::arity>(flags, 1),
             vc = by_value_at<S::arity>(flags, 2);
  const bool sa = (flags & 1) || va, sb = (S::arity >= 2) && ((flags & 2) || vb),
             sc = (S::arity >= 3) && ((flags & 4) || vc);
  A a0 = va ? by_value<A>(a, hi.w[0]) : sa ? a[0] : A();
  B b0 = vb ? by_value<B>(b, hi.w[1]) : sb ? b[0] : B();
  C c0 = vc ? by_value<C>(c, hi.w[2]) : sc ? c[0] : C();
  const I nthreads = (I)gridDim.x * blockDim.x;
  I done = 0;
  if (flags & 8) {
    const I nvec = n / N;
    for (I v = (I)blockIdx.x * (blockDim.x * TF_EW_UNROLL) + threadIdx.x; v < nvec;
         v += nthreads * TF_EW_UNROLL) {
      A ra[TF_EW_UNROLL][N];
      B rb[TF_EW_UNROLL][N];
      C rc[TF_EW_UNROLL][N];
#pragma unroll
      for (int u = 0; u < TF_EW_UNROLL; ++u) {
        const I w = v + (I)u * blockDim.x;
        if (w < nvec) {
          if (sa) { for (int k = 0; k < N; ++k) ra[u][k] = a0; } else { vload(ra[u], a + w * N); }
          if constexpr (S::arity >= 2) {
            if (sb) { for (int k = 0; k < N; ++k) rb[u][k] = b0; } else { vload(rb[u], b + w * N); }
          }
          if constexpr (S::arity >= 3) {
            if (sc) { for (int k = 0; k < N; ++k) rc[u][k] = c0; } else { vload(rc[u], c + w * N); }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < TF_EW_UNROLL; ++u) {
        const I w = v + (I)u * blockDim.x;
        if (w < nvec) {
          R ro[N];
#pragma unroll
          for (int k = 0; k < N; ++k) ro[k] = invoke<Op>(ra[u][k], rb[u][k], rc[u][k], e);
          vstore(out + w * N, ro);
        }
      }
    }
    done = nvec * N;
  }
  for (I i = done + (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads) {
    A xa = sa ? a0 : a[i];
    B xb = B();
    C xc = C();
    if constexpr (S::arity >= 2) xb = sb ? b0 : b[i];
    if constexpr (S::arity >= 3) xc = sc ? c0 : c[i];
    out[i] = invoke<Op>(xa, xb, xc, e);
  }
}

template <class Op, class T>
__device__ __forceinline__ void small_body(typename sig<Op, T>::R* __restrict__ out,
                                           const typename sig<Op, T>::A* __restrict__ a,
                                           const typename sig<Op, T>::B* __restrict__ b,
                                           const typename sig<Op, T>::C* __restrict__ c,
                                           u32 n, int flags, const Err& e, const Words& hi) {
  typedef sig<Op, T> S;
  const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  typename S::A xa = by_value_at<S::arity>(flags, 0) ? by_value<typename S::A>(a, hi.w[0])
                                                     : a[(flags & 1) ? 0 : i];
  typename S::B xb = typename S::B();
  typename S::C xc = typename S::C();
  if constexpr (S::arity >= 2) {
    xb = by_value_at<S::arity>(flags, 1) ? by_value<typename S::B>(b, hi.w[1])
                                         : b[(flags & 2) ? 0 : i];
  }
  if constexpr (S::arity >= 3) {
    xc = by_value_at<S::arity>(flags, 2) ? by_value<typename S::C>(c, hi.w[2])
                                         : c[(flags & 4) ? 0 : i];
  }
  out[i] = invoke<Op>(xa, xb, xc, e);
}

// Offsets of the linear index i in the output and the first ARITY input layouts.
template <int ARITY, class I>
__device__ __forceinline__ void offsets4(const Layout& lo, const Layout& la, const Layout& lb,
                                         const Layout& lc, I i, i64& oo, i64& oa, i64& ob,
                                         i64& oc) {
  oo = lo.offset;
  oa = la.offset;
  ob = lb.offset;
  oc = lc.offset;
#pragma unroll
  for (int d = TF_MAX_RANK - 1; d >= 0; --d) {
    if (d < lo.ndim) {
      I s = (I)lo.shape[d];
      I q = i / s;
      i64 k = (i64)(i - q * s);
      oo += k * lo.stride[d];
      oa += k * la.stride[d];
      if (ARITY >= 2) ob += k * lb.stride[d];
      if (ARITY >= 3) oc += k * lc.stride[d];
      i = q;
    }
  }
}

template <class Op, class T, class I>
__device__ __forceinline__ void strided_body(typename sig<Op, T>::R* __restrict__ out,
                                             const Layout& lo,
                                             const typename sig<Op, T>::A* __restrict__ a,
                                             const Layout& la,
                                             const typename sig<Op, T>::B* __restrict__ b,
                                             const Layout& lb,
                                             const typename sig<Op, T>::C* __restrict__ c,
                                             const Layout& lc, I n, int mode, const Err& e,
                                             const Words& hi) {
  typedef sig<Op, T> S;
  typedef typename S::A A;
  typedef typename S::B B;
  typedef typename S::C C;
  const bool va = by_value_at<S::arity>(mode, 0), vb = by_value_at<S::arity>(mode, 1),
             vc = by_value_at<S::arity>(mode, 2);
  const A aval = va ? by_value<A>(a, hi.w[0]) : A();
  const B bval = vb ? by_value<B>(b, hi.w[1]) : B();
  const C cval = vc ? by_value<C>(c, hi.w[2]) : C();
  const I nthreads = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads) {
    i64 oo, oa, ob, oc;
    offsets4<S::arity, I>(lo, la, lb, lc, i, oo, oa, ob, oc);
    B xb = B();
    C xc = C();
    if constexpr (S::arity >= 2) xb = vb ? bval : b[ob];
    if constexpr (S::arity >= 3) xc = vc ? cval : c[oc];
    out[oo] = invoke<Op>(va ? aval : a[oa], xb, xc, e);
  }
}

// Tiles of a rank-3 layout (batch, rows, cols; the host pads rank 2 with a batch of 1).
// Grid: (col tiles, row tiles, batch). Element offset = base + r * stride[1] + col * stride[2].
__host__ __device__ constexpr int tile_bytes(int item) {
  return (TF_EW_TILE * (TF_EW_TILE + 1) * item + 15) / 16 * 16;
}

// Stage rows [r0, r0+32) x cols [c0, c0+32) of an operand whose stride-1 axis is the row
// axis: thread tx walks the rows (coalesced); stored as tile[row][col].
template <class X>
__device__ __forceinline__ void stage(X* tile, const X* __restrict__ p, const Layout& l,
                                      i64 base, u32 r0, u32 c0, u32 rows, u32 cols) {
  const u32 tx = threadIdx.x % TF_EW_TILE, ty = threadIdx.x / TF_EW_TILE;
  const u32 r = r0 + tx;
  if (r >= rows) return;
  const i64 row = base + (i64)r * l.stride[1];
  for (u32 j = ty; j < TF_EW_TILE && c0 + j < cols; j += TF_EW_TILE_ROWS) {
    tile[tx * (TF_EW_TILE + 1) + j] = p[row + (i64)(c0 + j) * l.stride[2]];
  }
}

template <class Op, class T>
__device__ __forceinline__ void tiled_body(typename sig<Op, T>::R* __restrict__ out,
                                           const Layout& lo,
                                           const typename sig<Op, T>::A* __restrict__ a,
                                           const Layout& la,
                                           const typename sig<Op, T>::B* __restrict__ b,
                                           const Layout& lb,
                                           const typename sig<Op, T>::C* __restrict__ c,
                                           const Layout& lc, int mode, const Err& e,
                                           const Words& hi) {
  typedef sig<Op, T> S;
  typedef typename S::A A;
  typedef typename S::B B;
  typedef typename S::C C;
  const bool va = by_value_at<S::arity>(mode, 0), vb = by_value_at<S::arity>(mode, 1),
             vc = by_value_at<S::arity>(mode, 2);
  const A aval = va ? by_value<A>(a, hi.w[0]) : A();
  const B bval = vb ? by_value<B>(b, hi.w[1]) : B();
  const C cval = vc ? by_value<C>(c, hi.w[2]) : C();
  extern __shared__ __align__(16) unsigned char tf_ew_smem[];
  const bool ta = mode & 2, tb = (S::arity >= 2) && (mode & 4), tc = (S::arity >= 3) && (mode & 8);
  A* sa = reinterpret_cast<A*>(tf_ew_smem);
  unsigned char* next = tf_ew_smem + (ta ? tile_bytes(sizeof(A)) : 0);
  B* sb = reinterpret_cast<B*>(next);
  next += tb ? tile_bytes(sizeof(B)) : 0;
  C* sc = reinterpret_cast<C*>(next);
  const u32 rows = (u32)lo.shape[1], cols = (u32)lo.shape[2];
  const u32 r0 = blockIdx.y * TF_EW_TILE, c0 = blockIdx.x * TF_EW_TILE;
  const i64 bt = blockIdx.z;
  const i64 ba = la.offset + bt * la.stride[0];
  const i64 bb = lb.offset + bt * lb.stride[0];
  const i64 bc = lc.offset + bt * lc.stride[0];
  if (ta) stage(sa, a, la, ba, r0, c0, rows, cols);
  if constexpr (S::arity >= 2) { if (tb) stage(sb, b, lb, bb, r0, c0, rows, cols); }
  if constexpr (S::arity >= 3) { if (tc) stage(sc, c, lc, bc, r0, c0, rows, cols); }
  __syncthreads();
  const u32 tx = threadIdx.x % TF_EW_TILE, ty = threadIdx.x / TF_EW_TILE;
  const u32 col = c0 + tx;
  if (col >= cols) return;
  const i64 ca = (i64)col * la.stride[2], cb = (i64)col * lb.stride[2];
  const i64 cc = (i64)col * lc.stride[2];
  const i64 bo = lo.offset + bt * lo.stride[0] + (i64)col * lo.stride[2];
  for (u32 j = ty; j < TF_EW_TILE && r0 + j < rows; j += TF_EW_TILE_ROWS) {
    const i64 r = r0 + j;
    const u32 s = j * (TF_EW_TILE + 1) + tx;
    // A staged input is never by value (its strides are not 0).
    A xa = ta ? sa[s] : va ? aval : a[ba + r * la.stride[1] + ca];
    B xb = B();
    C xc = C();
    if constexpr (S::arity >= 2) xb = tb ? sb[s] : vb ? bval : b[bb + r * lb.stride[1] + cb];
    if constexpr (S::arity >= 3) xc = tc ? sc[s] : vc ? cval : c[bc + r * lc.stride[1] + cc];
    out[bo + r * lo.stride[1]] = invoke<Op>(xa, xb, xc, e);
  }
}

// bcast_body: rank 3 (P, Q, W; the host pads lower ranks with leading extents of 1) where
//   the output's innermost axis has stride 1 and every input's has stride 1 or 0: compact
//   operands beside rows, columns, scalars or middle axes broadcast through stride-0
//   views. Element e is (e / W / Q, e / W % Q, e % W); offsets are 64-bit. `flags` bit 0
//   selects 16-byte vectors (VEC elements of the widest operand, UNROLL per grid-stride
//   step): the host sets it only when W is a multiple of VEC and every row of every
//   unit-stride operand starts aligned to its vector; a stride-0 input is then read once
//   per vector (and a by-value input is its value N times).
// (i0, i1, i2) of element e; q == 0 stands for a leading extent of 1 (i0 = 0, no
// second division: the padded rank-2 walks).
__device__ __forceinline__ void bc_split(u32 e, u32 q, u32 w, i64& i0, i64& i1, i64& i2) {
  const u32 r = e / w;
  i2 = (i64)(e - r * w);
  if (q == 0) {
    i1 = (i64)r;
    i0 = 0;
  } else {
    const u32 p = r / q;
    i1 = (i64)(r - p * q);
    i0 = (i64)p;
  }
}

__device__ __forceinline__ i64 bc_offset(const Layout& l, i64 i0, i64 i1, i64 i2) {
  return l.offset + i0 * l.stride[0] + i1 * l.stride[1] + i2 * l.stride[2];
}

// N elements of an input at (i0, i1, i2 .. i2 + N): one vector, or one value N times
// (`value`: the operand is by value, x0).
template <class X, int N>
__device__ __forceinline__ void bc_load(X (&dst)[N], const X* p, const Layout& l, i64 i0,
                                        i64 i1, i64 i2, bool value, X x0) {
  if (value) {
#pragma unroll
    for (int k = 0; k < N; ++k) dst[k] = x0;
    return;
  }
  const i64 off = bc_offset(l, i0, i1, i2);
  if (l.stride[2]) {
    vload(dst, p + off);
  } else {
    const X x = p[off];
#pragma unroll
    for (int k = 0; k < N; ++k) dst[k] = x;
  }
}

template <class Op, class T>
__device__ __forceinline__ void bcast_body(typename sig<Op, T>::R* __restrict__ out,
                                           const Layout& lo,
                                           const typename sig<Op, T>::A* __restrict__ a,
                                           const Layout& la,
                                           const typename sig<Op, T>::B* __restrict__ b,
                                           const Layout& lb,
                                           const typename sig<Op, T>::C* __restrict__ c,
                                           const Layout& lc, u32 n, int flags, const Err& e,
                                           const Words& hi) {
  typedef sig<Op, T> S;
  typedef typename S::A A;
  typedef typename S::B B;
  typedef typename S::C C;
  typedef typename S::R R;
  const bool va = by_value_at<S::arity>(flags, 0), vb = by_value_at<S::arity>(flags, 1),
             vc = by_value_at<S::arity>(flags, 2);
  const A aval = va ? by_value<A>(a, hi.w[0]) : A();
  const B bval = vb ? by_value<B>(b, hi.w[1]) : B();
  const C cval = vc ? by_value<C>(c, hi.w[2]) : C();
  const u32 q = lo.shape[0] == 1 ? 0u : (u32)lo.shape[1], w = (u32)lo.shape[2];
  const u32 nthreads = gridDim.x * blockDim.x;
  if (flags & 1) {
    const int N = S::vec;
    const u32 nvec = n / N;
    for (u32 v = blockIdx.x * (blockDim.x * TF_EW_UNROLL) + threadIdx.x; v < nvec;
         v += nthreads * TF_EW_UNROLL) {
      A ra[TF_EW_UNROLL][N];
      B rb[TF_EW_UNROLL][N];
      C rc[TF_EW_UNROLL][N];
      i64 oo[TF_EW_UNROLL] = {};
#pragma unroll
      for (int u = 0; u < TF_EW_UNROLL; ++u) {
        const u32 x = v + (u32)u * blockDim.x;
        if (x < nvec) {
          i64 i0, i1, i2;
          bc_split(x * N, q, w, i0, i1, i2);
          oo[u] = bc_offset(lo, i0, i1, i2);
          bc_load(ra[u], a, la, i0, i1, i2, va, aval);
          if constexpr (S::arity >= 2) bc_load(rb[u], b, lb, i0, i1, i2, vb, bval);
          if constexpr (S::arity >= 3) bc_load(rc[u], c, lc, i0, i1, i2, vc, cval);
        }
      }
#pragma unroll
      for (int u = 0; u < TF_EW_UNROLL; ++u) {
        if (v + (u32)u * blockDim.x < nvec) {
          R ro[N];
#pragma unroll
          for (int k = 0; k < N; ++k) ro[k] = invoke<Op>(ra[u][k], rb[u][k], rc[u][k], e);
          vstore(out + oo[u], ro);
        }
      }
    }
    return;
  }
  for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads) {
    i64 i0, i1, i2;
    bc_split(i, q, w, i0, i1, i2);
    B xb = B();
    C xc = C();
    if constexpr (S::arity >= 2) xb = vb ? bval : b[bc_offset(lb, i0, i1, i2)];
    if constexpr (S::arity >= 3) xc = vc ? cval : c[bc_offset(lc, i0, i1, i2)];
    out[bc_offset(lo, i0, i1, i2)] = invoke<Op>(va ? aval : a[bc_offset(la, i0, i1, i2)], xb, xc,
                                                e);
  }
}

}  // namespace tf
