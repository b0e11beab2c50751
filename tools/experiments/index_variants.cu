// Candidate kernels of tools/experiments/index_variants.py (issue 5 indexing targets),
// float32 data, int64 indices. Template parameters pick the variant:
//   BS  block size (also the launch bound)      UN  independent vectors per thread
//   VEC int64 indices per vector load (1, 2, 4; 4 = two 16-byte loads)
//   TH  table / source load: 0 ld.global.nc (__ldg), 1 ld.global.nc.L1::no_allocate,
//       2 ld.global.cs (__ldcs, evict-first), 3 ld.global.cg (__ldcg, L2 only)
//   SH  1: streaming hints on index/update loads (ld.global.cs) and stores (st.global.cs)
// Self-contained (no tenferro headers): only NVRTC's built-in vector types and intrinsics.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

// ---- loads and stores -------------------------------------------------------------------
template <int TH> __device__ __forceinline__ float ldf(const float* p) {
  if constexpr (TH == 0) return __ldg(p);
  else if constexpr (TH == 1) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
  } else if constexpr (TH == 2) return __ldcs(p);
  else return __ldcg(p);
}

template <int TH> __device__ __forceinline__ float4 ld4(const float4* p) {
  if constexpr (TH == 0) return __ldg(p);
  else if constexpr (TH == 1) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
  } else if constexpr (TH == 2) return __ldcs(p);
  else return __ldcg(p);
}

template <int SH> __device__ __forceinline__ void st(float* p, float v) {
  if constexpr (SH) __stcs(p, v); else *p = v;
}
template <int SH> __device__ __forceinline__ void st(float2* p, float2 v) {
  if constexpr (SH) __stcs(p, v); else *p = v;
}
template <int SH> __device__ __forceinline__ void st(float4* p, float4 v) {
  if constexpr (SH) __stcs(p, v); else *p = v;
}

// VEC consecutive int64 indices / floats from p (aligned to VEC elements).
template <int VEC, int SH> __device__ __forceinline__ void ld_idx(const i64* p, i64* k) {
  if constexpr (VEC == 1) {
    k[0] = SH ? __ldcs((const long long*)p) : __ldg((const long long*)p);
  } else {
#pragma unroll
    for (int h = 0; h < VEC / 2; ++h) {
      const longlong2* q = (const longlong2*)p + h;
      const longlong2 w = SH ? __ldcs(q) : __ldg(q);
      k[2 * h] = w.x;
      k[2 * h + 1] = w.y;
    }
  }
}

template <int VEC, int SH> __device__ __forceinline__ void ld_vals(const float* p, float* v) {
  if constexpr (VEC == 1) {
    v[0] = SH ? __ldcs(p) : __ldg(p);
  } else if constexpr (VEC == 2) {
    const float2 w = SH ? __ldcs((const float2*)p) : __ldg((const float2*)p);
    v[0] = w.x; v[1] = w.y;
  } else {
    const float4 w = SH ? __ldcs((const float4*)p) : __ldg((const float4*)p);
    v[0] = w.x; v[1] = w.y; v[2] = w.z; v[3] = w.w;
  }
}

template <int VEC, int SH> __device__ __forceinline__ void st_vals(float* p, const float* v) {
  if constexpr (VEC == 1) st<SH>(p, v[0]);
  else if constexpr (VEC == 2) st<SH>((float2*)p, make_float2(v[0], v[1]));
  else st<SH>((float4*)p, make_float4(v[0], v[1], v[2], v[3]));
}

