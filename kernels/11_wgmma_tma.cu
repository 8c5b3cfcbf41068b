// 11_wgmma_tma - Hopper's own path to the Tensor Cores (lesson 8 §20-25): warpgroup MMA
// (wgmma) on tiles the copy engine (TMA) brings into shared memory, a STAGES-deep ring of
// slots guarded by mbarriers, and warp specialisation: one warpgroup only copies, two only
// multiply. Compiled for sm_90a (wgmma and setmaxnreg exist on sm_90a alone).
// A block computes a 128 x BN tile of C with 3 warpgroups (384 threads):
//   warpgroup 0, the producer: one thread of warp 0 asks TMA for the A box (128 x 64) and the
//     B box (BN x 64) of each k-step into slot t % STAGES, once the consumers have freed it;
//   warpgroups 1 and 2, the consumers: each waits until the slot's bytes have landed, issues
//     4 x wgmma m64nBNk16 (its 64 rows of A against all BN columns of B, 16 deep each), waits
//     for them and frees the slot.
// B is stored column-major (B^T row-major, N x K): both operands are then K-major, 64 elements
// (128 bytes) a row, the layout TMA's 128-byte swizzle and wgmma's descriptors share (chunk c
// of row r at chunk c ^ r % 8). TMA needs a row pitch of a multiple of 16 bytes: K % 8 == 0.
// Nothing else is bounded: boxes past M, N or K arrive zero-filled.
// Two channels of marks:
//   channel 0, producer (warp 0):   request (wait for a free slot), issued (both boxes asked for)
//   channel 1, consumer (warp 4, the first of warpgroup 1): wait (for the slot's bytes),
//                                   landed (they are in), computed (its wgmma done, slot freed)
#include "tma.cuh"
#include "trace.cuh"

#ifndef BN
#define BN 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef BF16
#define BF16 1
#endif
#if BF16
#define MV_WGMMA_TYPE "bf16"
#else
#define MV_WGMMA_TYPE "f16"
#endif
#include "wgmma.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BK
#define BK 64  // one 128-byte swizzle row of 16-bit elements
#endif
#define CONSUMERS (BM / 64)  // warpgroups that multiply, 64 rows of the tile each
#define THREADS (128 * (CONSUMERS + 1))
#define ACC (BN / 2)     // fp32 accumulators a consumer thread holds (64 x BN over 128 threads)
#define STEP_BYTES ((BM + BN) * BK * 2)

static_assert(BN == 128 || BN == 256, "one wgmma m64nBNk16 covers the tile's columns");
static_assert(BM == 128 && BK == 64, "two consumer warpgroups; rows of one 128-byte swizzle");
static_assert(STAGES >= 2 && STAGES <= 17, "2 to 17 stages (trace.cuh's channels)");

typedef unsigned short elem;  // an fp16 or bf16 element, moved as its bits

// The slots first (each 1024-byte aligned, as the 128-byte swizzle's 8-row period needs), the
// barriers after them.
struct MvTiles {
    elem As[STAGES][BM][BK];  // As[s][m][k] = A[row0 + m][t*BK + k], swizzled by TMA
    elem Bs[STAGES][BN][BK];  // Bs[s][n][k] = B[t*BK + k][col0 + n], swizzled by TMA
    unsigned long long full[STAGES];   // completes when slot s's bytes have landed
    unsigned long long empty[STAGES];  // completes when every consumer warp is done with it
};
#ifdef MV_SMEM_BYTES
static_assert(sizeof(MvTiles) == MV_SMEM_BYTES, "shared memory differs from the description");
#endif

// The accumulators of warp w of consumer warpgroup cw, slot 4j + q of lane 4g + u: row
// 64cw + 16w + g + 8(q / 2), column 8j + 2u + q % 2. Pairs go out as one 8-byte store where N is
// even (the row starts 8-byte aligned), else element by element.
__device__ __forceinline__ void store_c(float *C, int M, int N, int row, int col, float v0,
                                        float v1) {
    if (row >= M) return;
    float *at = C + (size_t)row * N + col;
    if ((N & 1) == 0 && col + 1 < N) {
        *reinterpret_cast<float2 *>(at) = make_float2(v0, v1);
    } else {
        if (col < N) at[0] = v0;
        if (col + 1 < N) at[1] = v1;
    }
}

__device__ __forceinline__ void wgmma_step(float (&d)[ACC], const elem *as, const elem *bs,
                                           bool first) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
#if BN == 256
        wgmma_n256(d, wgmma_desc(as + kk * 16), wgmma_desc(bs + kk * 16), !first || kk > 0);
#else
        wgmma_n128(d, wgmma_desc(as + kk * 16), wgmma_desc(bs + kk * 16), !first || kk > 0);
#endif
    }
}

