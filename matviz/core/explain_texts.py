"""The English source texts of the explanations, one module constant per template.

``TEMPLATES`` lists them all; ``resources/i18n/zh_CN_explain.json`` translates every one, with the
same ``{placeholders}`` (a test checks both).
"""

# -- titles ---------------------------------------------------------------------------------
TITLE_WAITING = "Block ({bx}, {by}): waiting"
TITLE_PHASE = "Block ({bx}, {by}): {phase} of k-tile t = {t}"
TITLE_DONE = "Block ({bx}, {by}): done"
TITLE_RUNNING = "Block ({bx}, {by}): running"
TITLE_PROLOGUE = "Block ({bx}, {by}): starting"
TITLE_EPILOGUE = "Block ({bx}, {by}): writing C"

# -- what the block is doing ----------------------------------------------------------------
WAITING_FIRST = (
    "Block ({bx}, {by}) has not started yet. It is block {index} of {blocks} in launch order, "
    "in the first wave, so a slot is free for it: the GPU just hands blocks to the SMs one "
    "after another. It starts on SM {sm} at {start}, {wait} from now."
)
WAITING_LATER = (
    "Block ({bx}, {by}) has not started: every SM slot is still taken by earlier blocks. It is "
    "block {index} of {blocks} in launch order, so it runs in wave {wave} of {waves}; it "
    "starts on SM {sm} at {start}, {wait} from now, when a block there finishes."
)
WAITING_OCCUPANCY = (
    "One SM holds at most {per_sm} blocks of this kernel at once (limited by {limiter}), "
    "{resident} on the whole GPU."
)
WAITING_OCCUPANCY_ONE = (
    "One SM holds one block of this kernel at a time (limited by {limiter}), {resident} on the "
    "whole GPU."
)
# The phases are the description's ({phase}: its name); {which} {barrier}: "first __syncthreads",
# the barrier that ends the phase, counted over the k-step's barriers (ORDINALS).
LOADING = (
    "Block ({bx}, {by}) on SM {sm} is loading k-tile t = {t} of {n} (its {phase} phase): its "
    "{threads} threads copy {a_elems} elements of A and {b_elems} of B into shared memory "
    "({arrays})."
)
# A k-step whose tiles the copy engine brings in (TMA): the producer's phase, then the wait of a
# consumer for the bytes to land (mbarriers, no block-wide barrier)
LOADING_TMA = (
    "Block ({bx}, {by}) on SM {sm} is asking for k-tile t = {t} of {n} (its {phase} phase): one "
    "thread of its producer warp waits until slot {slot} of {slots} is free, then asks the copy "
    "engine (TMA, {instruction}) for {a_elems} elements of A and {b_elems} of B. The engine "
    "writes them into {arrays} in the {swizzle}-byte swizzled layout the Tensor Cores read, "
    "without a lane computing an address or a register holding the data, and counts the bytes "
    "on the slot's mbarrier."
)
WAITING_TMA = (
    "Block ({bx}, {by}) on SM {sm} is waiting for k-tile t = {t} of {n} (its {phase} phase): its "
    "consumer warps spin on slot {slot}'s mbarrier until the copy engine's {bytes} have landed. "
    "The producer asked for them as soon as the slot was free, up to {ahead} k-steps earlier."
)
# Copies a thread issues and leaves (cp.async): they land while the block computes earlier steps
LOADING_ASYNC = (
    "Block ({bx}, {by}) on SM {sm} is loading k-tile t = {t} of {n} (its {phase} phase): its "
    "{threads} threads have issued asynchronous copies (cp.async) of {a_elems} elements of A "
    "and {b_elems} of B into shared memory ({arrays}). A cp.async writes shared memory itself, "
    "with no register in between, so a thread need not wait for it: {in_flight} k-steps are in "
    "flight, each in its own slot of the tiles, and the block computes the earlier k-tiles "
    "while the later ones travel."
)
LOADING_ASYNC_BARRIER = (
    "Before this k-tile is computed, each thread waits for its own copies of it "
    "(cp.async.wait_group), then everyone meets at the {which} {barrier}, so the tiles are "
    "complete before anyone reads them and nobody still reads the slot the next copies fill."
)
LOADING_BARRIER = (
    "Then they wait at the {which} {barrier}, so the tiles are complete before anyone reads them."
)
COMPUTING = (
    "Block ({bx}, {by}) on SM {sm} is computing k-tile t = {t} of {n} (its {phase} phase): "
    "each of its {threads} threads multiply-accumulates {products} products from {arrays} "
    "into sums kept in registers."
)
COMPUTING_MMA = (
    "Block ({bx}, {by}) on SM {sm} is computing k-tile t = {t} of {n} (its {phase} phase) on "
    "the Tensor Cores: each of its {warps} warps loads fragments of {arrays} ({ops}) and "
    "issues {mmas} × {instruction} ({sass}), {fmas} multiply-adds each, into the fp32 sums of "
    "its {warp_rows} × {warp_cols} warp tile held in registers."
)
COMPUTING_MMA_SHARED = (
    "Block ({bx}, {by}) on SM {sm} is computing k-tile t = {t} of {n} (its {phase} phase) on "
    "the Tensor Cores: each of its {groups} consumer warpgroups ({group_threads} threads) issues "
    "{mmas} × {instruction} ({sass}), {fmas} multiply-adds each, reading {arrays} straight from "
    "shared memory through matrix descriptors (no lane loads them), into the fp32 sums of its "
    "{group_rows} × {warp_cols} tile held in registers."
)
PRODUCER_IDLE = "Warps 0-{last_idle} multiply nothing: they are the producer."
COMPUTING_BARRIER = (
    "The {which} {barrier} at its end stops anyone overwriting the tiles while another warp "
    "still reads them."
)
# A barrier the run leaves out on purpose (a deliberately broken variant, §11-12)
LOADING_NO_BARRIER = (
    "The {which} {barrier} that should follow is left out on purpose in this run: warps start "
    "reading the tiles while other warps may still be writing them, so some read the previous "
    "k-tile's values (the Errors tab shows which)."
)
COMPUTING_NO_BARRIER = (
    "The {which} {barrier} that should end this phase is left out on purpose in this run: a "
    "warp that finishes early loads the next k-tile over the tiles while slower warps still "
    "read them (the Errors tab shows which values were overwritten)."
)
IN_PHASE_NO_BARRIER = "The {which} {barrier} that should end this phase is left out on purpose."
IN_PHASE = "Block ({bx}, {by}) on SM {sm} is in the {phase} phase of k-tile t = {t} of {n}."
IN_PHASE_BARRIER = "The phase ends at the {which} {barrier}."
DONE = (
    "Block ({bx}, {by}) finished at {end} after {run} on SM {sm}. Its {threads} threads wrote "
    "the block's {c_elems} elements of C once each, from sums kept in registers (§14)."
)
DONE_EDGE = (
    "Block ({bx}, {by}) finished at {end} after {run} on SM {sm}. It is an edge block: only "
    "{c_elems} of its {tile_elems} elements of C lie inside the {M}×{N} matrix, and its "
    "{threads} threads wrote those once each, from sums kept in registers; the stores of the "
    "other {outside} were skipped by the row < M && col < N guard (§14, §26)."
)
RUNNING_SAMPLED = (
    "Block ({bx}, {by}) is running on SM {sm}, from {begin} to {end} ({dur}). The trace kept "
    "per-tile marks for only one block in {every}, to stay within its size budget, so which "
    "k-tile this one is on was not recorded; the sampled blocks around it show the phases."
)
RUNNING_NO_STEPS = (
    "Block ({bx}, {by}) of the {kernel} kernel is running on SM {sm}, from {begin} to {end} "
    "({dur}). It walks K = {K} without k-tiles, so there are no per-tile marks: each of its "
    "{threads} threads reads A and B straight from global memory, {loads} loads for {fmas} "
    "multiply-adds, and keeps its sums in registers."
)
RUNNING_NO_PHASES = (
    "Block ({bx}, {by}) is running on SM {sm}, from {begin} to {end} ({dur}). This trace was "
    "recorded without per-tile marks, so it shows only when each block started and ended; "
    "record at level 2 or higher to see its k-tiles."
)
PROLOGUE = (
    "Block ({bx}, {by}) has just started on SM {sm}: each thread works out its row and column "
    "from blockIdx and threadIdx and sets sum = 0 in a register. Its first k-tile begins at "
    "{next}."
)
EPILOGUE = (
    "Block ({bx}, {by}) on SM {sm} has finished all {n} k-tiles: each thread now writes its sum "
    "from a register to C, once."
)
BETWEEN_STEPS = (
    "Block ({bx}, {by}) on SM {sm} is between k-tiles: {done} of {n} are finished and the next "
    "has not begun."
)
PHASE_TIME = "In this trace this phase lasts {dur}, from {begin} to {end}."
# Several k-steps in flight (a pipeline): the other channels' phases the block stamped around t.
OVERLAP = (
    "Meanwhile its {other} phase runs for k-tile t = {steps}: {in_flight} k-steps are in flight, "
    "and the strip under the SM lanes draws them side by side as the block stamped them."
)
# Barrier waits come from the separate level-3 run: said apart, never as part of this phase.
WAITS_ELSEWHERE = (
    "How long each warp waited at the {which} {barrier} was measured in a separate, slower "
    "level-3 run, so it is not part of this timeline: the Barrier waits panel shows it."
)