__device__ __forceinline__ i64 clampi(i64 v, i64 hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

// ---- random gather: out[i] = table[clamp(idx[i])] ----------------------------------------
// A block tile is BS * UN * VEC elements; thread t handles vectors t, t + BS, ... of VEC
// consecutive elements, so every index load and store instruction stays coalesced.
// PH = 1: software pipeline over the grid-stride loop: the next tile's indices are loaded
// before this tile's table loads (needs a grid smaller than the work).
template <int BS, int UN, int VEC, int SH>
__device__ __forceinline__ void ld_tile(const i64* p, i64* k) {
#pragma unroll
  for (int j = 0; j < UN; ++j) ld_idx<VEC, SH>(p + ((i64)j * BS + threadIdx.x) * VEC, k + j * VEC);
}

template <int BS, int UN, int VEC, int TH, int SH, int PH = 0>
__global__ void __launch_bounds__(BS) gather_v(float* __restrict__ out,
                                               const float* __restrict__ table,
                                               const i64* __restrict__ idx, i64 n, i64 hi) {
  constexpr int K = UN * VEC;
  constexpr i64 TILE = (i64)BS * K;
  const i64 stride = (i64)gridDim.x * TILE;
  i64 k[K];
  i64 t = (i64)blockIdx.x * TILE;
  if (PH && t + TILE <= n) ld_tile<BS, UN, VEC, SH>(idx + t, k);
  for (; t < n; t += stride) {
    if (t + TILE <= n) {
      i64 kn[K];
      if (!PH) ld_tile<BS, UN, VEC, SH>(idx + t, k);
      if (PH && t + stride + TILE <= n) ld_tile<BS, UN, VEC, SH>(idx + t + stride, kn);
      float v[K];
#pragma unroll
      for (int j = 0; j < K; ++j) v[j] = ldf<TH>(table + clampi(k[j], hi));
#pragma unroll
      for (int j = 0; j < UN; ++j) st_vals<VEC, SH>(out + t + ((i64)j * BS + threadIdx.x) * VEC, v + j * VEC);
      if (PH) {
#pragma unroll
        for (int j = 0; j < K; ++j) k[j] = kn[j];
      }
    } else {
      for (i64 i = t + threadIdx.x; i < n; i += BS) out[i] = ldf<TH>(table + clampi(idx[i], hi));
    }
  }
}

// ---- embedding: out row r (W4 float4) = table row clamp(idx[r]) ---------------------------
// A group of G lanes per row, W4 / G vectors per lane, R rows per group, all in flight.
template <int BS, int W4, int G, int R, int TH, int SH>
__global__ void __launch_bounds__(BS) embed_v(float4* __restrict__ out,
                                              const float4* __restrict__ table,
                                              const i64* __restrict__ idx, i64 rows, i64 hi) {
  constexpr int PER = W4 / G, GPB = BS / G;
  const int lane = threadIdx.x % G;
  const i64 step = (i64)gridDim.x * GPB * R;
  for (i64 r0 = ((i64)blockIdx.x * GPB + threadIdx.x / G) * R; r0 < rows; r0 += step) {
    const float4* src[R];
#pragma unroll
    for (int q = 0; q < R; ++q) {
      src[q] = r0 + q < rows ? table + clampi(__ldg((const long long*)idx + r0 + q), hi) * W4 : nullptr;
    }
    float4 v[R][PER];
#pragma unroll
    for (int q = 0; q < R; ++q) {
#pragma unroll
      for (int p = 0; p < PER; ++p) {
        if (src[q]) v[q][p] = ld4<TH>(src[q] + lane + p * G);
      }
    }
#pragma unroll
    for (int q = 0; q < R; ++q) {
#pragma unroll
      for (int p = 0; p < PER; ++p) {
        if (src[q]) st<SH>(out + (r0 + q) * W4 + lane + p * G, v[q][p]);
      }
    }
  }
}

// ---- scatter-add: out[idx[i]] += upd[i] (indices outside [0, hi] skipped) ---------------
// AT: 0 atomicAdd (result unused), 1 red.global.add.f32, 2 red with an L2 evict_last policy.
template <int AT> __device__ __forceinline__ void red_add(float* p, float v, u64 pol) {
  if constexpr (AT == 0) atomicAdd(p, v);
  else if constexpr (AT == 1) asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
  else asm volatile("red.global.add.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(pol) : "memory");
}

template <int BS, int UN, int VEC, int AT, int SH>
__global__ void __launch_bounds__(BS) scatter_v(float* out, const float* __restrict__ upd,
                                                const i64* __restrict__ idx, i64 n, i64 hi) {
  u64 pol = 0;
  if constexpr (AT == 2) asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  constexpr i64 TILE = (i64)BS * UN * VEC;
  for (i64 t = (i64)blockIdx.x * TILE; t < n; t += (i64)gridDim.x * TILE) {
    if (t + TILE <= n) {
      i64 k[UN * VEC];
      float v[UN * VEC];
#pragma unroll
      for (int j = 0; j < UN; ++j) ld_idx<VEC, SH>(idx + t + ((i64)j * BS + threadIdx.x) * VEC, k + j * VEC);
#pragma unroll
      for (int j = 0; j < UN; ++j) ld_vals<VEC, SH>(upd + t + ((i64)j * BS + threadIdx.x) * VEC, v + j * VEC);
#pragma unroll
      for (int j = 0; j < UN * VEC; ++j) {
        if (k[j] >= 0 && k[j] <= hi) red_add<AT>(out + k[j], v[j], pol);
      }
    } else {
      for (i64 i = t + threadIdx.x; i < n; i += BS) {
        const i64 k = idx[i];
        if (k >= 0 && k <= hi) red_add<AT>(out + k, upd[i], pol);
      }
    }
  }
}

// ---- row copies of float4 (slice 16-byte aligned, concatenate, reverse) -----------------
// dst row r (cols4 vectors, pitch dld4): columns [0, seg4) from src0, [seg4, cols4) from
// src1 (concatenate along the last axis); source pitch sld4 (negative: reversed rows).
// REV reverses each row (only with seg4 == cols4). Grid: x over row tiles of BS * UN, y rows.
template <int BS, int UN, int REV, int SH>
__global__ void __launch_bounds__(BS) rows_v4(float4* dst, const float4* __restrict__ src0,
                                              const float4* __restrict__ src1, i64 rows,
                                              i64 cols4, i64 seg4, i64 dld4, i64 sld4) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    for (i64 c0 = (i64)blockIdx.x * BS * UN + threadIdx.x; c0 < cols4; c0 += (i64)gridDim.x * BS * UN) {
      float4 v[UN];
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 c = c0 + (i64)j * BS;
        if (c < cols4) {
          const bool second = c >= seg4;
          const i64 s = second ? c - seg4 : c;
          const float4* in = (second ? src1 : src0) + r * sld4;
          v[j] = __ldg(in + (REV ? seg4 - 1 - s : s));
        }
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 c = c0 + (i64)j * BS;
        if (c < cols4) {
          float4 w = v[j];
          if (REV) w = make_float4(w.w, w.z, w.y, w.x);
          st<SH>(dst + r * dld4 + c, w);
        }
      }
    }
  }
}