template <bool MV_STAMPED>
__device__ __forceinline__ void wgmma_body(const MvTensorMap *tm_a, const MvTensorMap *tm_b,
                                           float *C, int M, int N, int K,
                                           MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, group = warp / 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int num_tiles = (K + BK - 1) / BK;
    MV_STEPS_BEGIN(num_tiles);
    MV_CHANNEL(0, 0);  // producer
    MV_CHANNEL(1, 4);  // consumer
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&sm.full[s], 1);                   // the producer's expect_tx arrival
            mbar_init(&sm.empty[s], CONSUMERS * 4);     // one arrival per consumer warp
        }
        mbar_fence_init();
    }
    __syncthreads();  // the only block-wide barrier: from here on the warpgroups go their ways

    if (group == 0) {
        // The producer needs few registers; it gives them to the consumers.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (warp != 0) return;
        for (int t = 0; t < num_tiles; ++t) {
            const int s = t % STAGES;
            MV_STEP_BEGIN(0, t);
            // slot s last held step t - STAGES: wait for that use's release
            if (t >= STAGES) mbar_wait(&sm.empty[s], (t / STAGES - 1) & 1);
            if (lane == 0) {
                mbar_expect_bytes(&sm.full[s], STEP_BYTES);
                tma_load_2d(&sm.As[s][0][0], tm_a, &sm.full[s], row0, t * BK);
                tma_load_2d(&sm.Bs[s][0][0], tm_b, &sm.full[s], col0, t * BK);
            }
            __syncwarp();
            MV_STEP_MARK(0, t, 1);
        }
        MV_CHANNEL_FLUSH(0);
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = group - 1;  // this consumer's 64 rows: 64 cw .. 64 cw + 63 of the tile
    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) d[i] = 0.0f;
    for (int t = 0; t < num_tiles; ++t) {
        const int s = t % STAGES;
        MV_STEP_BEGIN(1, t);
        mbar_wait(&sm.full[s], (t / STAGES) & 1);
        MV_STEP_MARK(1, t, 1);
        wgmma_hold(d);
        wgmma_fence();
        wgmma_step(d, &sm.As[s][64 * cw][0], &sm.Bs[s][0][0], t == 0);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(d);
        if (lane == 0) mbar_arrive(&sm.empty[s]);
        MV_STEP_MARK(1, t, 2);
    }
    MV_CHANNEL_FLUSH(1);

    const int g = lane >> 2, u = lane & 3;
    const int row = row0 + 64 * cw + 16 * (warp % 4) + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j + 2 * u;
        store_c(C, M, N, row, col, d[4 * j], d[4 * j + 1]);
        store_c(C, M, N, row + 8, col, d[4 * j + 2], d[4 * j + 3]);
    }
}

// One block per SM (its 384 threads and up to 192 KiB of slots), and a register cap at entry,
// without which setmaxnreg is ignored.
extern "C" __global__ void __launch_bounds__(THREADS, 1) mv_wgmma_tma(
    const __grid_constant__ MvTensorMap tm_a, const __grid_constant__ MvTensorMap tm_b, float *C,
    int M, int N, int K MV_TRACE_PARAMS) {
    extern __shared__ __align__(1024) unsigned char mv_smem[];
    // the swizzle's pattern repeats every 1024 bytes of shared address: a slot must start there
    if ((mv_smem_addr(mv_smem) & 1023) != 0) __trap();
    MvTiles &sm = *reinterpret_cast<MvTiles *>(mv_smem);
    MV_BLOCK_BEGIN();
    MV_RUN(wgmma_body, &tm_a, &tm_b, C, M, N, K, sm);
    MV_BLOCK_END();
}

// Which element of a warp's 16 x BN accumulator tile each lane holds in each slot, measured
// through wgmma itself: one warpgroup multiplies A (64 x 16: A[r][0] = r, A[r][1] = 1) by B
// (16 x BN: B[0][c] = BN, B[1][c] = c), both laid out as the kernel's tiles (128-byte rows,
// swizzled), so C[r][c] = r * BN + c exactly (integers below 2^8 are exact in fp16 and bf16).
// out[0][lane][slot] for warp 0 (rows 0-15); the other warps hold rows 16w on, checked here:
// a warp whose values are not its rows' writes -2. A, B and C are not read (the signature is the
// fragment probes' one).
// A small whole number as an fp16 or bf16 element (exact: bf16 is a float's top half).
__device__ __forceinline__ elem elem_of(float f) {
#if BF16
    return (elem)(__float_as_uint(f) >> 16);
#else
    elem h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}

extern "C" __global__ void mv_wgmma_tma_fragments(const elem *A, const elem *B, const float *C,
                                                  int *out) {
    __shared__ __align__(1024) elem As[64][BK];
    __shared__ __align__(1024) elem Bs[BN][BK];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    for (int i = tid; i < 64 * BK; i += 128) (&As[0][0])[i] = 0;
    for (int i = tid; i < BN * BK; i += 128) (&Bs[0][0])[i] = 0;
    __syncthreads();
    // element (r, k) of a swizzled 128-byte row: chunk k / 8 moves to (k / 8) ^ r % 8
#define SWZ_AT(tile, r, k) tile[r][(((k) >> 3) ^ ((r) & 7)) * 8 + ((k) & 7)]
    for (int r = tid; r < 64; r += 128) {
        SWZ_AT(As, r, 0) = elem_of((float)r);
        SWZ_AT(As, r, 1) = elem_of(1.0f);
    }
    for (int c = tid; c < BN; c += 128) {
        SWZ_AT(Bs, c, 0) = elem_of((float)BN);
        SWZ_AT(Bs, c, 1) = elem_of((float)c);
    }
#undef SWZ_AT
    // ordinary stores that the Tensor Cores (the async proxy) read next
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) d[i] = 0.0f;
    wgmma_hold(d);
    wgmma_fence();
#if BN == 256
    wgmma_n256(d, wgmma_desc(&As[0][0]), wgmma_desc(&Bs[0][0]), 0);
#else
    wgmma_n128(d, wgmma_desc(&As[0][0]), wgmma_desc(&Bs[0][0]), 0);
#endif
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(d);
    bool own_rows = true;
#pragma unroll
    for (int s = 0; s < ACC; ++s) {
        const int v = (int)d[s], row = v / BN;
        own_rows = own_rows && row / 16 == warp;
        if (warp == 0) out[lane * ACC + s] = v;
    }
    if (!own_rows) out[lane * ACC] = -2;
    (void)A;
    (void)B;
    (void)C;
}
