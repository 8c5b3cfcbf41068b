// 07_async_pipeline - kernel 06's micro-tiles with its tiles copied by cp.async, STAGES k-steps
// deep (lesson 8 §24-25: double buffering, "prefetch the next tile while computing this one").
// Shared memory holds STAGES slots of the A and B tiles. Before the k loop the block issues the
// copies of steps 0 .. STAGES-2. In step t every thread waits until its copy of step t has
// landed (cp.async.wait_group), one barrier makes everyone's copies visible and tells that
// slot (t - 1) % STAGES is no longer read, the block issues the copy of step t + STAGES - 1
// into that slot, and computes step t while STAGES - 1 copies travel: one barrier per step.
// A goes in transposed as in kernel 06, element by element (a 16-byte copy cannot transpose);
// B in 16-byte copies where its rows are 16-byte aligned.
// Two channels of marks, both stamped by warp 0:
//   channel 0, copy:    issue (the step's cp.async go out), landed (wait and barrier passed)
//   channel 1, compute: begin, computed (the multiply-adds of the step)
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
#define BK 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef QUADS
#define QUADS 0
#endif
#define THREADS (BM * BN / (TM * TN))
// Two blocks of 256 threads per SM need <= 128 registers a thread; uncapped, ptxas took 151 and
// one block of 8 warps per SM ran slower (H200, 4096^3, S2 P0 X1: 34.4 against 39.2 TFLOP/s).
#define MIN_BLOCKS (THREADS >= 256 ? 2 : 1)

static_assert(BM % TM == 0 && BN % TN == 0, "a thread's TM x TN tile must lie inside BM x BN");
static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0 && PAD % 4 == 0,
              "float4 accesses need multiples of 4 (and 16-byte aligned rows of As)");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "every thread copies the same number of float4s of A and of B");
static_assert(!(PAD && SWIZZLE), "padding or a swizzle, not both");
static_assert(!SPLIT || TN >= 8, "a split needs two float4 groups of columns");
static_assert(!QUADS || ((BN / TN) % 2 == 0 && (BM / TM) % 2 == 0),
              "2 x 2 quads need an even number of micro-tiles across and down");
static_assert(TM % 8 == 0, "a thread's rows of As start on a multiple of 8, below the swizzle");
static_assert(STAGES >= 2 && STAGES <= 17, "2 to 17 stages (trace.cuh's copy channel)");

#if SWIZZLE
#define AS_COL(k, m) ((m) ^ ((((k) / 4) % (BK / 4)) * (128 / BK)))  // as in kernel 06
#else
#define AS_COL(k, m) (m)
#endif

struct __align__(16) MvTiles {
    float As[STAGES][BK][BM + PAD];  // slot s, transposed: As[s][k][m] = A[row0 + m][t*BK + k]
    float Bs[STAGES][BK][BN];
};

// The copies of k-step `step` into slot `slot`: the same float4s of A and B as kernel 06.
// FULL: M, N and K are multiples of BM, BN and BK, so every copy lies inside and needs no
// bounds test (sm_90, S2 P4: 1,151 instructions a k-step instead of 1,215).
template <bool ALIGNED, bool FULL>
__device__ __forceinline__ void copy_step(const float *A, const float *B, int M, int N, int K,
                                          MvTiles &sm, int step, int slot MV_TRACE_DECL) {
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    MV_PROBE_BEGIN(step, &sm);
#pragma unroll
    for (int i = 0; i < BM * BK / 4 / THREADS; ++i) {
        const int f = tid + i * THREADS, r = f / (BK / 4), c = f % (BK / 4) * 4;
        const int row = row0 + r, col = step * BK + c;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bool in = FULL || (row < M && col + j < K);
            float *to = &sm.As[slot][c + j][AS_COL(c + j, r)];
            cp_async4(to, in ? &A[row * K + col + j] : A, in);
            MV_PROBE(MV_SITE_st_As + 4 * i + j, to);
        }
    }
#pragma unroll
    for (int i = 0; i < BK * BN / 4 / THREADS; ++i) {
        const int f = tid + i * THREADS, r = f / (BN / 4), c = f % (BN / 4) * 4;
        const int row = step * BK + r, col = col0 + c;
        float *to = &sm.Bs[slot][r][c];
        if (ALIGNED) {  // the four lie all inside or all outside
            const bool in = FULL || (row < K && col < N);
            cp_async16(to, in ? &B[row * N + col] : B, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = row < K && col + j < N;
                cp_async4(to + j, in ? &B[row * N + col + j] : B, in);
            }
        }
        MV_PROBE(MV_SITE_st_Bs + i, to);
    }
}