// ---- shifted rows (slice at any offset, edge pad) ----------------------------------------
// Compact output rows x cols; output (r, c) = src[(r - rlo) * sld + c - lo] when
// 0 <= r - rlo < srows and 0 <= c - lo < ext, else `value`. `src` is 16-byte aligned.
__device__ __forceinline__ float4 funnel(float4 a, float4 b, int s) {
  switch (s) {
    case 0: return a;
    case 1: return make_float4(a.y, a.z, a.w, b.x);
    case 2: return make_float4(a.z, a.w, b.x, b.y);
    default: return make_float4(a.w, b.x, b.y, b.z);
  }
}

__device__ __forceinline__ float4 mask4(float4 v, i64 e, i64 ext, float value) {
  if (e >= 0 && e + 3 < ext) return v;
  v.x = e >= 0 && e < ext ? v.x : value;
  v.y = e + 1 >= 0 && e + 1 < ext ? v.y : value;
  v.z = e + 2 >= 0 && e + 2 < ext ? v.z : value;
  v.w = e + 3 >= 0 && e + 3 < ext ? v.w : value;
  return v;
}

// 16-byte stores from aligned 16-byte loads: lane i takes the next aligned vector from
// lane i + 1 (shuffle); lane 31 loads it. A vector is loaded only if it holds a valid
// element (so nothing outside the source is touched). The tile loop is warp-uniform.
template <int BS, int UN, int SH>
__global__ void __launch_bounds__(BS) shift_v4(float4* out, const float* __restrict__ src,
                                               i64 rows, i64 cols4, i64 sld, i64 rlo,
                                               i64 srows, i64 lo, i64 ext, float value) {
  const float4* s4 = (const float4*)src;
  const bool last_lane = (threadIdx.x & 31) == 31;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 sr = r - rlo;
    const bool row_ok = sr >= 0 && sr < srows;
    const i64 beg = sr * sld, end = beg + ext;  // valid source positions [beg, end)
    for (i64 t = (i64)blockIdx.x * BS * UN; t < cols4; t += (i64)gridDim.x * BS * UN) {
      float4 a[UN], b[UN];
      int sh = 0;
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 q = t + (i64)j * BS + threadIdx.x;
        const i64 g = beg + 4 * q - lo;  // source position of output element 4q
        sh = (int)(g & 3);
        const i64 al = g - sh;
        a[j] = b[j] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row_ok && al + 3 >= beg && al < end) a[j] = __ldg(s4 + (al >> 2));
        if (last_lane && row_ok && al + 7 >= beg && al + 4 < end) b[j] = __ldg(s4 + (al >> 2) + 1);
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const float bx = __shfl_down_sync(0xffffffffu, a[j].x, 1);
        const float by = __shfl_down_sync(0xffffffffu, a[j].y, 1);
        const float bz = __shfl_down_sync(0xffffffffu, a[j].z, 1);
        if (!last_lane) b[j] = make_float4(bx, by, bz, 0.f);
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 q = t + (i64)j * BS + threadIdx.x;
        if (q < cols4) {
          float4 v = make_float4(value, value, value, value);
          if (row_ok) v = mask4(funnel(a[j], b[j], sh), 4 * q - lo, ext, value);
          st<SH>(out + r * cols4 + q, v);
        }
      }
    }
  }
}