# -- data reuse and edges ---------------------------------------------------------------------
REUSE_SHARED = (
    "Data reuse: per k-tile of depth {depth} the block loads {loads} elements from global "
    "memory into shared memory and does {fmas} FMAs with them, so each loaded element is used "
    "{uses} times (§13). Over the whole kernel the load instructions request {issued} of A and "
    "B; the lesson's formula {formula_text} gives {formula}, where reading A and B afresh for "
    "every multiply-add would request 2mnk × {elem} B = {naive}."
)
REUSE_SHARED_TMA = (
    "Data reuse: per k-tile of depth {depth} the copy engine brings {loads} elements from global "
    "memory into the block's shared memory, and the block does {fmas} FMAs with them, so each "
    "copied element is used {uses} times (§13). Over the whole kernel the TMA copies request "
    "{issued} of A and B; the lesson's formula {formula_text} gives {formula}, where reading A "
    "and B afresh for every multiply-add would request 2mnk × {elem} B = {naive}."
)
REUSE_NONE = (
    "No data reuse through shared memory: the kernel's load instructions request {issued} from "
    "global memory in all (the lesson's formula {formula_text}). Staging b × b tiles in shared "
    "memory would divide this by b (§5-6)."
)
DRAM_FLOOR = (
    "Requests for data already in the L1 or L2 cache never reach DRAM: DRAM itself must "
    "deliver at least A and B once and take C once, {floor_formula} = {floor}."
)
EDGE_SHARED = (
    "This is an edge block ({what}): out-of-range elements of A and B are stored in shared "
    "memory as 0, so the inner loop needs no test, and the store to C is guarded by "
    "row < M && col < N (§26)."
)
EDGE_NAIVE = (
    "This is an edge block ({what}): threads outside C skip all work, guarded by "
    "if (row < M && col < N) (§26)."
)
EDGE_ROWS = "only {rows} of its {size} rows lie inside M = {M}"
EDGE_COLS = "only {cols} of its {size} columns lie inside N = {N}"
EDGE_K = "its last k-tile holds only {krem} of {depth} values of K = {K}"
EDGE_SEP = "; "

