// trace.cuh - the instrumentation every matviz kernel shares.
//
// MV_LEVEL (compile time) picks what a kernel records:
//   0 timing       nothing at all: no extra parameters, no timer reads, no stores.
//   1 blocks       per block: %globaltimer at start and end, clock64 at both, %smid.
//   2 phases       + per k-tile: clock when loads are issued, after barrier 1, after barrier 2,
//                  for every block with blockId % mv_phase_every == 0. Those blocks run a copy
//                  of the kernel body that stamps (MV_STAMPED); the others run the plain copy.
//   3 diagnostics  + per-warp barrier waits (blocks with blockId % mv_warp_every == 0)
//                  + the shared-memory probe: for block mv_probe_block, warp mv_probe_warp and
//                    k-tile mv_probe_ktile, the byte offset every lane touches at each site.
//
// The kernel's description (kernels/NN_name.py) is the one place that numbers its probe slots
// and barriers; matviz passes them as defines: MV_SITE_<site> is the first slot of a site (its
// k-th instance writes slot MV_SITE_<site> + k), MV_PROBE_SLOTS the total, MV_BARRIERS the
// barriers per k-step.
//
// Why two clocks: %globaltimer is synchronised across SMs (32 ns ticks on the H200) but slow
// to read inside the latency-bound k loop; clock64 is one cheap CS2R but per SM. Blocks are
// placed with %globaltimer, and per-tile marks are raw clock64 low words that the recorder
// converts with the block's own (globaltimer, clock64) anchor pair.
//
// Buffers:
//   mv_blocks  u64 [blocks][6]  gt_start, gt_end (last warp), clk_start, clk_end (warp 0),
//                               smid, gt_end of warp 0
//   mv_phases  u32 [blocks / mv_phase_every][n_tiles][2]   issue clock, (loaded - issue) |
//                                                           (computed - issue) << 16, cycles
//   mv_warps   u32 [blocks / mv_warp_every][n_tiles][warps][MV_BARRIERS] cycles each warp
//                                                  waited at each barrier of the k-step
//   mv_probe   u32 [1 + MV_PROBE_SLOTS][32]  row 0 lane 0: shared base; row 1+s: offsets at slot s
#pragma once

#ifndef MV_LEVEL
#define MV_LEVEL 0
#endif

#define MV_TID (threadIdx.y * blockDim.x + threadIdx.x)
#define MV_BID (blockIdx.y * gridDim.x + blockIdx.x)
#define MV_BLOCK_RECORD 6

#if MV_LEVEL >= 1

#define MV_TRACE_PARAMS                                                               \
    , unsigned long long *mv_blocks, unsigned int *mv_phases, unsigned int *mv_warps, \
        unsigned int *mv_probe, int mv_phase_every, int mv_warp_every,                \
        int mv_probe_block, int mv_probe_warp, int mv_probe_ktile

// The same buffers and settings as one value, for the kernel body (MV_RUN passes it on).
struct MvTrace {
    unsigned long long *blocks;
    unsigned int *phases, *warps, *probe;
    int phase_every, warp_every, probe_block, probe_warp, probe_ktile;
};
#define MV_TRACE_ARGS                                                                   \
    , MvTrace { mv_blocks, mv_phases, mv_warps, mv_probe, mv_phase_every, mv_warp_every, \
                mv_probe_block, mv_probe_warp, mv_probe_ktile }
#define MV_TRACE_DECL , const MvTrace mv