// 16-byte stores, four 4-byte loads per vector.
template <int BS, int UN, int SH>
__global__ void __launch_bounds__(BS) shift_v4s(float4* out, const float* __restrict__ src,
                                                i64 rows, i64 cols4, i64 sld, i64 rlo,
                                                i64 srows, i64 lo, i64 ext, float value) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 sr = r - rlo;
    const bool row_ok = sr >= 0 && sr < srows;
    const float* in = src + sr * sld;
    for (i64 q0 = (i64)blockIdx.x * BS * UN + threadIdx.x; q0 < cols4; q0 += (i64)gridDim.x * BS * UN) {
      float v[UN][4];
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 q = q0 + (i64)j * BS;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const i64 e = 4 * q + k - lo;
          v[j][k] = row_ok && q < cols4 && e >= 0 && e < ext ? __ldg(in + e) : value;
        }
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 q = q0 + (i64)j * BS;
        if (q < cols4) st<SH>(out + r * cols4 + q, make_float4(v[j][0], v[j][1], v[j][2], v[j][3]));
      }
    }
  }
}

// 4-byte loads and stores (the library's shape for these cases, any grid).
template <int BS, int UN>
__global__ void __launch_bounds__(BS) shift_u32(float* out, const float* __restrict__ src,
                                                i64 rows, i64 cols, i64 sld, i64 rlo,
                                                i64 srows, i64 lo, i64 ext, float value) {
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const i64 sr = r - rlo;
    const bool row_ok = sr >= 0 && sr < srows;
    const float* in = src + sr * sld;
    for (i64 c0 = (i64)blockIdx.x * BS * UN + threadIdx.x; c0 < cols; c0 += (i64)gridDim.x * BS * UN) {
      float v[UN];
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 c = c0 + (i64)j * BS, e = c - lo;
        v[j] = row_ok && c < cols && e >= 0 && e < ext ? __ldg(in + e) : value;
      }
#pragma unroll
      for (int j = 0; j < UN; ++j) {
        const i64 c = c0 + (i64)j * BS;
        if (c < cols) out[r * cols + c] = v[j];
      }
    }
  }
}

// ---- data generation and checks ---------------------------------------------------------
__device__ __forceinline__ u64 mix64(u64 z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Distinct-looking 32-bit patterns for bit-exact checks; bit 30 clear: never NaN or Inf.
__global__ void fill_bits(u32* p, u64 n, u64 seed) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    p[i] = (u32)mix64(i ^ (seed << 40)) & 0xbfffffffu;
}

// Demote the L2 lines of [p, p + nbytes) to normal eviction priority (after AT == 2).
__global__ void l2_normal(const char* p, u64 nbytes) {
  for (u64 o = ((u64)blockIdx.x * blockDim.x + threadIdx.x) * 128; o < nbytes; o += (u64)gridDim.x * blockDim.x * 128)
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(p + o) : "memory");
}

// Floats in [0, 1).
__global__ void fill_unit(float* p, u64 n, u64 seed) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    p[i] = (float)(mix64(i ^ (seed << 40)) >> 40) * (1.0f / 16777216.0f);
}

// Uniform indices in [0, mod).
__global__ void fill_index(i64* p, u64 n, u64 mod, u64 seed) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    p[i] = (i64)(mix64(i ^ (seed << 40)) % mod);
}

// *count += elements of a and b that differ: bit patterns (tol == 0) or
// |a - b| > tol * (1 + |b|) as floats.
__global__ void count_diff(const u32* a, const u32* b, u64 n, float tol, u64* count) {
  u64 bad = 0;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    if (tol == 0.f) {
      bad += a[i] != b[i];
    } else {
      const float x = __uint_as_float(a[i]), y = __uint_as_float(b[i]);
      bad += !(fabsf(x - y) <= tol * (1.f + fabsf(y)));
    }
  }
  if (bad) atomicAdd(count, bad);
}
