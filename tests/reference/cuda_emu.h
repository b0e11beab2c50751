// The host emulation of the CUDA built-ins for the CPU tier: see cuda_emu.py.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <math.h>
#include <sys/mman.h>
#include <ucontext.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
using std::isinf;
using std::isnan;
using std::isfinite;
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) longlong2 { long long x, y; };
struct alignas(16) ulonglong2 { unsigned long long x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
inline emu_dim3 threadIdx, blockIdx, blockDim, gridDim;  // threadIdx: the running fiber's
struct EmuFiber { ucontext_t ctx; emu_dim3 tid; bool done = false; };
constexpr std::size_t EMU_STACK = 128 * 1024, EMU_GUARD = 4096, EMU_THREADS = 1024;
inline EmuFiber emu_fibers[EMU_THREADS];
inline char* emu_stacks = nullptr;  // EMU_THREADS x (guard page, stack)
inline ucontext_t emu_main;
inline unsigned emu_cur = 0;
inline unsigned emu_launches = 0;
inline bool emu_progress = false;  // a barrier reached or a fiber ended since the last switch
inline void (*emu_body)(void*) = nullptr;
inline void* emu_body_arg = nullptr;
inline void emu_yield() { swapcontext(&emu_fibers[emu_cur].ctx, &emu_main); }
struct EmuBarrier {  // reusable
  unsigned n = 0, waiting = 0, gen = 0;
  void wait() {
    unsigned g = gen;
    emu_progress = true;
    if (++waiting == n) { waiting = 0; ++gen; return; }
    while (gen == g) emu_yield();
  }
};
inline EmuBarrier emu_block, emu_warp[EMU_THREADS / 32];
inline unsigned char emu_xchg[EMU_THREADS][16];
inline void __syncthreads() { emu_block.wait(); }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
// Conversions rounding toward zero: the nearest float, stepped toward zero if it is farther.
inline float __double2float_rz(double d) {
  float f = (float)d;
  if (std::isfinite(d) && std::fabs((double)f) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return f;
}
inline float __ll2float_rz(long long v) {
  float f = (float)v;
  const __int128 g = (__int128)f;
  if ((v >= 0 && g > v) || (v < 0 && g < v)) f = std::nextafter(f, 0.0f);
  return f;
}
inline float __ull2float_rz(unsigned long long v) {
  float f = (float)v;
  if ((unsigned __int128)f > v) f = std::nextafter(f, 0.0f);
  return f;
}
inline long long __float2ll_rz(float f) { return (long long)f; }
inline unsigned long long __float2ull_rz(float f) { return (unsigned long long)f; }
// The PTX conversions of types.cuh (cvt.f32.f16, cvt.rn.f16.f32/f64, cvt.rn.bf16.f32),
// put in their place by PTX_CONVERSIONS: exact widening, round to nearest even.
inline float emu_f16_to_f32(unsigned short h) {
  const unsigned sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  unsigned u;
  if (e == 0x1fu) {
    u = sign | 0x7f800000u | (m << 13);  // infinity, NaN (payload kept)
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    const float f = (float)m * 5.9604644775390625e-08f;  // m x 2^-24, exact
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned short emu_f64_to_f16(double d) {
  const unsigned short sign = std::signbit(d) ? 0x8000u : 0u;
  const double a = std::fabs(d);
  if (a != a) return sign | 0x7e00u;
  if (a >= 65520.0) return sign | 0x7c00u;  // the midpoint above 65504 rounds up (even)
  if (a < 6.103515625e-05) return sign | (unsigned short)std::nearbyint(a * 16777216.0);
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  double r = std::nearbyint(std::ldexp(a, 11 - e));  // 11 significant bits: [1024, 2048]
  if (r == 2048.0) { r = 1024.0; ++e; }
  return sign | (unsigned short)(((unsigned)(e + 14) << 10) | ((unsigned)r - 1024u));
}
inline unsigned short emu_f32_to_f16(float f) { return emu_f64_to_f16((double)f); }
inline unsigned short emu_f32_to_bf16(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
inline long long __double_as_longlong(double d) { long long i; std::memcpy(&i, &d, 8); return i; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll((unsigned long long)v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
alignas(16) inline unsigned char emu_dynamic_smem[227 * 1024];  // extern __shared__ arrays
template <class... P, std::size_t... I>
void emu_call(void (*k)(P...), void** a, std::index_sequence<I...>) {
  k(*reinterpret_cast<std::remove_reference_t<P>*>(a[I])...);
}
// Call kernel k with the parameters of a cuLaunchKernel-style array (a[i]: the address of
// parameter i), read at the types of k's own signature.
template <class... P> void emu_call(void (*k)(P...), void** a) {
  emu_call(k, a, std::index_sequence_for<P...>{});
}
inline int atomicCAS(int* p, int c, int v) {
  return __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST), c;
}
inline void emu_fiber_main() {
  for (unsigned z = 0; z < gridDim.z; ++z)
    for (unsigned y = 0; y < gridDim.y; ++y)
      for (unsigned x = 0; x < gridDim.x; ++x) {
        blockIdx = {x, y, z};
        emu_body(emu_body_arg);
        emu_block.wait();
      }
  emu_fibers[emu_cur].done = true;
  emu_progress = true;
}  // returns to emu_main (uc_link)
inline void emu_stacks_once() {
  if (emu_stacks != nullptr) return;
  const std::size_t slot = EMU_GUARD + EMU_STACK;
  void* m = mmap(nullptr, EMU_THREADS * slot, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) std::abort();
  emu_stacks = static_cast<char*>(m);
  for (std::size_t t = 0; t < EMU_THREADS; ++t)  // a stack overflow faults, not corrupts
    mprotect(emu_stacks + t * slot, EMU_GUARD, PROT_NONE);
}
// Run kernel() (a callable) on a grid of (gx, gy, gz) blocks of (bx, by) threads.
template <class F>
void emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, F kernel) {
  const unsigned nt = bx * by;
  if (nt == 0 || nt > EMU_THREADS) std::abort();
  gridDim = {gx, gy, gz};
  blockDim = {bx, by, 1};
  emu_block = EmuBarrier{nt, 0, 0};
  for (unsigned w = 0; w * 32 < nt; ++w) emu_warp[w] = EmuBarrier{std::min(32u, nt - 32 * w), 0, 0};
  emu_stacks_once();
  emu_body = [](void* k) { (*static_cast<F*>(k))(); };
  emu_body_arg = &kernel;
  for (unsigned t = 0; t < nt; ++t) {
    EmuFiber& f = emu_fibers[t];
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = emu_stacks + t * (EMU_GUARD + EMU_STACK) + EMU_GUARD;
    f.ctx.uc_stack.ss_size = EMU_STACK;
    f.ctx.uc_link = &emu_main;
    makecontext(&f.ctx, emu_fiber_main, 0);
    f.tid = {t % bx, t / bx, 0};
    f.done = false;
  }
  unsigned live = nt, idle = 0;
  const bool reverse = (emu_launches++ & 1u) != 0;  // a missing barrier shows either way
  for (unsigned i = 0; live > 0; i = i + 1 == nt ? 0 : i + 1) {
    const unsigned t = reverse ? nt - 1 - i : i;
    if (emu_fibers[t].done) continue;
    emu_cur = t;
    threadIdx = emu_fibers[t].tid;
    emu_progress = false;
    swapcontext(&emu_main, &emu_fibers[t].ctx);
    if (emu_fibers[t].done) --live;
    if (emu_progress) {
      idle = 0;
    } else if (++idle > live) {
      std::fprintf(stderr, "emulated barrier: a thread missed a barrier (deadlock)\n");
      std::abort();
    }
  }
}