# -- lesson sections ------------------------------------------------------------------------
CONCEPT_WAITING = "Lesson 8 §17: blocks per SM (occupancy) and waves"
CONCEPT_LOADING = "Lesson 8 §8, §11: tiles into shared memory, the first __syncthreads"
CONCEPT_COMPUTING = "Lesson 8 §12-14: multiply-add from shared memory, sum in a register"
CONCEPT_COMPUTING_MMA = "Lesson 8 §20-23: a warp multiplies fragments on the Tensor Cores"
CONCEPT_COMPUTING_WGMMA = (
    "Lesson 8 §20-23: a warpgroup multiplies tiles in shared memory on the Tensor Cores"
)
CONCEPT_LOADING_ASYNC = (
    "Lesson 8 §24-25: double buffering, the next tiles copied while the block computes"
)
CONCEPT_LOADING_TMA = "Lesson 8 §24-25: the copy engine fills the next slots while others compute"
CONCEPT_DONE = "Lesson 8 §14: the result is written once"
CONCEPT_RUNNING = "Lesson 8 §9-10: the k-tile loop"
CONCEPT_NO_STEPS = "Lesson 8 §4-5: without tiles, every thread re-reads global memory"
CONCEPT_PROLOGUE = "Lesson 8 §3: 2-D grid, each thread finds its row and column"
CONCEPT_EPILOGUE = "Lesson 8 §14, §26: one guarded write of C"

