// 09_wmma - Tensor Cores through CUDA's WMMA API (lesson 8 §20-25).
// A block computes a BM x BN tile of C with (BM/W) x (BN/W) warps; each warp owns a W x W warp
// tile, held as (W/16)^2 16x16 accumulator fragments in its registers. Per k-step the block
// copies a BM x BK tile of A and a BK x BN tile of B (fp16, 16 bytes a lane) into shared
// memory; then for each 16-deep slice each warp loads its A and B fragments
// (wmma::load_matrix_sync, SASS LDSM: ldmatrix) and issues one wmma::mma_sync per pair, which
// ptxas turns into two HMMA.16816.F32 (m16n8k16) Tensor Core instructions. Sums stay in fp32.
// PAD extra elements per shared row move consecutive rows to other banks: without it the eight
// 16-byte rows of one ldmatrix phase lie 64 or 256 bytes apart and conflict.
// STAGES 1: each k-step copies its tiles, waits at a barrier, multiplies and waits again, so the
// Tensor Cores idle while the tiles arrive. STAGES > 1: kernel 07's pipeline (§24-25): shared
// memory holds STAGES slots, cp.async copies step t + STAGES - 1 while step t multiplies, one
// barrier per step, and the marks come in two channels (copy: issue, landed; compute: begin,
// computed), both stamped by warp 0. As in kernel 10, the fragments come in two sets: a
// slice's ldmatrix go out before the mma_sync of the slice before it, across the barrier too.
#include <cuda_fp16.h>
#include <mma.h>

#include "cp_async.cuh"
#include "trace.cuh"
#include "shape.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WT
#define WT 32
#endif
#ifndef PAD
#define PAD 8
#endif
#ifndef STAGES
#define STAGES 1
#endif
// fp16 only: for bf16 inputs nvcc (13.0, sm_90) builds load_matrix_sync from generic 4-byte
// loads and register transposes (MOVM), not ldmatrix, so its shared accesses are another kernel's
typedef half elem;

#define WARPS_M (BM / WT)
#define WARPS_N (BN / WT)
#define WARPS (WARPS_M * WARPS_N)
#define THREADS (WARPS * 32)
#define FRAGS (WT / 16)  // fragments per warp along M and along N
#define KK (BK / 16)     // 16-deep slices in a k-step
#define CHUNK 8          // elements in one 16-byte copy
#define LDA (BK + PAD)
#define LDB (BN + PAD)
#define LDC 20  // floats per row of a warp's C staging tile (a multiple of 4, as WMMA needs)

static_assert(BM % WT == 0 && BN % WT == 0 && WT % 16 == 0, "warp tiles of whole fragments");
static_assert(BK % 16 == 0, "a k-step is whole 16-deep MMA slices");
static_assert((BM * BK / CHUNK) % THREADS == 0 && (BK * BN / CHUNK) % THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
static_assert(PAD % 8 == 0, "ldmatrix rows must stay 16-byte aligned");
static_assert(STAGES >= 1 && STAGES <= 17, "1 to 17 stages (trace.cuh's copy channel)");

namespace wmma = nvcuda::wmma;

struct __align__(128) MvTiles {
    elem As[STAGES][BM][LDA];  // slot s holds the A tile of the steps t with t % STAGES == s
    elem Bs[STAGES][BK][LDB];
    float Cs[WARPS][16][LDC];  // each warp's fragment on its way to C
};
// Pipelined, the slots outgrow the 48 KiB a static __shared__ array may have: the struct lives
// in dynamic shared memory, sized at launch; matviz passes the size the description gives.
#ifdef MV_SMEM_BYTES
static_assert(sizeof(MvTiles) == MV_SMEM_BYTES, "shared memory differs from the description");
#endif

// The 16-byte chunk at (r, c) of a row-major rows x cols matrix: one vector load where rows
// are 16-byte aligned and the chunk is whole, else element by element, 0 outside (§26).
__device__ __forceinline__ uint4 load_chunk(const elem *src, int rows, int cols, int r, int c,
                                            bool aligned) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r >= rows) return v;
    const elem *row = src + (size_t)r * cols;
    if (aligned && c + CHUNK <= cols) return *reinterpret_cast<const uint4 *>(row + c);
    elem *h = reinterpret_cast<elem *>(&v);
#pragma unroll
    for (int q = 0; q < CHUNK; ++q) h[q] = c + q < cols ? row[c + q] : elem(0.0f);
    return v;
}

