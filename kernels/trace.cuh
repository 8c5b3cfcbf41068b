// trace.cuh - the instrumentation every matviz kernel shares.
//
// MV_LEVEL (compile time) picks what a kernel records:
//   0 timing       nothing at all: no extra parameters, no timer reads, no stores.
//   1 blocks       per block: %globaltimer at start and end, clock64 at both, %smid.
//   2 phases       + per k-step: the clock at each mark the kernel's description names (for the
//                  seed kernels: loads issued, barrier 1 passed, barrier 2 passed), for every
//                  block with blockId % mv_phase_every == 0. Those blocks run a copy of the
//                  kernel body that stamps (MV_STAMPED); the others run the plain copy.
//   3 diagnostics  + per-warp barrier waits (blocks with blockId % mv_warp_every == 0)
//                  + the shared-memory probe: for block mv_probe_block, warp mv_probe_warp and
//                    k-tile mv_probe_ktile, the byte offset every lane touches at each site;
//                    and for the same warp in each of the first MV_VALUE_TILES k-tiles, the
//                    value every lane read at each load site (MV_PROBE_VALUE), so a read of a
//                    stale shared value shows (the race of a missing barrier, §11-12).
//
// The kernel's description (kernels/NN_name.py) is the one place that numbers its probe slots
// and barriers; matviz passes them as defines: MV_SITE_<site> is the first slot of a site (its
// k-th instance writes slot MV_SITE_<site> + k), MV_PROBE_SLOTS the total, MV_BARRIERS the
// barriers per k-step, MV_CHANNELS the k-step's channels of marks (see MV_STEPS_BEGIN).
//
// Why two clocks: %globaltimer is synchronised across SMs (32 ns ticks on the H200) but slow
// to read inside the latency-bound k loop; clock64 is one cheap CS2R but per SM. Blocks are
// placed with %globaltimer, and per-tile marks are raw clock64 low words that the recorder
// converts with the block's own (globaltimer, clock64) anchor pair.
//
// Buffers:
//   mv_blocks  u64 [blocks][6]  gt_start, gt_end (last warp), clk_start, clk_end (warp 0),
//                               smid, gt_end of warp 0
//   mv_phases  u32 [blocks / mv_phase_every][n_steps][MV_CHANNELS][2]   per channel: its first
//                  mark's clock, then (mark 1 - first) | (mark 2 - first) << 16, in cycles
//                  (seed kernels, one channel: issue, (loaded - issue) | (computed - issue) << 16)
//   mv_warps   u32 [blocks / mv_warp_every][n_tiles][warps][MV_BARRIERS] cycles each warp
//                                                  waited at each barrier of the k-step
//   mv_probe   u32 [1 + MV_PROBE_SLOTS * (1 + MV_VALUE_TILES)][32]  row 0 lane 0: shared base;
//                  row 1+s: offsets at slot s; row 1 + MV_PROBE_SLOTS * (1 + t) + s: the float
//                  bits each lane read at slot s in k-tile t
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
#define MV_TRACE_FORWARD , mv  // a body passing its trace on to a function it calls

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
#define MV_BEGIN_RECORD(blocks, block, thread)                                     \
    if ((thread) == 0) {                                                           \
        unsigned long long *mv_r = (blocks) + (size_t)MV_BLOCK_RECORD * (block);   \
        mv_r[0] = mv_globaltimer();                                                \
        mv_r[2] = clock64();                                                       \
        mv_r[4] = mv_smid();                                                       \
    }
#define MV_BLOCK_BEGIN() MV_BEGIN_RECORD(mv_blocks, MV_BID, MV_TID)

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
// code follows it. Which form leaves the loop as fast as at level 0 was measured at 4096^3: the
// tiled kernels keep the inline MV_BLOCK_END (the call cost them up to +4.3% at level 2, H200);
// the naive kernel's barrier-free loop needs MV_BLOCK_END_CALL (+0.1% against +6.9% inline at
// T=32, H200), and so do the register-tiled kernels 04-06 and 08: inline, ptxas gave their
// level-1 builds other register counts than level 0 and -31% to +28% (H100); with the call the
// same counts, and level 1 within 1% in 46 of 52 configurations (25 inline). Kernels 07 and
// 10 take the call too (below). The call reads every id itself, so nothing is kept across the
// loop for it.
#define MV_BLOCK_END() MV_END_RECORD(mv_blocks, MV_BID, MV_TID)

