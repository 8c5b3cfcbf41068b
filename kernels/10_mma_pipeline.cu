// 10_mma_pipeline - Tensor Cores through PTX (lesson 8 §20-25): mma.sync m16n8k16 on fragments
// loaded with ldmatrix from an XOR-swizzled shared layout, fed by a STAGES-deep cp.async pipeline.
// A block computes a BM x BN tile of C with (BM/WM) x (BN/WN) warps; each warp owns a WM x WN
// warp tile, held as (WM/16) x (WN/8) m16n8 accumulator fragments (fp32) in its registers.
// Per 16-deep slice a warp loads each 16x16 fragment of A with one ldmatrix.x4 and each pair of
// 16x8 fragments of B with one ldmatrix.x4.trans (B is k x n, row-major), then issues one
// mma.sync per (A, B) pair. Shared memory holds STAGES slots of the tiles, one barrier per step
// (as kernel 07). Fragments come in two sets, so each slice's ldmatrix go out before the
// mma.sync of the slice before it; the barrier that lands step t + 1 comes before step t's last
// mma.sync, and the copies of step t + STAGES (16-byte cp.async) go out right after it, into
// the slot step t has left. The swizzle moves each 16-byte chunk of a row to chunk c ^ f(row),
// so the eight rows one ldmatrix phase reads lie in eight different 16-byte bank groups:
//   As[m][k] (64-byte rows, two per 128 bytes): chunk ^ (m / 2) % 4
//   Bs[k][n] (256 or 512-byte rows, all in the same banks): chunk ^ k % 8
// The elements are moved as 16-bit patterns (fp16 or bf16, BF16 picks the mma's type), so no
// conversion happens before the Tensor Cores; sums are fp32.
// Two channels of marks, both stamped by warp 0, as kernel 07:
//   channel 0, copy:    issue (the step's cp.async go out), landed (wait and barrier passed)
//   channel 1, compute: begin, computed (the step's ldmatrix and mma.sync)
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
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef BF16
#define BF16 0
#endif

typedef unsigned short elem;  // an fp16 or bf16 element, moved as its bits
#if BF16
#define MMA_SYNC "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#else
#define MMA_SYNC "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#endif

#define WARPS_N (BN / WN)
#define THREADS ((BM / WM) * WARPS_N * 32)
#define MI (WM / 16)  // m16 fragments per warp along M
#define NI (WN / 8)   // n8 fragments per warp along N
#define CHUNK 8       // elements in one 16-byte copy
#define KK (BK / 16)  // 16-deep slices per k-step

static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 64 == 0,
              "warp tiles of whole fragments (B's in pairs: one ldmatrix.x4 loads two)");
