// Creation kernels: iota (StableHLO) writes out[i] = the index of element i along one
// axis, converted to T as tf::convert does (integers exactly -- the host checks that the
// extent fits --, floats rounded once to nearest even, complex with imaginary part 0).
// The output is compact row-major; for axis d, index = (i / inner) % extent with
// inner = the product of the extents after d. I is the index type (u32 below 2^31
// elements, u64 above). Fills of one value use ptx/copy.cu's fill.
#include "tenferro/types.cuh"

namespace tf {

template <class T, class I>
__global__ void iota(T* __restrict__ out, I inner, I extent, I n) {
  tf::grid_wait();
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = convert<T>((i64)((i / inner) % extent));
  }
}

}  // namespace tf