// The block and thread ids, read where a record is taken rather than kept from the kernel's
// start.
__device__ __forceinline__ void mv_ids(unsigned int &block, unsigned int &thread) {
    unsigned int tx, ty, nx, bx, by, gx;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tx));
    asm volatile("mov.u32 %0, %%tid.y;" : "=r"(ty));
    asm volatile("mov.u32 %0, %%ntid.x;" : "=r"(nx));
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(bx));
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(by));
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(gx));
    block = by * gx + bx;
    thread = ty * nx + tx;
}

__device__ __noinline__ void mv_block_end_call(unsigned long long *blocks) {
    unsigned int block, thread;
    mv_ids(block, thread);
    MV_END_RECORD(blocks, block, thread);
}
#define MV_BLOCK_END_CALL() mv_block_end_call(mv_blocks)

// The start record as a call too, for the same reason: inline, its code before the loop moved
// ptxas's schedule of the k loops at level 1. Configurations whose level-1 loops are the same
// schedule as level 0's (sm_90, every configuration), inline -> with both records as calls:
// kernel 04 6 of 8 -> 8, 05 2 of 10 -> 10, 06 6 of 60 -> 60, 07 60 of 128 -> 108, 10 6 of 24
// -> 20. Timed beside level 0 (H100, 4096^3, two rounds): 05 BM64 BK16 TM8 TN4 +1.46/+1.53%
// -> +0.08/+0.01%, 10 S3 X1 +1.58/+1.69% -> +0.12/+0.21%, 04, 06 and 07 within 0.3% either
// way. Kernel 08 keeps the inline start: its loops matched too (0 -> 16 of 16), but its level 1
// ran +2.24/+1.28% with the call against +0.56/+1.15% without. Kernel 09: not timed.
__device__ __noinline__ void mv_block_begin_call(unsigned long long *blocks) {
    unsigned int block, thread;
    mv_ids(block, thread);
    MV_BEGIN_RECORD(blocks, block, thread);
}
#define MV_BLOCK_BEGIN_CALL() mv_block_begin_call(mv_blocks)

#else
#define MV_TRACE_PARAMS
#define MV_TRACE_ARGS
#define MV_TRACE_DECL
#define MV_TRACE_FORWARD
#define MV_BLOCK_BEGIN()
#define MV_BLOCK_BEGIN_CALL()
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

#ifndef MV_CHANNELS
#define MV_CHANNELS 1
#endif
#ifndef MV_STAMP_STORE
#define MV_STAMP_STORE 0
#endif