static_assert(BK % 32 == 0 && BN % 64 == 0, "rows of at least four 16-byte chunks (swizzle)");
static_assert((BM * BK / CHUNK) % THREADS == 0 && (BK * BN / CHUNK) % THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
static_assert(KK % 2 == 0, "slices alternate between two fragment sets, step after step");
static_assert(STAGES >= 2 && STAGES <= 17, "2 to 17 stages (trace.cuh's copy channel)");

#if SWIZZLE
// chunk c of row r of a row of R chunks (R = 4 or a multiple of 8): c ^ r % 8, or for 64-byte
// rows, two of which share the 128 bytes of the banks, c ^ (r / 2) % 4
#define SWZ(r, c, R) ((c) ^ (((R) >= 8 ? (r) & 7 : ((r) >> 1) & 3) * CHUNK))
#define AS_COL(r, c) SWZ(r, c, BK / CHUNK)
#define BS_COL(r, c) SWZ(r, c, BN / CHUNK)
#else
#define AS_COL(r, c) (c)
#define BS_COL(r, c) (c)
#endif

struct __align__(128) MvTiles {
    elem As[STAGES][BM][BK];  // slot s: As[s][m][k] = A[row0 + m][t*BK + k], swizzled
    elem Bs[STAGES][BK][BN];  // Bs[s][k][n] = B[t*BK + k][col0 + n], swizzled
};
// More than the 48 KiB a static __shared__ array may have: the struct lives in dynamic shared
// memory, sized at launch; matviz passes the size the description gives, checked here.
#ifdef MV_SMEM_BYTES
static_assert(sizeof(MvTiles) == MV_SMEM_BYTES, "shared memory differs from the description");
#endif

// The 16-byte chunk at (r, c) of a row-major rows x cols matrix into shared memory. Aligned rows
// (cols % 8 == 0): one cp.async, zero-filled outside. Otherwise a chunk is not 16-byte aligned
// and cp.async copies at least 4 bytes, so the elements go through registers, 0 outside (§26).
template <bool ALIGNED, bool FULL>
__device__ __forceinline__ void copy_chunk(elem *to, const elem *src, int rows, int cols, int r,
                                           int c) {
    if (ALIGNED) {
        const bool in = FULL || (r < rows && c < cols);
        cp_async16(to, in ? src + (size_t)r * cols + c : src, in);
    } else {
        uint4 v = make_uint4(0, 0, 0, 0);
        elem *h = reinterpret_cast<elem *>(&v);
#pragma unroll
        for (int q = 0; q < CHUNK; ++q)
            if (r < rows && c + q < cols) h[q] = src[(size_t)r * cols + c + q];
        *reinterpret_cast<uint4 *>(to) = v;
    }
}

// The copies of k-step `step` into slot `slot`: chunk e = tid + i*THREADS is row e / (cols/8),
// columns 8(e % (cols/8)) .. +7 of the tile, coalesced. A thread keeps its column and steps
// THREADS/(cols/8) rows a chunk, a multiple of 8, so its chunks share one swizzle.
template <bool ALIGNED, bool FULL>
__device__ __forceinline__ void copy_step(const elem *A, const elem *B, int M, int N, int K,
                                          MvTiles &sm, int step, int slot MV_TRACE_DECL) {
    constexpr int CA = BK / CHUNK, CB = BN / CHUNK;
    static_assert(THREADS % (8 * CA) == 0 && THREADS % (8 * CB) == 0,
                  "a thread keeps its chunk column and steps 8 rows at a time (one swizzle)");
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int ar = tid / CA, ac = tid % CA * CHUNK, br = tid / CB, bc = tid % CB * CHUNK;
    const int a_col = AS_COL(ar, ac), b_col = BS_COL(br, bc);
    MV_PROBE_BEGIN(step, &sm);
#pragma unroll
    for (int i = 0; i < BM * BK / CHUNK / THREADS; ++i) {
        const int r = ar + i * (THREADS / CA);
        elem *to = &sm.As[slot][r][a_col];
        copy_chunk<ALIGNED, FULL>(to, A, M, K, row0 + r, step * BK + ac);
        MV_PROBE(MV_SITE_st_As + i, to);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / CHUNK / THREADS; ++i) {
        const int r = br + i * (THREADS / CB);
        elem *to = &sm.Bs[slot][r][b_col];
        copy_chunk<ALIGNED, FULL>(to, B, K, N, step * BK + r, col0 + bc);
        MV_PROBE(MV_SITE_st_Bs + i, to);
    }
}

// ldmatrix .x4: lanes 8i..8i+7 give the rows of 8x8 matrix i; each lane gets one register of
// each matrix (2 elements). .trans hands out the matrices' columns instead of their rows.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const elem *at) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(at);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const elem *at) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(at);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// d += a b on the Tensor Cores: a 16x16 (4 registers), b 16x8 (2), d 16x8 fp32 (4 floats).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
    asm volatile(MMA_SYNC " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The fragments of 16-deep slice kk of slot `slot` (of k-step `step`, for the probe): a[i] is A's
// fragment i; b[j] holds B's fragments 2j (registers 0, 1: k rows 0-7 and 8-15) and 2j+1 (2, 3).
// ldmatrix rows: lane l addresses row l % 16 and column 8 (l / 16) of a 16x16 fragment. Warp
// tiles start on multiples of 16 rows and 64 columns and slices on multiples of 16 rows, so a
// row's swizzle is that of l % 16 and stays inside 64 columns: each lane's offsets are reused.
__device__ __forceinline__ void load_slice(unsigned (&a)[MI][4], unsigned (&b)[NI / 2][4],
                                           MvTiles &sm, int slot, int kk, int wr, int wc,
                                           int step MV_TRACE_DECL) {
    const int lane = threadIdx.x % 32, lr = lane & 15, lc = (lane >> 4) * CHUNK;
    MV_PROBE_BEGIN(step, &sm);
#pragma unroll
    for (int i = 0; i < MI; ++i) {
        const elem *at = &sm.As[slot][wr + i * 16 + lr][AS_COL(lr, kk * 16 + lc)];
        ldmatrix_x4(a[i], at);
        MV_PROBE(MV_SITE_ld_As + kk * MI + i, at);
    }
#pragma unroll
    for (int j = 0; j < NI / 2; ++j) {
        const elem *at = &sm.Bs[slot][kk * 16 + lr][wc + BS_COL(lr, j * 16 + lc)];
        ldmatrix_x4_trans(b[j], at);
        MV_PROBE(MV_SITE_ld_Bs + kk * (NI / 2) + j, at);
    }
}

// C[r][c], C[r][c + 1] = v0, v1: one 8-byte store where N is even, else element by element.
template <bool ALIGNED>
__device__ __forceinline__ void store_pair(float *C, int M, int N, int r, int c, float v0,
                                           float v1) {
    if (r >= M) return;
    float *at = C + (size_t)r * N + c;
    if (ALIGNED && c + 1 < N) {
        *reinterpret_cast<float2 *>(at) = make_float2(v0, v1);
    } else {
        if (c < N) at[0] = v0;
        if (c + 1 < N) at[1] = v1;
    }
}

template <bool ALIGNED, bool FULL, bool MV_STAMPED>
__device__ __forceinline__ void mma_body(const elem *A, const elem *B, float *C, int M, int N,
                                         int K, MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wr = warp / WARPS_N * WM, wc = warp % WARPS_N * WN;  // the warp tile's corner
    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    const int num_tiles = (K + BK - 1) / BK;
    MV_STEPS_BEGIN(num_tiles);
    MV_CHANNEL(0, 0);  // copy
    MV_CHANNEL(1, 0);  // compute
    MV_WARPS_BEGIN(num_tiles);

    // Prologue: steps 0 .. STAGES-2 go out, one group each (an empty group past the last step
    // keeps the count wait_group relies on).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < num_tiles) {
            MV_STEP_OPEN(0, s);
            copy_step<ALIGNED, FULL>(A, B, M, N, K, sm, s, s MV_TRACE_FORWARD);
        }
        cp_async_commit();
    }

    // Two sets of fragments: a slice's ldmatrix go out before the mma.sync of the slice before
    // it, so the Tensor Cores work while they travel, across k-steps too: the last slice's
    // mma.sync follow the barrier that lets the next step's first slice be loaded.
    unsigned a[2][MI][4], b[2][NI / 2][4];
    // The copies of step t + STAGES go out as soon as the barrier that lands step t + 1 frees
    // step t's slot, so the Tensor Cores' work on the rest of step t also hides their latency.
    auto issue = [&](int step, int slot) {
        if (step < num_tiles) {
            MV_STEP_OPEN(0, step);
            copy_step<ALIGNED, FULL>(A, B, M, N, K, sm, step, slot MV_TRACE_FORWARD);
        }
        cp_async_commit();
    };
    int read_slot = 0;
    cp_async_wait<STAGES - 2>();  // this thread's copy of step 0 has landed
    MV_ARRIVE(0, 0);
    __syncthreads();  // everyone's has
    MV_RELEASED(0, 0);
    MV_STEP_CLOSE(0, 0, 1);
    issue(STAGES - 1, STAGES - 1);
    load_slice(a[0], b[0], sm, 0, 0, wr, wc, 0 MV_TRACE_FORWARD);
    for (int t = 0; t < num_tiles; ++t) {
        MV_STEP_BEGIN(1, t);
#pragma unroll
        for (int kk = 0; kk < KK; ++kk) {
            if (kk + 1 < KK) {
                load_slice(a[(kk + 1) % 2], b[(kk + 1) % 2], sm, read_slot, kk + 1, wr, wc,
                           t MV_TRACE_FORWARD);
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
                load_slice(a[0], b[0], sm, read_slot, 0, wr, wc, t + 1 MV_TRACE_FORWARD);
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
                    mma_16816(acc[i][j], a[kk % 2][i], b[kk % 2][j / 2][(j % 2) * 2],
                              b[kk % 2][j / 2][(j % 2) * 2 + 1]);
        }
        MV_STEP_MARK(1, t, 1);
    }
    cp_async_wait<0>();  // no copy outlives the block (the last groups are empty)
    MV_CHANNEL_FLUSH_CLOSED(0);
    MV_CHANNEL_FLUSH(1);

    // accumulator slot q of lane 4g + u: row g + 8 (q / 2), column 2u + q % 2 of the fragment
    const int g = lane >> 2, u = lane & 3;
    const int r0 = blockIdx.y * BM + wr + g, c0 = blockIdx.x * BN + wc + 2 * u;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                store_pair<ALIGNED>(C, M, N, r0 + i * 16 + 8 * h, c0 + j * 8, acc[i][j][2 * h],
                                    acc[i][j][2 * h + 1]);
}

template <bool MV_STAMPED>
__device__ __forceinline__ void mma_pipeline(const elem *A, const elem *B, float *C, int M, int N,
                                             int K, MvTiles &sm MV_TRACE_DECL) {
    MV_BY_SHAPE(mma_body, CHUNK, A, B, C, M, N, K, sm)
}

extern "C" __global__ void MV_LAUNCH_BOUNDS(THREADS) mv_mma_pipeline(const elem *A, const elem *B,
                                                                     float *C, int M, int N,
                                                                     int K MV_TRACE_PARAMS) {
    extern __shared__ __align__(128) unsigned char mv_smem[];
    MvTiles &sm = *reinterpret_cast<MvTiles *>(mv_smem);
    MV_BLOCK_BEGIN_CALL();
    MV_RUN(mma_pipeline, A, B, C, M, N, K, sm);
    MV_BLOCK_END_CALL();
}

// The bits of an fp16 or bf16 element as a float (fp16 through cvt, bf16 is a float's top half).
__device__ __forceinline__ float elem_value(elem h) {
#if BF16
    return __uint_as_float((unsigned)h << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}

// Which element each lane holds in each slot of the A, B and C fragments, loaded as the kernel
// loads them: one warp, 16x16 tiles whose elements hold their own numbers (row * 16 + col, exact
// in fp16 and bf16). out[operand][lane][slot], operands A (16x16), B (16x8: the first of the two
// fragments ldmatrix.x4.trans loads) and C (16x8), each element numbered row * cols + col; -1
// past a fragment's end. C is measured through the mma itself: identity x B puts B's numbers
// (row * 8 + col, 16x8) in the accumulator slots.
extern "C" __global__ void mv_mma_pipeline_fragments(const elem *A, const elem *B, const float *C,
                                                     int *out) {
    __shared__ __align__(128) elem As[16 * 16];
    __shared__ __align__(128) elem Bs[16 * 16];
    __shared__ __align__(128) elem Is[16 * 16];
    __shared__ __align__(128) elem B8[16 * 8];
    const int lane = threadIdx.x;
    const elem one = BF16 ? 0x3F80 : 0x3C00;
    for (int i = lane; i < 16 * 16; i += 32) {
        As[i] = A[i];
        Bs[i] = B[i];
        Is[i] = i / 16 == i % 16 ? one : 0;
    }
    for (int i = lane; i < 16 * 8; i += 32) B8[i] = B[i];  // the numbers 0..127 as a 16x8 B
    __syncwarp();
    const int lr = lane & 15, lc = (lane >> 4) * CHUNK;
    unsigned a[4], b[4], ident[4], b8[4];
    ldmatrix_x4(a, &As[lr * 16 + lc]);
    ldmatrix_x4_trans(b, &Bs[lr * 16 + lc]);
    ldmatrix_x4(ident, &Is[lr * 16 + lc]);
    // B8 as the kernel's Bs with 8 columns: rows of 16 bytes, lanes 0-15 address k = 0..15
    ldmatrix_x4_trans(b8, &B8[(lane & 15) * 8]);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_16816(d, ident, b8[0], b8[1]);
    for (int s = 0; s < 8; ++s) {
        const elem h = (elem)(a[s / 2] >> (16 * (s % 2)));
        out[(0 * 32 + lane) * 32 + s] = (int)elem_value(h);
    }
    for (int s = 0; s < 4; ++s) {  // B's number k * 16 + n as the 16x8 fragment's k * 8 + n
        const int v = (int)elem_value((elem)(b[s / 2] >> (16 * (s % 2))));
        out[(1 * 32 + lane) * 32 + s] = v / 16 * 8 + v % 16;
    }
    for (int s = 0; s < 4; ++s) out[(2 * 32 + lane) * 32 + s] = (int)d[s];
    (void)C;
}