# -- facts about the whole run --------------------------------------------------------------
FACT_SIMULATED = "Simulated: these times come from a model of the {device}, not a measurement."
FACT_SIMULATED_CHECKED = (
    "Checked against {n} configurations of this kernel measured on the {device} at {size}³, the "
    "model's time came within {tolerance}% in {within}; its rate ran {low}× to {high}× the "
    "measured one (median {median}×)."
)
FACT_SIMULATED_UNCHECKED = (
    "Not yet checked against this kernel's code as it is: the {earlier} configurations measured "
    "on the {device} at {size}³ ran an earlier version of it."
)
FACT_RECORDED = "Recorded on {device} (timer: {timer})."
FACT_RATE = "{gflops} GFLOP/s for {M}×{N}×{K} in {time}: {pct}% of cuBLAS ({cublas} GFLOP/s)."
FACT_RATE_ONLY = "{gflops} GFLOP/s for {M}×{N}×{K} in {time}."
FACT_TIMELINE_COST = (
    "That rate is the plain kernel's (level 0). The timeline's times come from the level-{level} "
    "build, which writes the record: timed beside it, it ran {pct} against level 0."
)
FACT_TIMELINE_BOUNDED = "Its registers were bounded to keep {per_sm}, as at level 0."
FACT_TIMELINE_THINNED_ALL = (
    "With every block stamping its k-steps it ran {denser}: a block that stamps runs slower. So "
    "only 1 block in {every} stamped them, to keep the timeline close to the plain kernel."
)
FACT_TIMELINE_THINNED_SOME = (
    "With 1 block in {n} stamping its k-steps it ran {denser}: a block that stamps runs slower. "
    "So only 1 block in {every} stamped them, to keep the timeline close to the plain kernel."
)
# why thinning stops helping: the launch waits for the SM that ran the most stamping blocks
FACT_STAMPING_TAIL_ONE = (
    "A block that stamps ran {extra} longer than one that does not (medians). A launch ends "
    "with its slowest SM, and an SM that ran a stamping block ends that much later: {share} of "
    "the launch, however few blocks stamp."
)
FACT_STAMPING_TAIL = (
    "A block that stamps ran {extra} longer than one that does not (medians). A launch ends "
    "with its slowest SM, and one SM ran {most} stamping blocks: {most} × {extra} is {share} of "
    "the launch."
)
FACT_WAVES = (
    "{blocks} blocks ran in {waves} waves: at most {resident} at once, {per_sm} over the run, "
    "on {sms} SMs."
)
FACT_ONE_WAVE = "All {blocks} blocks fit on the GPU at once (one wave): {per_sm}, on {sms} SMs."
# {per_sm} of the texts above: how many blocks each SM ran or held
PER_SM_ONE = "one block per SM"
PER_SM_EVEN = "{n} blocks per SM"
PER_SM_RANGE = "{lo}-{hi} blocks per SM"
FACT_OCCUPANCY = (
    "At most {per_sm} blocks fit on one SM at a time, limited by {limiter} ({registers} "
    "registers per thread)."
)
FACT_OCCUPANCY_ONE = (
    "One block at a time fits on an SM, limited by {limiter} ({registers} registers per thread)."
)
FACT_SMEM = "Each block keeps {arrays} in {smem} of shared memory."
FACT_REUSE = (
    "Per k-step (depth {depth}) each thread does {fmas} multiply-adds and reads {reads} values "
    "from shared memory: {ratio} multiply-adds per value read ({block_fmas} multiply-adds and "
    "{block_reads} values for the whole block)."
)
FACT_REGISTERS = "The uninstrumented kernel uses {registers} registers per thread (ptxas)."
FACT_ISSUE_CEILING = (
    "ptxas's k loop issues {instructions} instructions a k-step, {fmas} of them FFMA ({share}%). "
    "An SM sub-partition issues one instruction a clock and the FP32 peak needs an FFMA in every "
    "one, so issue alone caps this configuration at {ceiling} GFLOP/s, {share}% of the {peak} "
    "GFLOP/s peak; this run reached {reached}% of that."
)
FACT_SHARED_CEILING = (
    "Shared memory serves one 128-byte wavefront a clock on each SM. A block's k-step costs "
    "{wavefronts} wavefronts of shared loads and stores for {flop} FLOP ({per} FLOP a "
    "wavefront), so shared memory alone caps this kernel at {ceiling} GFLOP/s on {sms} SMs at "
    "{clock} MHz: {pct}% of the {peak} GFLOP/s peak."
)
FACT_SHARED_CEILING_ABOVE = (
    "Shared memory serves one 128-byte wavefront a clock on each SM. A block's k-step costs "
    "{wavefronts} wavefronts of shared loads and stores for {flop} FLOP ({per} FLOP a "
    "wavefront), so shared memory would allow {ceiling} GFLOP/s on {sms} SMs at {clock} MHz, "
    "{pct}% of the {peak} GFLOP/s peak: the multiply-adds bind first."
)
FACT_SMEM_PAD = (
    "Each block keeps {arrays} in {smem} of shared memory, of which {padding} is padding."
)
FACT_NO_SMEM = (
    "The {kernel} kernel uses no shared memory: its threads read A and B from global memory."
)
FACT_BANKS = "Worst shared-memory bank conflict in the probed warp: {degree}-way, at {site}."
FACT_NO_CONFLICT = "The probed warp's shared-memory accesses are free of bank conflicts."
FACT_GLOBAL = (
    "Global memory: the load instructions request {issued}; the lesson's formula "
    "{formula_text} gives {formula}. The DRAM floor (A and B read once, C written once) is "
    "{floor_formula} = {floor}."
)
FACT_GLOBAL_TMA = (
    "Global memory: the TMA copies request {issued}; the lesson's formula {formula_text} gives "
    "{formula}. The DRAM floor (A and B read once, C written once) is {floor_formula} = {floor}."
)
FACT_MEASURED = (
    "Measured with ncu on {device} (one launch, level-0 build): {l1} requested by global "
    "loads, {l2} through L2, {dram} read from DRAM (A and B once: {ab})."
)
FACT_MEASURED_COPIES = (
    "Measured with ncu on {device} (one launch, level-0 build): {copies} brought in by the copy "
    "engine (TMA) and {l1} by global load instructions, {l2} through L2, {dram} read from DRAM "
    "(A and B once: {ab})."
)
FACT_SAMPLED = "Per-tile phases were kept for {kept} of {blocks} blocks."

ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
ORDINAL_N = "{number}th"
ORDINAL_ONLY = "k-step's"  # a k-step's one barrier: "the k-step's __syncthreads"

LIMITERS = {
    "blocks": "block slots per SM",
    "threads": "threads per SM",
    "warps": "warps per SM",
    "shared_memory": "shared memory per SM",
    "registers": "registers per SM",
}

TEMPLATES: tuple[str, ...] = (
    tuple(
        value
        for name, value in sorted(globals().items())
        if name.isupper() and isinstance(value, str) and name != "TEMPLATES"
    )
    + tuple(LIMITERS.values())
    + tuple(ORDINALS.values())
)