#if MV_LEVEL >= 2
// Per-step stamps never touch memory inside the k loop: a store there queues behind the
// tile's shared-memory traffic and stalls the stamping warp, and every other warp then waits
// for it at the next barrier. A k-step's marks come in channels (the description's
// kstep.channels, numbered from 0): a channel is one sequence of steps, stamped in order by one
// warp, and several channels overlap when several k-steps are in flight (double buffering: the
// copy of step t + 1 beside the compute of step t). For channel c, lane (t % 32) of its warp
// keeps step t in two registers: the clock at the channel's first mark and the offsets of its
// marks 1 and 2 from it in 16 bits each (saturating at 0xFFFF cycles); the warp flushes 32
// steps at once with one coalesced 8-byte-per-lane store.
//
//   MV_STEPS_BEGIN(n_steps)          once, before the k loop
//   MV_CHANNEL(c, warp)              once per channel: channel c is stamped by warp `warp`
//   MV_STEP_BEGIN(c, t)              first mark of step t (also flushes steps t - 32 .. t - 1)
//   MV_STEP_BEGIN_CHAINED(c, t, j)   the same, and closes step t - 1 at its mark j (1 or 2)
//   MV_STEP_MARK(c, t, j)            mark j (1 or 2) of step t
//   MV_CHANNEL_FLUSH(c)              after the loop: stores the last steps
//   MV_CHANNEL_FLUSH_CHAINED(c, j)   after the loop: closes the last step at mark j and stores
//
// c and j are literals (they name registers by token pasting). A chained channel's last mark
// of step t is the same instant as its first mark of step t + 1, so one clock read serves both:
// the seed kernels stamp two clock reads per tile, not three, because passing barrier 2 of tile
// t is the top of tile t + 1 (a third read after barrier 2 cost 6% at T=32 on the H200: ptxas
// then stops overlapping the last multiply-adds of a tile with the barrier wait). An unchained
// channel stamps its last mark with MV_STEP_MARK.
// Clocks of different warps disagree (see MV_WARPS_BEGIN), and the recorder anchors every mark
// with warp 0's clock, so channels are stamped by warp 0 unless their times are only compared
// with each other.
#define MV_SPAN16(from, now) min((now) - (from), 0xFFFFu)
#define MV_PUT_1(c, span) mv_spans_##c = (span)
#define MV_PUT_2(c, span) mv_spans_##c |= (span) << 16
#define MV_STEP_SLOT(c, step) mv_step_row[(step) * MV_CHANNELS + (c)]
#define MV_STEPS_BEGIN(n_steps)                                                         \
    const int mv_n_tiles = (n_steps);                                                   \
    uint2 *const mv_step_row = reinterpret_cast<uint2 *>(mv.phases) +                   \
                               (size_t)(MV_BID / mv.phase_every) * mv_n_tiles * MV_CHANNELS; \
    const unsigned int mv_lane = MV_TID & 31;