#if STAGES > 1
// The chunk at (r, c) into shared memory ahead of its k-step: one cp.async where rows are
// 16-byte aligned (zero-filled outside), else through registers, element by element (§26).
template <bool FULL>
__device__ __forceinline__ void copy_chunk(elem *to, const elem *src, int rows, int cols, int r,
                                           int c, bool aligned) {
    if (aligned) {
        const bool in = FULL || (r < rows && c < cols);
        cp_async16(to, in ? src + (size_t)r * cols + c : src, in);
    } else {
        *reinterpret_cast<uint4 *>(to) = load_chunk(src, rows, cols, r, c, false);
    }
}

// The copies of k-step `step` into slot `slot` (chunks as in the synchronous copy below).
template <bool FULL>
__device__ __forceinline__ void copy_step(const elem *A, const elem *B, int M, int N, int K,
                                          MvTiles &sm, int step, int slot, bool a_aligned,
                                          bool b_aligned MV_TRACE_DECL) {
    constexpr int CA = BK / CHUNK, CB = BN / CHUNK;
    static_assert(THREADS % CA == 0 && THREADS % CB == 0, "a thread keeps its chunk column");
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    MV_PROBE_BEGIN(step, &sm);
#pragma unroll
    for (int i = 0; i < BM * BK / CHUNK / THREADS; ++i) {
        const int r = tid / CA + i * (THREADS / CA), c = tid % CA * CHUNK;
        copy_chunk<FULL>(&sm.As[slot][r][c], A, M, K, row0 + r, step * BK + c, a_aligned);
        MV_PROBE(MV_SITE_st_As + i, &sm.As[slot][r][c]);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / CHUNK / THREADS; ++i) {
        const int r = tid / CB + i * (THREADS / CB), c = tid % CB * CHUNK;
        copy_chunk<FULL>(&sm.Bs[slot][r][c], B, K, N, step * BK + r, col0 + c, b_aligned);
        MV_PROBE(MV_SITE_st_Bs + i, &sm.Bs[slot][r][c]);
    }
}
#endif

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, elem, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, elem, wmma::row_major> FragB;

// ldmatrix .x4: lane l gives row (l % 8) + 8 * ((l / 8) % 2), column 8 * (l / 16) of the 16x16
// fragment it loads (one 8x8 matrix per 8 lanes); the probe records that row.
// A's fragments i of 16-deep slice kk of slot `slot` (of k-step `step`, for the probe).
__device__ __forceinline__ void load_a(FragA (&a)[FRAGS], MvTiles &sm, int slot, int kk, int wm,
                                       int step MV_TRACE_DECL) {
    const int lane = threadIdx.x % 32, lr = (lane & 7) + ((lane >> 3) & 1) * 8;
    const int lc = (lane >> 4) * 8;
    MV_PROBE_BEGIN(step, &sm);
#pragma unroll
    for (int i = 0; i < FRAGS; ++i) {
        const int r = wm * WT + i * 16;
        wmma::load_matrix_sync(a[i], &sm.As[slot][r][kk * 16], LDA);
        MV_PROBE(MV_SITE_ld_As + kk * FRAGS + i, &sm.As[slot][r + lr][kk * 16 + lc]);
    }
}

// B's fragment j of slice kk, loaded transposed (B is k x n, row-major).
__device__ __forceinline__ void load_b(FragB &b, MvTiles &sm, int slot, int kk, int wn, int j,
                                       int step MV_TRACE_DECL) {
    const int lane = threadIdx.x % 32, lr = (lane & 7) + ((lane >> 3) & 1) * 8;
    const int lc = (lane >> 4) * 8, c = wn * WT + j * 16;
    MV_PROBE_BEGIN(step, &sm);
    wmma::load_matrix_sync(b, &sm.Bs[slot][kk * 16][c], LDB);
    MV_PROBE(MV_SITE_ld_Bs + kk * FRAGS + j, &sm.Bs[slot][kk * 16 + lr][c + lc]);
}

template <bool ALIGNED, bool FULL, bool MV_STAMPED>
__device__ __forceinline__ void wmma_gemm(const elem *A, const elem *B, float *C, int M, int N,
                                          int K, MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;  // the warp's tile in the block's
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool a_aligned = ALIGNED || K % CHUNK == 0, b_aligned = ALIGNED || N % CHUNK == 0;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FRAGS][FRAGS];
#pragma unroll
    for (int i = 0; i < FRAGS; ++i)
