// Experiment: random scalar gather from a table much larger than L2, done in three passes
// so that the table is read chunk by chunk while each chunk sits in L2 (see
// gather_partition.py). 32-bit elements, int64 indices clamped to [0, hi].
//
//  split:  block b takes R indices, sorts them by chunk (index >> shift) in shared memory
//          and writes the in-chunk offsets (keys, into the result buffer) and each one's
//          position in the block (u16) in that order, plus offs[t * nb + b] = where chunk
//          t starts in block b's run (row T holds the run's length).
//  gather: persistent blocks take work items in chunk-major order from a counter; an item
//          is ITEM consecutive blocks' runs of one chunk t: key -> table[(t << shift) + key],
//          written back in place. PF: 1 = prefetch.global.L2 of a slice of chunk t + 1 per
//          item, 2 = cp.async.bulk.prefetch.L2 of that slice, 0 = none. TH: 1 = table
//          loads ld.global.cg (L2 only), 0 = ld.global.nc.
//  (split LF: 1 = all of a thread's index loads issued before its shared atomics.)
//  place:  block b moves its R values back to index order through shared memory.
// Self-contained: only NVRTC's built-in types and intrinsics.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

#define TMAX 512

template <int BS, int R, int LF>
__global__ void __launch_bounds__(BS) gp_split(const i64* __restrict__ idx, i64 n, i64 hi,
                                               u32 shift, u32 T, u32 nb,
                                               u32* __restrict__ keys, u16* __restrict__ pos,
                                               u32* __restrict__ offs, u32* counter) {
  constexpr int PER = R / BS;
  __shared__ u32 cnt[TMAX + 1];
  __shared__ u32 skey[R];
  __shared__ u16 spos[R];
  if (blockIdx.x == 0 && threadIdx.x == 0) *counter = 0;
  const i64 b0 = (i64)blockIdx.x * R;
  const int m = (int)(n - b0 < R ? n - b0 : R);
  for (int t = threadIdx.x; t <= TMAX; t += BS) cnt[t] = 0;
  __syncthreads();
  const u64 mask = (1ull << shift) - 1;
  u32 lk[PER], lr[PER];
  i64 raw[LF ? PER : 1];
  if (LF) {  // every index load in flight before the first shared atomic
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int i = threadIdx.x + j * BS;
      raw[LF ? j : 0] = i < m ? __ldcs(idx + b0 + i) : 0;
    }
  }
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * BS;
    if (i < m) {
      i64 v = LF ? raw[LF ? j : 0] : __ldcs(idx + b0 + i);
      v = v < 0 ? 0 : (v > hi ? hi : v);
      const u32 t = (u32)((u64)v >> shift);
      lk[j] = (u32)((u64)v & mask);
      lr[j] = (t << 16) | atomicAdd(&cnt[t], 1u);
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scan of cnt[0, T) by one warp
    const int lane = threadIdx.x, per = (int)(T + 31) / 32;
    u32 sum = 0;
    for (int k = 0; k < per; ++k) {
      const int t = lane * per + k;
      if (t < (int)T) sum += cnt[t];
    }
    u32 incl = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const u32 y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    u32 run = incl - sum;
    for (int k = 0; k < per; ++k) {
      const int t = lane * per + k;
      if (t < (int)T) {
        const u32 c = cnt[t];
        cnt[t] = run;
        run += c;
      }
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t <= (int)T; t += BS)
    offs[(u64)t * nb + blockIdx.x] = t < (int)T ? cnt[t] : (u32)m;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * BS;
    if (i < m) {
      const u32 slot = cnt[lr[j] >> 16] + (lr[j] & 0xffffu);
      skey[slot] = lk[j];
      spos[slot] = (u16)i;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += BS) {
    __stcs(keys + b0 + i, skey[i]);
    __stcs(pos + b0 + i, spos[i]);
  }
}

template <int BS, int U, int PF, int ITEM, int TH>
__global__ void __launch_bounds__(BS) gp_gather(const u32* __restrict__ table, u64 table_n,
                                                u32 shift, u32 T, u32 nb, u32 R,
                                                const u32* __restrict__ offs, u32* keyval,
                                                u32* counter) {
  __shared__ u32 item;
  const u32 groups = (nb + ITEM - 1) / ITEM, items = groups * T;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) item = atomicAdd(counter, 1u);
    __syncthreads();
    const u32 w = item;
    if (w >= items) return;
    const u32 t = w / groups, g = w % groups;
    if (PF && t + 1 < T) {  // this item's share of chunk t + 1
      const u64 c0 = (u64)(t + 1) << shift;
      const u64 c1 = c0 + (1ull << shift) < table_n ? c0 + (1ull << shift) : table_n;
      const u64 per = ((c1 - c0 + groups - 1) / groups + 31) & ~31ull;
      const u64 s = c0 + (u64)g * per, e = s + per < c1 ? s + per : c1;
      if (PF == 1) {
        for (u64 a = s + (u64)threadIdx.x * 32; a < e; a += (u64)BS * 32)
          asm volatile("prefetch.global.L2 [%0];" ::"l"(table + a));
      } else if (threadIdx.x == 0 && s < e) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(table + s),
                     "r"((u32)((e - s) * 4 + 15) & ~15u) : "memory");
      }
    }
    const u32* chunk = table + ((u64)t << shift);
    const u32 bend = (g + 1) * ITEM < nb ? (g + 1) * ITEM : nb;
    for (u32 b = g * ITEM + warp; b < bend; b += BS / 32) {
      const u32 s = offs[(u64)t * nb + b], e = offs[(u64)(t + 1) * nb + b];
      u32* kv = keyval + (u64)b * R;
      for (u32 j0 = s + lane; j0 < e; j0 += 32 * U) {
        u32 k[U], v[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j0 + u * 32 < e) k[u] = __ldcs(kv + j0 + u * 32);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j0 + u * 32 < e) v[u] = TH ? __ldcg(chunk + k[u]) : __ldg(chunk + k[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j0 + u * 32 < e) __stcs(kv + j0 + u * 32, v[u]);
      }
    }
  }
}

template <int BS, int R>
__global__ void __launch_bounds__(BS) gp_place(u32* __restrict__ out,
                                               const u16* __restrict__ pos, i64 n) {
  __shared__ u32 s[R];
  const i64 b0 = (i64)blockIdx.x * R;
  const int m = (int)(n - b0 < R ? n - b0 : R);
  for (int i = threadIdx.x; i < m; i += BS) s[__ldcs(pos + b0 + i)] = __ldcs(out + b0 + i);
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += BS) __stcs(out + b0 + i, s[i]);
}