#define MV_CHANNEL(c, warp)                                                             \
    static_assert((c) >= 0 && (c) < MV_CHANNELS, "channel " #c " >= MV_CHANNELS");      \
    const bool mv_on_##c = MV_STAMPED && MV_TID - 32u * (warp) < 32u;                   \
    unsigned int mv_first_##c = 0, mv_spans_##c = 0;
#define MV_STEP_BEGIN_CHAINED(c, t, j)                                                  \
    if (mv_on_##c) {                                                                    \
        const unsigned int mv_now = mv_clock();                                         \
        if ((t) > 0) {                                                                  \
            if (mv_lane == (((t) - 1) & 31)) MV_PUT_##j(c, MV_SPAN16(mv_first_##c, mv_now)); \
            if (((t) & 31) == 0)                                                        \
                MV_STEP_SLOT(c, (t) - 32 + mv_lane) = make_uint2(mv_first_##c, mv_spans_##c); \
        }                                                                               \
        if (mv_lane == ((t) & 31)) mv_first_##c = mv_now;                               \
    }
#define MV_STEP_BEGIN(c, t)                                                             \
    if (mv_on_##c) {                                                                    \
        const unsigned int mv_now = mv_clock();                                         \
        if ((t) > 0 && ((t) & 31) == 0)                                                 \
            MV_STEP_SLOT(c, (t) - 32 + mv_lane) = make_uint2(mv_first_##c, mv_spans_##c); \
        if (mv_lane == ((t) & 31)) mv_first_##c = mv_now;                               \
    }
#define MV_STEP_MARK(c, t, j)                                                           \
    if (mv_on_##c) {                                                                    \
        const unsigned int mv_span = MV_SPAN16(mv_first_##c, mv_clock());               \
        if (mv_lane == ((t) & 31)) MV_PUT_##j(c, mv_span);                              \
    }
// A channel whose steps overlap each other (the copy of step t issued STAGES - 1 steps before
// it lands) cannot flush 32 steps when step t + 32 begins: steps t + 1 .. may still be open.
// It opens a step with MV_STEP_OPEN and closes it with MV_STEP_CLOSE, and flushes 16 steps
// each time a step t with t % 16 == 15 closes: lanes (t & 16) .. + 15 then hold steps
// t - 15 .. t, all closed, and the (at most 16) steps opened ahead sit in the other half-warp.
//   MV_STEP_OPEN(c, t)               first mark of step t, nothing flushed
//   MV_STEP_CLOSE(c, t, j)           mark j (1 or 2, the step's last) of step t, flushing
//   MV_CHANNEL_FLUSH_CLOSED(c)       after the loop: stores the steps closed since
#define MV_STEP_OPEN(c, t)                                                              \
    if (mv_on_##c) {                                                                    \
        const unsigned int mv_now = mv_clock();                                         \
        if (mv_lane == ((t) & 31)) mv_first_##c = mv_now;                               \
    }
#define MV_STORE_HALF(c, t)                                                             \
    if (((mv_lane ^ (unsigned int)(t)) & 16) == 0)                                      \
        MV_STEP_SLOT(c, ((t) & ~15) + (mv_lane & 15)) = make_uint2(mv_first_##c, mv_spans_##c);
#define MV_STEP_CLOSE(c, t, j)                                                          \
    if (mv_on_##c) {                                                                    \
        const unsigned int mv_span = MV_SPAN16(mv_first_##c, mv_clock());               \
        if (mv_lane == ((t) & 31)) MV_PUT_##j(c, mv_span);                              \
        if (((t) & 15) == 15) { MV_STORE_HALF(c, t) }                                   \
    }
#define MV_CHANNEL_FLUSH_CLOSED(c)                                                      \
    if (mv_on_##c && mv_n_tiles > 0 && ((mv_n_tiles - 1) & 15) != 15 &&                 \
        (mv_lane & 15) <= ((mv_n_tiles - 1) & 15)) {                                    \
        MV_STORE_HALF(c, mv_n_tiles - 1)                                                \
    }
// The flush after the loop is not folded into the first-mark macros: written once with a
// general flush condition, ptxas emits 3-6 more instructions per tile (sm_90).
#define MV_CHANNEL_FLUSH_CHAINED(c, j)                                                  \
    if (mv_on_##c && mv_n_tiles > 0) {                                                  \
        const unsigned int mv_last = (mv_n_tiles - 1) & 31;                             \
        const unsigned int mv_now = mv_clock();                                         \
        if (mv_lane == mv_last) MV_PUT_##j(c, MV_SPAN16(mv_first_##c, mv_now));         \
        if (mv_lane <= mv_last)                                                         \
            MV_STEP_SLOT(c, ((mv_n_tiles - 1) & ~31) + mv_lane) =                       \
                make_uint2(mv_first_##c, mv_spans_##c);                                 \
    }
#define MV_CHANNEL_FLUSH(c)                                                             \
    if (mv_on_##c && mv_n_tiles > 0) {                                                  \
        const unsigned int mv_last = (mv_n_tiles - 1) & 31;                             \
        if (mv_lane <= mv_last)                                                         \
            MV_STEP_SLOT(c, ((mv_n_tiles - 1) & ~31) + mv_lane) =                       \
                make_uint2(mv_first_##c, mv_spans_##c);                                 \
    }
// MV_STAMP_STORE 1, the same marks in the same words, stored as they are taken: the channel
// warp's lane 0 stores a step's first clock at once and each later mark's span as 16 bits in
// place, and keeps only the step's first clock, where the form above keeps a step in each lane
// and flushes 32 at a time. ptxas schedules a k loop around the two differently, and neither
// leaves every kernel as fast as at level 0: on the H200 (4096^3, 61 configurations measured
// side by side) this form ran closer to level 0 in 25 of them, by up to 9.7 points, the lanes
// in 36. The recorder can build every form and keep the one closer to level 0 (--stamp-form
// auto).
// Channels whose steps overlap (MV_STEP_OPEN / MV_STEP_CLOSE) keep their steps in the lanes.
#if MV_STAMP_STORE
#define MV_STEP_WORD(c, t) reinterpret_cast<unsigned int *>(&MV_STEP_SLOT(c, t))
#define MV_STEP_SPAN(c, t, j) reinterpret_cast<unsigned short *>(MV_STEP_WORD(c, t) + 1)[(j) - 1]
#define MV_STAMPER(c) (mv_on_##c && mv_lane == 0)
#undef MV_STEP_BEGIN_CHAINED
#define MV_STEP_BEGIN_CHAINED(c, t, j)                                                  \
    if (MV_STAMPER(c)) {                                                                \
        const unsigned int mv_now = mv_clock();                                         \
        if ((t) > 0) MV_STEP_SPAN(c, (t) - 1, j) = MV_SPAN16(mv_first_##c, mv_now);     \
        MV_STEP_WORD(c, t)[0] = mv_first_##c = mv_now;                                  \
    }
#undef MV_STEP_BEGIN
#define MV_STEP_BEGIN(c, t)                                                             \
    if (MV_STAMPER(c)) MV_STEP_WORD(c, t)[0] = mv_first_##c = mv_clock();
#undef MV_STEP_MARK
#define MV_STEP_MARK(c, t, j)                                                           \
    if (MV_STAMPER(c)) MV_STEP_SPAN(c, t, j) = MV_SPAN16(mv_first_##c, mv_clock());
#undef MV_CHANNEL_FLUSH_CHAINED
#define MV_CHANNEL_FLUSH_CHAINED(c, j)                                                  \
    if (MV_STAMPER(c) && mv_n_tiles > 0)                                                \
        MV_STEP_SPAN(c, mv_n_tiles - 1, j) = MV_SPAN16(mv_first_##c, mv_clock());
#undef MV_CHANNEL_FLUSH
#define MV_CHANNEL_FLUSH(c)  // nothing kept: every mark is stored already
#endif
// MV_STAMP_HELD 1, the lanes form but for a step's middle mark: a channel of three marks
// (MV_MARKS_<c>, from the description) keeps mark 1 in one shared word, written by the whole
// warp, until the step's last mark puts both spans. Taken right after a barrier, the lane
// compare of the lanes form made ptxas keep 16-23 more registers through the k loop (kernel 04
// BM64 BN64 BK8 TM16: 95, 79 held); where that pushed the build past level 0's blocks per SM,
// the register cap spilled the plain copy too. Measured on an H100 (4096^3): +8.5% at every
// stride in the lanes form, +2.75% at 1 block in 8 held. A step's mark 1 must come before the
// next step's (no overlapping steps: MV_STEP_OPEN / MV_STEP_CLOSE keep two marks).
#if MV_STAMP_HELD
#undef MV_CHANNEL
#define MV_CHANNEL(c, warp)                                                             \
    static_assert((c) >= 0 && (c) < MV_CHANNELS, "channel " #c " >= MV_CHANNELS");      \
    const bool mv_on_##c = MV_STAMPED && MV_TID - 32u * (warp) < 32u;                   \
    unsigned int mv_first_##c = 0, mv_spans_##c = 0;                                    \
    __shared__ unsigned int mv_held_##c;
#undef MV_PUT_2
#define MV_PUT_2(c, span) mv_spans_##c = MV_SPAN16(mv_first_##c, mv_held_##c) | (span) << 16
#undef MV_STEP_MARK
#define MV_STEP_MARK(c, t, j)                                                           \
    if (mv_on_##c) {                                                                    \
        const unsigned int mv_now = mv_clock();                                         \
        if ((j) == 1 && MV_MARKS_##c == 3)                                              \
            mv_held_##c = mv_now;                                                       \
        else if (mv_lane == ((t) & 31))                                                 \
            MV_PUT_##j(c, MV_SPAN16(mv_first_##c, mv_now));                             \
    }
#endif
#else
#define MV_STEPS_BEGIN(n_steps)
#define MV_CHANNEL(c, warp)
#define MV_STEP_BEGIN_CHAINED(c, t, j)
#define MV_STEP_BEGIN(c, t)
#define MV_STEP_MARK(c, t, j)
#define MV_CHANNEL_FLUSH_CHAINED(c, j)
#define MV_CHANNEL_FLUSH(c)
#define MV_STEP_OPEN(c, t)
#define MV_STEP_CLOSE(c, t, j)
#define MV_CHANNEL_FLUSH_CLOSED(c)
#endif

// The seed kernels' one chained channel (issue, loaded, computed), stamped by warp 0.
#define MV_PHASES_BEGIN(n_tiles) MV_STEPS_BEGIN(n_tiles) MV_CHANNEL(0, 0)
#define MV_MARK_ISSUED(t) MV_STEP_BEGIN_CHAINED(0, t, 2)
#define MV_MARK_LOADED(t) MV_STEP_MARK(0, t, 1)
#define MV_MARK_LAST_COMPUTED() MV_CHANNEL_FLUSH_CHAINED(0, 2)

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
    const bool mv_values_on = MV_BID == mv.probe_block && MV_TID / 32 == mv.probe_warp && \
                              (t) < MV_VALUE_TILES;                                      \
    const bool mv_probe_on = mv_values_on && (t) == mv.probe_ktile;                      \
    const unsigned int mv_smem_base = (unsigned int)__cvta_generic_to_shared(shared_base); \
    if (mv_probe_on && (MV_TID & 31) == 0) mv.probe[0] = mv_smem_base;
#define MV_PROBE(slot, ptr)                                                   \
    if (mv_probe_on)                                                          \
        mv.probe[(1 + (slot)) * 32 + (MV_TID & 31)] =                         \
            (unsigned int)__cvta_generic_to_shared(ptr) - mv_smem_base;
#define MV_PROBE_VALUE(t, slot, value)                                                    \
    if (mv_values_on)                                                                     \
        mv.probe[(1 + MV_PROBE_SLOTS * (1 + (t)) + (slot)) * 32 + (MV_TID & 31)] =        \
            __float_as_uint(value);
#elif defined(MV_MIN_BLOCKS) && MV_LEVEL >= 1
// Levels 1-2: the recorder passes MV_MIN_BLOCKS when the instrumented build would need more
// registers than leave level 0's blocks per SM resident; capping them keeps the timeline's
// residency that of the kernel it stands for (measured: +48% -> +13% at 04 BM64 BN128 BK8
// TM16, where one block per SM instead of two had doubled the time).
#define MV_LAUNCH_BOUNDS(threads) __launch_bounds__(threads, MV_MIN_BLOCKS)
#else
#define MV_LAUNCH_BOUNDS(threads)
#endif
// A kernel that needs min_blocks blocks resident per SM (a register cap ptxas must meet, e.g.
// 128 a thread for two blocks of 256) asks for it at levels 0-2, where the timeline stands for
// the plain kernel; level 3 lifts the cap, as MV_LAUNCH_BOUNDS does, for the probes' registers.
#if MV_LEVEL >= 3
#define MV_LAUNCH_BOUNDS_MIN(threads, min_blocks) __launch_bounds__(threads)
#elif defined(MV_MIN_BLOCKS) && MV_LEVEL >= 1
#define MV_LAUNCH_BOUNDS_MIN(threads, min_blocks) __launch_bounds__(threads, MV_MIN_BLOCKS)
#else
#define MV_LAUNCH_BOUNDS_MIN(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#endif
#if MV_LEVEL < 3
#define MV_WARPS_BEGIN(n_tiles)
#define MV_ARRIVE(t, barrier)
#define MV_RELEASED(t, barrier)
#define MV_PROBE_BEGIN(t, shared_base)
#define MV_PROBE(slot, ptr)
#define MV_PROBE_VALUE(t, slot, value)
#endif
