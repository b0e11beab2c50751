// StableHLO scatter into a copy of the operand (the host copies it first). For every update
// element: result_index = start + batching + window; a window whose start does not fit the
// operand (any component outside [0, dim - window]) is skipped whole (XLA semantics).
// OP selects the combiner:
//   OP_ADD / OP_MAX / OP_MIN  atomics per dtype T (complex add per component; max/min
//                             propagate NaN and order +0 above -0, so they are order-free);
//                             add is a `red` (no returned value) where the dtype has one;
//   OP_STORE                  plain store (replace with unique indices; T = storage unit);
//   OP_CLAIM, OP_COMMIT       deterministic replace in two passes: CLAIM writes the largest
//                             window key (row-major window order + 1) into `winner` with
//                             atomicMax, COMMIT stores only the update of that window.
// scatter_scalar serves windows of one element with compact indices (the update index is
// the window index), scatter_add the same geometry with the add combiner (streamed loads,
// up to 16 updates per thread, L2 evict_last reductions; see there); scatter_general any
// geometry through the coalesced Geometry (a = result offset, b = index-vector offset,
// c = window key - 1).
#include "tenferro/index.cuh"

namespace tf {

#define OP_ADD 0
#define OP_MAX 1
#define OP_MIN 2
#define OP_STORE 3
#define OP_CLAIM 4
#define OP_COMMIT 5
#define SCATTER_UNROLL 4
#define ADD_VEC 4  // scatter_add: consecutive updates per vector load

// ---- streamed (evict-first) loads: ld.global.cs ------------------------------------------
template <class T> __device__ __forceinline__ T ld_cs(const T* p) {
  T v;
  if constexpr (sizeof(T) == 1) {
    const unsigned char w = __ldcs((const unsigned char*)p);
    memcpy(&v, &w, 1);
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short w = __ldcs((const unsigned short*)p);
    memcpy(&v, &w, 2);
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int w = __ldcs((const unsigned int*)p);
    memcpy(&v, &w, 4);
  } else if constexpr (sizeof(T) == 8) {
    const unsigned long long w = __ldcs((const unsigned long long*)p);
    memcpy(&v, &w, 8);
  } else {
    const ulonglong2 w = __ldcs((const ulonglong2*)p);
    memcpy(&v, &w, 16);
  }
  return v;
}

// v[0..3] = p[0..3]; p aligned to min(4 * sizeof(T), 16) bytes.
template <class T> __device__ __forceinline__ void ld4_cs(const T* p, T* v) {
  constexpr int B = 4 * (int)sizeof(T);
  if constexpr (B == 4) {
    const unsigned int w = __ldcs((const unsigned int*)p);
    memcpy(v, &w, 4);
  } else if constexpr (B == 8) {
    const unsigned long long w = __ldcs((const unsigned long long*)p);
    memcpy(v, &w, 8);
  } else {
    uint4 w[B / 16];
#pragma unroll
    for (int h = 0; h < B / 16; ++h) w[h] = __ldcs((const uint4*)p + h);
    memcpy(v, w, B);
  }
}

__device__ __forceinline__ i64 load_index_cs(const void* p, i64 off, int wide) {
  return wide ? (i64)__ldcs((const long long*)p + off) : (i64)__ldcs((const int*)p + off);
}

// k[0..3] = indices off..off + 3; the address is 16-byte aligned.
__device__ __forceinline__ void load_index4_cs(const void* p, i64 off, int wide, i64* k) {
  if (wide) {
    const longlong2* q = (const longlong2*)((const long long*)p + off);
    const longlong2 a = __ldcs(q), b = __ldcs(q + 1);
    k[0] = a.x; k[1] = a.y; k[2] = b.x; k[3] = b.y;
  } else {
    const int4 a = __ldcs((const int4*)((const int*)p + off));
    k[0] = a.x; k[1] = a.y; k[2] = a.z; k[3] = a.w;
  }
}

// ---- add as a reduction (red: no value comes back), optionally with an L2 policy -------
// The L2 evict_last policy covers every line the reductions touch (fraction 1.0); sm_80+.
__device__ __forceinline__ u64 keep_policy() {
  u64 pol = 0;
#if __CUDA_ARCH__ >= 800
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}

#define TF_GLOBAL(p) "l"(__cvta_generic_to_global(p))
#if __CUDA_ARCH__ >= 800
#define TF_RED(MOD, TY, C, p, v)                                                      \
  do {                                                                                \
    if (hint)                                                                         \
      asm volatile("red.global.add" MOD ".L2::cache_hint" TY " [%0], %1, %2;"         \
                   ::TF_GLOBAL(p), C(v), "l"(pol) : "memory");                        \
    else                                                                              \
      asm volatile("red.global.add" MOD TY " [%0], %1;" ::TF_GLOBAL(p), C(v) : "memory"); \
  } while (0)
#else
#define TF_RED(MOD, TY, C, p, v)                                                      \
  asm volatile("red.global.add" MOD TY " [%0], %1;" ::TF_GLOBAL(p), C(v) : "memory")
#endif

// *p += v; hint: with the policy `pol` (keep_policy). 8/16-bit integers keep the CAS loop.
template <class T> __device__ __forceinline__ void red_add(T* p, T v, u64 pol, bool hint) {
  atomic_add(p, v);
}
__device__ __forceinline__ void red_add(float* p, float v, u64 pol, bool hint) {
  TF_RED("", ".f32", "f", p, v);
}
__device__ __forceinline__ void red_add(double* p, double v, u64 pol, bool hint) {
  TF_RED("", ".f64", "d", p, v);
}
__device__ __forceinline__ void red_add(int* p, int v, u64 pol, bool hint) {
  TF_RED("", ".s32", "r", p, v);
}
__device__ __forceinline__ void red_add(unsigned int* p, unsigned int v, u64 pol, bool hint) {
  TF_RED("", ".u32", "r", p, v);
}
__device__ __forceinline__ void red_add(long long* p, long long v, u64 pol, bool hint) {
  TF_RED("", ".u64", "l", p, v);  // two's complement wraps
}
__device__ __forceinline__ void red_add(unsigned long long* p, unsigned long long v, u64 pol,
                                        bool hint) {
  TF_RED("", ".u64", "l", p, v);
}
// float16 / bfloat16: one correctly rounded addition (as float32 then rounded: the same
// value, float32 has >= 2p + 2 bits for both); bfloat16 red needs sm_90.
__device__ __forceinline__ void red_add(half* p, half v, u64 pol, bool hint) {
#if __CUDA_ARCH__ >= 700
  TF_RED(".noftz", ".f16", "h", p, v.bits);
#else
  atomic_add(p, v);
#endif
}
__device__ __forceinline__ void red_add(bfloat16* p, bfloat16 v, u64 pol, bool hint) {
#if __CUDA_ARCH__ >= 900
  TF_RED(".noftz", ".bf16", "h", p, v.bits);
#else
  atomic_add(p, v);
#endif
}
template <class R>
__device__ __forceinline__ void red_add(complex<R>* p, complex<R> v, u64 pol, bool hint) {
  red_add(&p->re, v.re, pol, hint);  // per component: each part is an independent sum
  red_add(&p->im, v.im, pol, hint);
}
#undef TF_RED
#undef TF_GLOBAL

__device__ __forceinline__ bool winner_is(const void* winner, int wide_key, i64 off, i64 key) {
  return wide_key ? ((const u64*)winner)[off] == (u64)key : ((const u32*)winner)[off] == (u32)key;
}

template <class T, int OP>
__device__ __forceinline__ void apply(T* out, i64 off, T v, void* winner, int wide_key,
                                      i64 key) {
  if constexpr (OP == OP_ADD) {
    red_add(out + off, v, 0, false);
  } else if constexpr (OP == OP_MAX) {
    atomic_max(out + off, v);
  } else if constexpr (OP == OP_MIN) {
    atomic_min(out + off, v);
  } else if constexpr (OP == OP_STORE) {
    out[off] = v;
  } else if constexpr (OP == OP_CLAIM) {
    if (wide_key) atomicMax((unsigned long long*)winner + off, (unsigned long long)key);
    else atomicMax((unsigned int*)winner + off, (unsigned int)key);
  } else {
    if (winner_is(winner, wide_key, off, key)) out[off] = v;
  }
}

// Update i (compact updates) goes to out[start(idx at i * m.k)], window key i + 1. One
// index component (the common case) keeps SCATTER_UNROLL updates in flight per thread.
template <class T, int OP>
__global__ void __launch_bounds__(256, 4) scatter_scalar(T* out, const T* __restrict__ upd,
                                                         const void* __restrict__ idx,
                                                         IndexMap m, i64 n, void* winner,
                                                         int wide_key) {
  tf::grid_wait();
  const i64 tile = (i64)blockDim.x * SCATTER_UNROLL;
  const i64 hi = m.hi[0], stride = m.stride[0];
  for (i64 t0 = (i64)blockIdx.x * tile + threadIdx.x; t0 < n; t0 += (i64)gridDim.x * tile) {
    if (m.k != 1) {
      for (int j = 0; j < SCATTER_UNROLL; ++j) {
        const i64 i = t0 + (i64)j * blockDim.x;
        i64 off;
        if (i < n && checked_start(m, idx, i * m.k, off)) {
          T v;
          if constexpr (OP != OP_CLAIM) v = upd[i];
          apply<T, OP>(out, off, v, winner, wide_key, i + 1);
        }
      }
      continue;
    }
    i64 off[SCATTER_UNROLL];
#pragma unroll
    for (int j = 0; j < SCATTER_UNROLL; ++j) {
      const i64 i = t0 + (i64)j * blockDim.x;
      const i64 v = i < n ? load_index(idx, i, m.wide) : -1;
      off[j] = v >= 0 && v <= hi ? v * stride : -1;
    }
    T v[SCATTER_UNROLL];
    if constexpr (OP != OP_CLAIM) {
#pragma unroll
      for (int j = 0; j < SCATTER_UNROLL; ++j) {
        if (off[j] >= 0) v[j] = upd[t0 + (i64)j * blockDim.x];
      }
    }
#pragma unroll
    for (int j = 0; j < SCATTER_UNROLL; ++j) {
      if (off[j] >= 0) apply<T, OP>(out, off[j], v[j], winner, wide_key, t0 + (i64)j * blockDim.x + 1);
    }
  }
}

// scatter_add: the add combiner on scatter_scalar's geometry. Measured on an H200 (2^26
// random float32 updates, int64 indices, 2^24-element result; tools/experiments/
// index_variants.py): atomicAdd with 4 updates per thread 324 GB/s (PyTorch index_add_
// 329); more updates in flight, vector index loads, other block or grid sizes 327-329;
// evict-first (ld.global.cs) index/update loads 342; red.global.add with an L2 evict_last
// policy 369; both, with 4 vectors of 4 updates per thread at 256 threads: 382. That last
// shape is this kernel: a block tile is 256 * UN * ADD_VEC updates, thread t takes
// vectors t, t + 256, ... of ADD_VEC consecutive updates (vec = 1: index and update
// vector loads, the host checked the alignment) or, vec = 0, update j * 256 + t of the
// tile (scalar loads, each instruction coalesced). Index vectors of k != 1 components and
// the last partial tile go update by update. keep = 1: the reductions mark their L2 lines
// evict_last (sm_80+; ignored below); the host then runs scatter_l2_normal over the result.
template <class T> struct add_tile {
  static const int un = sizeof(T) <= 4 ? 4 : (sizeof(T) == 8 ? 2 : 1);  // <= 64 B in flight
};

template <class T, bool HINT>
__device__ __forceinline__ void add_loop(T* out, const T* __restrict__ upd,
                                         const void* __restrict__ idx, const IndexMap& m,
                                         i64 n, int vec) {
  constexpr int K = add_tile<T>::un * ADD_VEC;
  const u64 pol = HINT ? keep_policy() : 0;
  const i64 tile = (i64)blockDim.x * K;
  const i64 hi = m.hi[0], stride = m.stride[0];
  for (i64 t = (i64)blockIdx.x * tile; t < n; t += (i64)gridDim.x * tile) {
    if (m.k == 1 && t + tile <= n) {
      i64 k[K];
      T v[K];
      if (vec) {
#pragma unroll
        for (int j = 0; j < K / ADD_VEC; ++j) {
          const i64 i = t + ((i64)j * blockDim.x + threadIdx.x) * ADD_VEC;
          load_index4_cs(idx, i, m.wide, k + j * ADD_VEC);
          ld4_cs(upd + i, v + j * ADD_VEC);
        }
      } else {
#pragma unroll
        for (int j = 0; j < K; ++j) {
          const i64 i = t + (i64)j * blockDim.x + threadIdx.x;
          k[j] = load_index_cs(idx, i, m.wide);
          v[j] = ld_cs(upd + i);
        }
      }
#pragma unroll
      for (int j = 0; j < K; ++j) {
        if (k[j] >= 0 && k[j] <= hi) red_add(out + k[j] * stride, v[j], pol, HINT);
      }
      continue;
    }
    const i64 end = t + tile < n ? t + tile : n;
    for (i64 i = t + threadIdx.x; i < end; i += blockDim.x) {
      i64 off;
      if (checked_start(m, idx, i * m.k, off)) red_add(out + off, ld_cs(upd + i), pol, HINT);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256) scatter_add(T* out, const T* __restrict__ upd,
                                                   const void* __restrict__ idx, IndexMap m,
                                                   i64 n, int vec, int keep) {
  tf::grid_wait();
  if (keep) add_loop<T, true>(out, upd, idx, m, n, vec);
  else add_loop<T, false>(out, upd, idx, m, n, vec);
}

// Demotes the L2 lines of [p, p + nbytes) to normal eviction priority, after a
// scatter_add with keep = 1: evict_last lines would otherwise stay ahead of every later
// kernel's data in L2 until they are evicted or demoted (the H200 experiment demotes them
// the same way before timing anything else).
__global__ void __launch_bounds__(256) scatter_l2_normal(const char* p, i64 nbytes) {
  tf::grid_wait();
#if __CUDA_ARCH__ >= 800
  const u64 g = (u64)__cvta_generic_to_global(p);
  const u64 end = g + (u64)nbytes, step = (u64)gridDim.x * blockDim.x * 128;
  for (u64 a = (g & ~127ull) + ((u64)blockIdx.x * blockDim.x + threadIdx.x) * 128;
       a < end; a += step) {
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(a) : "memory");
  }
#endif
}

// Update i (compact updates, any geometry) goes to out[a(i) + start(b(i))], key c(i) + 1.
template <class T, int OP, class I>
__global__ void __launch_bounds__(256, 4) scatter_general(T* out, const T* __restrict__ upd,
                                                       Geometry g,
                                                       const void* __restrict__ idx, IndexMap m,
                                                       I n, void* winner, int wide_key) {
  tf::grid_wait();
  constexpr bool KEY = OP == OP_CLAIM || OP == OP_COMMIT;
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 a, b, c, start;
    geometry_offsets<I, KEY>(g, i, a, b, c);
    if (!checked_start(m, idx, b, start)) continue;
    T v;
    if constexpr (OP != OP_CLAIM) v = upd[i];
    apply<T, OP>(out, a + start, v, winner, wide_key, c + 1);
  }
}

}  // namespace tf
