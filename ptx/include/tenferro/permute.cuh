// Permutation plans and register vectors for ptx/permute.cu and ptx/structural.cu.
//
// A permutation moves bits, so every kernel here is instantiated per element SIZE
// (S = tf::u8, unsigned short, tf::u32, tf::u64, tf::b128), never per dtype. I is the
// index type: tf::u32 when both buffers hold fewer than 2^32 - 2^20 elements, else tf::u64.
// Offsets are computed in I with wrap-around arithmetic: the host packs signed strides
// modulo 2^bits(I), and every final offset lies in [0, buffer size), so the modular sum is
// exact. The plan structs are packed by tenferro_cuda/ops/storage/plan.py; the
// static_asserts below pin their sizes to the ones the host packs.
#pragma once
#include "types.cuh"

#define TF_ROW_RANK 7   // outer axes of a row copy (8 axes minus the inner one)
#define TF_TILE_RANK 6  // remaining axes of a tiled copy (8 axes minus the two tile axes)
#define TF_PERM_THREADS 256

namespace tf {

template <int BYTES> struct vec_of;
template <> struct vec_of<1> { typedef u8 type; };
template <> struct vec_of<2> { typedef unsigned short type; };
template <> struct vec_of<4> { typedef u32 type; };
template <> struct vec_of<8> { typedef u64 type; };
template <> struct vec_of<16> { typedef b128 type; };

// V consecutive elements of storage type S held as one register vector W (one access).
template <class S, int V> struct lanes {
  typedef typename vec_of<(int)sizeof(S) * V>::type W;
  union U {
    W w;
    S e[V];
  };
};

// Row copy: dst[row r, col c] = src[row r, col c] for rows r < rows, cols c < cols. A row
// is the innermost (destination-fastest) axis; the row's start offsets come from the outer
// axes ext/ss/ds (row-major, innermost last).
template <class I> struct __align__(8) RowPlan {
  I ext[TF_ROW_RANK];
  I ss[TF_ROW_RANK];
  I ds[TF_ROW_RANK];
  I rows;      // product of ext[0..nd)
  I cols;      // inner extent in elements (a multiple of the kernel's V)
  I sst;       // source stride of the inner axis (any value, 0 = broadcast)
  I dst_;      // destination stride of the inner axis (1 whenever V > 1)
  I soff;      // element offsets of the first element
  I doff;
  i32 nd;      // number of outer axes, 0..TF_ROW_RANK
  i32 tpr_log2;  // log2(threads per row), 0..8
  i32 svec;    // 1: sst == 1 and the source runs are V-aligned (vector loads)
  i32 pad_;
};

// Tiled copy: a tile spans the source-fastest axis j and the destination-fastest axis k;
// tiles are numbered tk fastest, then tj, then the remaining axes (row-major).
template <class I> struct __align__(8) TilePlan {
  I ext[TF_TILE_RANK];
  I ss[TF_TILE_RANK];
  I ds[TF_TILE_RANK];
  I nj, nk;    // extents of the tile axes
  I sj, sk;    // source strides along j and k
  I dj, dk;    // destination strides along j and k
  I soff, doff;
  I ntj, ntk;  // tiles along j and k
  u64 ntiles;  // ntj * ntk * product(ext)
  i32 nd;      // number of remaining axes, 0..TF_TILE_RANK
  i32 vec;     // 1: sj == dk == 1 and every vector access is aligned (fast full tiles)
};

// Triangular mask copy over the last two axes (rows x cols) of a compact destination.
template <class I> struct __align__(8) TriPlan {
  I ext[TF_TILE_RANK];  // batch axes (row-major)
  I ss[TF_TILE_RANK];   // their source strides
  I rows, cols;
  I srs, scs;           // source strides of the row and column axes
  I soff;
  I n;                  // elements of the destination
  i64 k;                // diagonal offset
  i32 nd;
  i32 upper;            // 1: triu (keep c - r >= k); 0: tril (keep c - r <= k)
};

static_assert(sizeof(RowPlan<u32>) == 128, "RowPlan<u32> size is packed by the host");
static_assert(sizeof(RowPlan<u64>) == 232, "RowPlan<u64> size is packed by the host");
static_assert(sizeof(TilePlan<u32>) == 128, "TilePlan<u32> size is packed by the host");
static_assert(sizeof(TilePlan<u64>) == 240, "TilePlan<u64> size is packed by the host");
static_assert(sizeof(TriPlan<u32>) == 88, "TriPlan<u32> size is packed by the host");
static_assert(sizeof(TriPlan<u64>) == 160, "TriPlan<u64> size is packed by the host");

}  // namespace tf