#pragma unroll
        for (int j = 0; j < FRAGS; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    const int num_tiles = (K + BK - 1) / BK;
#if STAGES == 1
    MV_PHASES_BEGIN(num_tiles);
    const int slot = 0;
    MV_WARPS_BEGIN(num_tiles);

    for (int t = 0; t < num_tiles; ++t) {
        MV_MARK_ISSUED(t);
        MV_PROBE_BEGIN(t, &sm);
        // chunk e = tid + i*THREADS: 8 consecutive elements of one row, coalesced
#pragma unroll
        for (int i = 0; i < BM * BK / CHUNK / THREADS; ++i) {
            const int e = tid + i * THREADS, r = e / (BK / CHUNK), c = e % (BK / CHUNK) * CHUNK;
            *reinterpret_cast<uint4 *>(&sm.As[slot][r][c]) =
                load_chunk(A, M, K, row0 + r, t * BK + c, a_aligned);
            MV_PROBE(MV_SITE_st_As + i, &sm.As[slot][r][c]);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / CHUNK / THREADS; ++i) {
            const int e = tid + i * THREADS, r = e / (BN / CHUNK), c = e % (BN / CHUNK) * CHUNK;
            *reinterpret_cast<uint4 *>(&sm.Bs[slot][r][c]) =
                load_chunk(B, K, N, t * BK + r, col0 + c, b_aligned);
            MV_PROBE(MV_SITE_st_Bs + i, &sm.Bs[slot][r][c]);
        }
        MV_ARRIVE(t, 0);
        __syncthreads();  // barrier 1: the tiles are complete
        MV_RELEASED(t, 0);
        MV_MARK_LOADED(t);

#pragma unroll
        for (int kk = 0; kk < KK; ++kk) {
            FragA a[FRAGS];
            FragB b;
            load_a(a, sm, slot, kk, wm, t MV_TRACE_FORWARD);
            // one B fragment at a time: FRAGS of them beside FRAGS^2 accumulators would spill
#pragma unroll
            for (int j = 0; j < FRAGS; ++j) {
                load_b(b, sm, slot, kk, wn, j, t MV_TRACE_FORWARD);
#pragma unroll
                for (int i = 0; i < FRAGS; ++i) wmma::mma_sync(acc[i][j], a[i], b, acc[i][j]);
            }
        }

        MV_ARRIVE(t, 1);
        __syncthreads();  // barrier 2: nobody overwrites the tiles while others read them
        MV_RELEASED(t, 1);
    }
    MV_MARK_LAST_COMPUTED();
#else
    MV_STEPS_BEGIN(num_tiles);
    MV_CHANNEL(0, 0);  // copy
    MV_CHANNEL(1, 0);  // compute
    // Prologue: steps 0 .. STAGES-2 go out, one group each (an empty group past the last step
    // keeps the count wait_group relies on).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < num_tiles) {
            MV_STEP_OPEN(0, s);
            copy_step<FULL>(A, B, M, N, K, sm, s, s, a_aligned, b_aligned MV_TRACE_FORWARD);
        }
        cp_async_commit();
    }
    MV_WARPS_BEGIN(num_tiles);

    // Two sets of fragments: a slice's ldmatrix go out before the mma_sync of the slice before
    // it, so the Tensor Cores work while they travel, across k-steps too: the last slice's
    // mma_sync follow the barrier that lets the next step's first slice be loaded (kernel 10).
    FragA a[2][FRAGS];
    FragB b[2][FRAGS];
    // The copies of step t + STAGES go out as soon as the barrier that lands step t + 1 frees
    // step t's slot, so the Tensor Cores' work on the rest of step t also hides their latency.
    auto issue = [&](int step, int slot) {
        if (step < num_tiles) {
            MV_STEP_OPEN(0, step);
            copy_step<FULL>(A, B, M, N, K, sm, step, slot, a_aligned,
                            b_aligned MV_TRACE_FORWARD);
        }
        cp_async_commit();
    };
    auto load_slice = [&](int set, int slot, int kk, int step) {
        load_a(a[set], sm, slot, kk, wm, step MV_TRACE_FORWARD);
#pragma unroll
        for (int j = 0; j < FRAGS; ++j)
            load_b(b[set][j], sm, slot, kk, wn, j, step MV_TRACE_FORWARD);
    };
    int read_slot = 0;
    cp_async_wait<STAGES - 2>();  // this thread's copy of step 0 has landed
    MV_ARRIVE(0, 0);
    __syncthreads();  // everyone's has
    MV_RELEASED(0, 0);
    MV_STEP_CLOSE(0, 0, 1);
    issue(STAGES - 1, STAGES - 1);
    load_slice(0, 0, 0, 0);
    // The sets alternate slice by slice; with one slice a step (BK 16) a loop turn runs two
    // steps, so that each set stays a fixed group of registers.
    constexpr int TURN = KK % 2 == 0 ? 1 : 2;
    for (int t0 = 0; t0 < num_tiles; t0 += TURN) {
#pragma unroll
        for (int u = 0; u < TURN; ++u) {
            const int t = t0 + u;
            if (TURN > 1 && t >= num_tiles) break;
            MV_STEP_BEGIN(1, t);
#pragma unroll
            for (int kk = 0; kk < KK; ++kk) {
                const int set = (u * KK + kk) % 2;
                if (kk + 1 < KK) {
                    load_slice(1 - set, read_slot, kk + 1, t);
                } else {  // after the last step a spare wait, barrier and load: one straight loop
                    cp_async_wait<STAGES - 2>();  // this thread's copy of step t + 1 has landed
                    MV_ARRIVE(t + 1, 0);
                    __syncthreads();  // everyone's has, and every fragment of step t is loaded
                    if (t + 1 < num_tiles) {
                        MV_RELEASED(t + 1, 0);
                        MV_STEP_CLOSE(0, t + 1, 1);
                    }
                    issue(t + STAGES, read_slot);
                    read_slot = read_slot == STAGES - 1 ? 0 : read_slot + 1;
                    load_slice(1 - set, read_slot, 0, t + 1);
                }
#pragma unroll
                for (int j = 0; j < FRAGS; ++j)
#pragma unroll
                    for (int i = 0; i < FRAGS; ++i)
                        wmma::mma_sync(acc[i][j], a[set][i], b[set][j], acc[i][j]);
            }
            MV_STEP_MARK(1, t, 1);
        }
    }
    cp_async_wait<0>();  // no copy outlives the block (the last groups are empty)
    MV_CHANNEL_FLUSH_CLOSED(0);
    MV_CHANNEL_FLUSH(1);