template <bool ALIGNED, bool FULL, bool MV_STAMPED>
__device__ __forceinline__ void pipeline_body(const float *A, const float *B, float *C, int M,
                                              int N, int K, MvTiles &sm MV_TRACE_DECL) {
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    // The thread's micro-tile in the (BM/TM) x (BN/TN) grid of them: row by row, or (QUADS)
    // lanes 4j .. 4j+3 on 2 x 2 neighbours, so that each four lanes read at most two distinct
    // float4s of As and of Bs. Its TN columns as TN/4 float4s: side by side, or (SPLIT) GROUP
    // apart, so that a warp's LDS.128 of one group read consecutive 16-byte words.
    constexpr int ACROSS = BN / TN, GROUP = SPLIT ? BN / (TN / 4) : 4;
    const int place_row = QUADS ? tid / (2 * ACROSS) * 2 + (tid >> 1 & 1) : tid / ACROSS;
    const int place_col = QUADS ? tid % (2 * ACROSS) / 4 * 2 + (tid & 1) : tid % ACROSS;
    const int thread_col = place_col * (SPLIT ? 4 : TN);
    const int thread_row = place_row * TM;
    float acc[TM][TN] = {{0.0f}};
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

    int read_slot = 0, write_slot = STAGES - 1;
    for (int t = 0; t < num_tiles; ++t) {
        cp_async_wait<STAGES - 2>();  // this thread's copy of step t has landed
        MV_ARRIVE(t, 0);
        __syncthreads();  // everyone's has, and nobody reads slot (t - 1) % STAGES any more
        MV_RELEASED(t, 0);
        MV_STEP_CLOSE(0, t, 1);

        const int next = t + STAGES - 1;
        if (next < num_tiles) {
            MV_STEP_OPEN(0, next);
            copy_step<ALIGNED, FULL>(A, B, M, N, K, sm, next, write_slot MV_TRACE_FORWARD);
        }
        cp_async_commit();

        MV_STEP_BEGIN(1, t);
        MV_PROBE_BEGIN(t, &sm);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const float *at = &sm.As[read_slot][k][AS_COL(k, thread_row) + 4 * q];
                const float4 v = *reinterpret_cast<const float4 *>(at);
                MV_PROBE(MV_SITE_ld_As + k * (TM / 4) + q, at);
                MV_PROBE_VALUE(t, MV_SITE_ld_As + k * (TM / 4) + q, v.x);
                a[4 * q] = v.x, a[4 * q + 1] = v.y, a[4 * q + 2] = v.z, a[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int q = 0; q < TN / 4; ++q) {
                const float *at = &sm.Bs[read_slot][k][thread_col + GROUP * q];
                const float4 v = *reinterpret_cast<const float4 *>(at);
                MV_PROBE(MV_SITE_ld_Bs + k * (TN / 4) + q, at);
                MV_PROBE_VALUE(t, MV_SITE_ld_Bs + k * (TN / 4) + q, v.x);
                b[4 * q] = v.x, b[4 * q + 1] = v.y, b[4 * q + 2] = v.z, b[4 * q + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        MV_STEP_MARK(1, t, 1);
        read_slot = read_slot == STAGES - 1 ? 0 : read_slot + 1;
        write_slot = write_slot == STAGES - 1 ? 0 : write_slot + 1;
    }
    cp_async_wait<0>();  // no copy outlives the block (the last groups are empty)
    MV_CHANNEL_FLUSH_CLOSED(0);
    MV_CHANNEL_FLUSH(1);

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + thread_row + i;
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
            const int col = col0 + thread_col + GROUP * q;
            const float *v = &acc[i][4 * q];
            if (row >= M) continue;
            if (ALIGNED && col + 3 < N) {
                *reinterpret_cast<float4 *>(&C[row * N + col]) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) C[row * N + col + j] = v[j];
            }
        }
    }
}

template <bool MV_STAMPED>
__device__ __forceinline__ void async_pipeline(const float *A, const float *B, float *C, int M,
                                               int N, int K, MvTiles &sm MV_TRACE_DECL) {
    MV_BY_SHAPE(pipeline_body, 4, A, B, C, M, N, K, sm)
}

extern "C" __global__ void MV_LAUNCH_BOUNDS_MIN(THREADS, MIN_BLOCKS) mv_async_pipeline(
    const float *A, const float *B, float *C, int M, int N, int K MV_TRACE_PARAMS) {
    __shared__ MvTiles sm;
    MV_BLOCK_BEGIN_CALL();
    MV_RUN(async_pipeline, A, B, C, M, N, K, sm);
    MV_BLOCK_END_CALL();
}