__device__ __forceinline__ unsigned long long mv_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned int mv_smid() {
    unsigned int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

// A plain volatile read of %clock64: the stamps only need to stay between the barriers, which
// bar.sync already guarantees, so nothing else in the k loop is ordered around them.
__device__ __forceinline__ unsigned int mv_clock() {
    unsigned long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return (unsigned int)c;
}

// Stored at once (fire-and-forget) rather than held in registers through the k loop.
#define MV_BLOCK_BEGIN()                                                           \
    if (MV_TID == 0) {                                                             \
        unsigned long long *mv_r = mv_blocks + (size_t)MV_BLOCK_RECORD * MV_BID;   \
        mv_r[0] = mv_globaltimer();                                                \
        mv_r[2] = clock64();                                                       \
        mv_r[4] = mv_smid();                                                       \
    }

// "End" is when the last warp finishes: every warp posts its own %globaltimer with atomicMax,
// so no barrier holds finished warps back (the naive kernel has no barriers at all). Warp 0
// also keeps a (globaltimer, clock64) pair of its own end, the anchor for its clock stamps.
#define MV_END_RECORD(blocks, block, thread)                                          \
    if (((thread) & 31) == 0) {                                                       \
        unsigned long long *mv_r = (blocks) + (size_t)MV_BLOCK_RECORD * (block);      \
        const unsigned long long mv_gt1 = mv_globaltimer();                           \
        atomicMax(&mv_r[1], mv_gt1);                                                  \
        if ((thread) == 0) {                                                          \
            mv_r[3] = clock64();                                                      \
            mv_r[5] = mv_gt1;                                                         \
        }                                                                             \
    }

// Two forms of the same record, because ptxas schedules a kernel's main loop differently once
// code follows it. Which form leaves the loop as fast as at level 0 was measured on the H200
// (4096^3): the tiled kernels keep the inline MV_BLOCK_END (the call cost them up to +4.3% at
// level 2); the naive kernel's barrier-free loop needs MV_BLOCK_END_CALL (+0.1% against +6.9%
// inline at T=32). The call reads every id itself, so nothing is kept across the loop for it.
#define MV_BLOCK_END() MV_END_RECORD(mv_blocks, MV_BID, MV_TID)

__device__ __noinline__ void mv_block_end_call(unsigned long long *blocks) {
    unsigned int tx, ty, nx, bx, by, gx;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tx));
    asm volatile("mov.u32 %0, %%tid.y;" : "=r"(ty));
    asm volatile("mov.u32 %0, %%ntid.x;" : "=r"(nx));
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(bx));
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(by));
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(gx));
    const unsigned int thread = ty * nx + tx;
    MV_END_RECORD(blocks, by * gx + bx, thread);
}
#define MV_BLOCK_END_CALL() mv_block_end_call(mv_blocks)

#else
#define MV_TRACE_PARAMS
#define MV_TRACE_ARGS
#define MV_TRACE_DECL
#define MV_BLOCK_BEGIN()
#define MV_BLOCK_END()
#define MV_BLOCK_END_CALL()
#endif

#if MV_LEVEL >= 2
// Sampled blocks run the body with MV_STAMPED = true, the others the plain copy, so a block
// that records nothing runs the level-0 loop.
#define MV_RUN(body, ...)                                   \
    if (MV_BID % mv_phase_every == 0)                       \
        body<true>(__VA_ARGS__ MV_TRACE_ARGS);              \
    else                                                    \
        body<false>(__VA_ARGS__ MV_TRACE_ARGS);
#else
#define MV_RUN(body, ...) body<false>(__VA_ARGS__ MV_TRACE_ARGS);
#endif

#if MV_LEVEL >= 2
// Per-tile stamps never touch memory inside the k loop: a store there queues behind the
// tile's shared-memory traffic and stalls warp 0, and every other warp then waits for it at
// the next barrier. Lane (t % 32) of warp 0 keeps tile t in two registers, the issue clock and
// the loaded and computed offsets from it in 16 bits each (saturating at 0xFFFF cycles), and
// the warp flushes 32 tiles at once with one coalesced 8-byte-per-lane store.
// Two clock reads per tile, not three: passing barrier 2 of tile t is the top of tile t + 1,
// so its issue stamp closes tile t too, and one read after the loop closes the last tile.
// A third read after barrier 2 cost 6% at T=32 on the H200: ptxas then stops overlapping the
// last multiply-adds of a tile with the barrier wait.
#define MV_SPAN16(from, now) min((now) - (from), 0xFFFFu)
#define MV_PHASES_BEGIN(n_tiles)                                                        \
    const bool mv_phase_on = MV_STAMPED && MV_TID < 32;                                 \
    const int mv_n_tiles = (n_tiles);                                                   \
    uint2 *const mv_phase_row = reinterpret_cast<uint2 *>(mv.phases) +                  \
                                (size_t)(MV_BID / mv.phase_every) * mv_n_tiles;         \
    const unsigned int mv_lane = MV_TID & 31;                                           \
    unsigned int mv_issue = 0, mv_spans = 0;