#endif

    // A fragment's layout in registers is not C's, and C's rows need not be 32-byte aligned:
    // each fragment goes through the warp's staging tile, then lane l writes elements l + 32q.
#pragma unroll
    for (int i = 0; i < FRAGS; ++i)
#pragma unroll
        for (int j = 0; j < FRAGS; ++j) {
            wmma::store_matrix_sync(&sm.Cs[warp][0][0], acc[i][j], LDC, wmma::mem_row_major);
            __syncwarp();
            const int r0 = row0 + wm * WT + i * 16, c0 = col0 + wn * WT + j * 16;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int e = lane + q * 32, r = e / 16, c = e % 16;
                if (r0 + r < M && c0 + c < N) C[(size_t)(r0 + r) * N + c0 + c] = sm.Cs[warp][r][c];
            }
            __syncwarp();
        }
}

// Rows of A and B 16-byte aligned (K and N multiples of 8): a copy of the body with only the
// cp.async path, so the k loop carries no element-by-element fallback.
template <bool MV_STAMPED>
__device__ __forceinline__ void wmma_dispatch(const elem *A, const elem *B, float *C, int M,
                                              int N, int K, MvTiles &sm MV_TRACE_DECL) {
    MV_BY_SHAPE(wmma_gemm, CHUNK, A, B, C, M, N, K, sm)
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_wmma(const elem *A, const elem *B,
                                                             float *C, int M, int N,
                                                             int K MV_TRACE_PARAMS) {
#if STAGES == 1
    __shared__ MvTiles sm;
#else
    extern __shared__ __align__(128) unsigned char mv_smem[];
    MvTiles &sm = *reinterpret_cast<MvTiles *>(mv_smem);
#endif
    MV_BLOCK_BEGIN();
    MV_RUN(wmma_dispatch, A, B, C, M, N, K, sm);
    MV_BLOCK_END();
}

// Which element each lane holds in each slot of the A, B and C fragments, loaded as the kernel
// loads them: one warp, 16x16 tiles whose elements hold their own numbers (row * 16 + col,
// exact in fp16). out[operand][lane][slot], operands A, B, C; -1 past a fragment's end.
extern "C" __global__ void mv_wmma_fragments(const elem *A, const elem *B, const float *C,
                                             int *out) {
    __shared__ __align__(32) elem As[16 * 16];
    __shared__ __align__(32) elem Bs[16 * 16];
    const int lane = threadIdx.x;
    for (int i = lane; i < 16 * 16; i += 32) {
        As[i] = A[i];
        Bs[i] = B[i];
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, elem, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, elem, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::load_matrix_sync(a, As, 16);
    wmma::load_matrix_sync(b, Bs, 16);
    wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
    for (int i = 0; i < a.num_elements; ++i) out[(0 * 32 + lane) * 32 + i] = (int)(float)a.x[i];
    for (int i = 0; i < b.num_elements; ++i) out[(1 * 32 + lane) * 32 + i] = (int)(float)b.x[i];
    for (int i = 0; i < c.num_elements; ++i) out[(2 * 32 + lane) * 32 + i] = (int)c.x[i];
}
