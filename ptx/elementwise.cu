// Elementwise and analytic kernels: out = Op(a[, b[, c]]) for the op functors of
// tenferro/ops.cuh (AddOp, CmpOp<D>, SelectOp, ExpOp, ...), instantiated per (functor,
// primary dtype) by name expressions such as `tf::ew_contig<tf::AddOp, float>`.
// ew_contig: compact operands (rank-0 operands broadcast), 16-byte vectors when aligned.
// ew_small: ew_contig's parameters, one thread per element (runs of at most a few
//   thousand elements: the host picks it by size, engine.SMALL).
// ew_strided: runtime layouts; `mode` bit 0 selects the tiled 2-D path (ewkernel.cuh).
// ew_bcast: rank-3 layouts whose innermost axis is unit-stride (inputs: or broadcast);
//   `flags` bit 0 selects 16-byte vectors (ewkernel.cuh, bcast_body).
// Deferred errors (integer division by zero, negative integer exponent) go to `err`.
// Scalar operands of binary and ternary ops are passed by value: bits TF_EW_VALUE << k of
// `flags`/`mode`, the value's bytes 0-7 in the operand's pointer slot, bytes 8-15 (a
// complex<double>) in ha, hb or hc (ewkernel.cuh).
#include "tenferro/ewkernel.cuh"

namespace tf {

template <class Op, class T>
__global__ void __launch_bounds__(TF_EW_BLOCK)
ew_contig(typename sig<Op, T>::R* __restrict__ out, const typename sig<Op, T>::A* a,
          const typename sig<Op, T>::B* b, const typename sig<Op, T>::C* c, u32 n, int flags,
          int* err, int code, u64 ha, u64 hb, u64 hc) {
  tf::grid_wait();
  const Err e{err, code};
  contig_body<Op, T, u32>(out, a, b, c, n, flags, e, Words{{ha, hb, hc}});
}

template <class Op, class T>
__global__ void __launch_bounds__(TF_EW_BLOCK)
ew_small(typename sig<Op, T>::R* __restrict__ out, const typename sig<Op, T>::A* a,
         const typename sig<Op, T>::B* b, const typename sig<Op, T>::C* c, u32 n, int flags,
         int* err, int code, u64 ha, u64 hb, u64 hc) {
  tf::grid_wait();
  const Err e{err, code};
  small_body<Op, T>(out, a, b, c, n, flags, e, Words{{ha, hb, hc}});
}

template <class Op, class T>
__global__ void __launch_bounds__(TF_EW_BLOCK)
ew_strided(typename sig<Op, T>::R* __restrict__ out, Layout lo, const typename sig<Op, T>::A* a,
           Layout la, const typename sig<Op, T>::B* b, Layout lb,
           const typename sig<Op, T>::C* c, Layout lc, u32 n, int mode, int* err, int code,
           u64 ha, u64 hb, u64 hc) {
  tf::grid_wait();
  const Err e{err, code};
  const Words hi{{ha, hb, hc}};
  if (mode & 1) tiled_body<Op, T>(out, lo, a, la, b, lb, c, lc, mode, e, hi);
  else strided_body<Op, T, u32>(out, lo, a, la, b, lb, c, lc, n, mode, e, hi);
}

template <class Op, class T>
__global__ void __launch_bounds__(TF_EW_BLOCK)
ew_bcast(typename sig<Op, T>::R* __restrict__ out, Layout lo, const typename sig<Op, T>::A* a,
         Layout la, const typename sig<Op, T>::B* b, Layout lb,
         const typename sig<Op, T>::C* c, Layout lc, u32 n, int flags, int* err, int code,
         u64 ha, u64 hb, u64 hc) {
  tf::grid_wait();
  const Err e{err, code};
  bcast_body<Op, T>(out, lo, a, la, b, lb, c, lc, n, flags, e, Words{{ha, hb, hc}});
}

}  // namespace tf