#define MV_MARK_ISSUED(t)                                                               \
    if (mv_phase_on) {                                                                  \
        const unsigned int mv_now = mv_clock();                                         \
        if ((t) > 0) {                                                                  \
            if (mv_lane == (((t) - 1) & 31)) mv_spans |= MV_SPAN16(mv_issue, mv_now) << 16; \
            if (((t) & 31) == 0) mv_phase_row[(t) - 32 + mv_lane] = make_uint2(mv_issue, mv_spans); \
        }                                                                               \
        if (mv_lane == ((t) & 31)) mv_issue = mv_now;                                   \
    }
#define MV_MARK_LOADED(t)                                                               \
    if (mv_phase_on) {                                                                  \
        const unsigned int mv_span = MV_SPAN16(mv_issue, mv_clock());                   \
        if (mv_lane == ((t) & 31)) mv_spans = mv_span;                                  \
    }
// Closes the last tile as MV_MARK_ISSUED closes the others. Not one shared macro: written
// once with a general flush condition, ptxas emits 3-6 more instructions per tile (sm_90).
#define MV_MARK_LAST_COMPUTED()                                                         \
    if (mv_phase_on && mv_n_tiles > 0) {                                                \
        const unsigned int mv_last = (mv_n_tiles - 1) & 31;                             \
        const unsigned int mv_now = mv_clock();                                         \
        if (mv_lane == mv_last) mv_spans |= MV_SPAN16(mv_issue, mv_now) << 16;          \
        if (mv_lane <= mv_last)                                                         \
            mv_phase_row[((mv_n_tiles - 1) & ~31) + mv_lane] = make_uint2(mv_issue, mv_spans); \
    }
#else
#define MV_PHASES_BEGIN(n_tiles)
#define MV_MARK_ISSUED(t)
#define MV_MARK_LOADED(t)
#define MV_MARK_LAST_COMPUTED()
#endif

#if MV_LEVEL >= 3
// The probe needs registers; a 1024-thread block must still fit (<= 64 registers a thread).
// Lower levels leave register allocation to the compiler, as in the plain kernel.
#define MV_LAUNCH_BOUNDS(threads) __launch_bounds__(threads)

// clock64 read by different warps of one block disagreed by up to 64 us on the H200, so a warp
// times its own wait: its clock after the barrier minus its clock before it.
#define MV_WARPS_BEGIN(n_tiles)                                                       \
    const int mv_nwarps = (blockDim.x * blockDim.y + 31) / 32;                         \
    const bool mv_warp_on = (MV_TID & 31) == 0 && MV_BID % mv.warp_every == 0;         \
    unsigned int *mv_warp_row = mv.warps + (size_t)(MV_BID / mv.warp_every) *          \
                                               (size_t)(n_tiles) * mv_nwarps * MV_BARRIERS; \
    unsigned int mv_arrived = 0;
#define MV_ARRIVE(t, barrier) mv_arrived = mv_clock();
#define MV_RELEASED(t, barrier)                                                        \
    if (mv_warp_on)                                                                    \
        mv_warp_row[((t) * mv_nwarps + MV_TID / 32) * MV_BARRIERS + (barrier)] =            \
            mv_clock() - mv_arrived;

#define MV_PROBE_BEGIN(t, shared_base)                                                   \
    const bool mv_probe_on = MV_BID == mv.probe_block && MV_TID / 32 == mv.probe_warp && \
                             (t) == mv.probe_ktile;                                      \
    const unsigned int mv_smem_base = (unsigned int)__cvta_generic_to_shared(shared_base); \
    if (mv_probe_on && (MV_TID & 31) == 0) mv.probe[0] = mv_smem_base;
#define MV_PROBE(slot, ptr)                                                   \
    if (mv_probe_on)                                                          \
        mv.probe[(1 + (slot)) * 32 + (MV_TID & 31)] =                         \
            (unsigned int)__cvta_generic_to_shared(ptr) - mv_smem_base;
#else
#define MV_LAUNCH_BOUNDS(threads)
#define MV_WARPS_BEGIN(n_tiles)
#define MV_ARRIVE(t, barrier)
#define MV_RELEASED(t, barrier)
#define MV_PROBE_BEGIN(t, shared_base)
#define MV_PROBE(slot, ptr)
#endif
