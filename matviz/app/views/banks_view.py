"""Shared-memory banks hit by one warp instruction: 32 banks across, the words of a bank stacked.

The view lists the shared-memory instructions ptxas emits (:mod:`matviz.core.instructions`):
consecutive loads of a row merge into LDS.64 / LDS.128 where the layout allows it, so kernel 02
at PAD 0 reads As with 8 LDS.128 per k-tile, not 32 scalar loads. Lanes reading one word share
it (broadcast); every further distinct word in a bank is one more pass, so an n-way conflict is
a column n cells tall. Wavefronts follow :func:`matviz.core.banks.wavefronts`, with the
warp-wide broadcast rule measured on the H200.

The view follows the selected block, a warp picked here, and the k-tile of that block at the
playhead. Its accesses come from the level-3 probe when the probe recorded exactly that block,
warp and k-tile on a GPU, and from the access model (:func:`matviz.core.access.access_records`,
evaluated from the kernel's description) otherwise; the summary says which.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSpinBox,
    QWidget,
)

from matviz.app.i18n import Retranslating, tr
from matviz.app.session import Session
from matviz.app.views import palette
from matviz.app.views.live_label import live
from matviz.app.views.on_screen import WhenOnScreen
from matviz.core import access, banks, sass_table, store_fills
from matviz.core import instructions as ins
from matviz.core.explain import join_sentences
from matviz.core.trace import PROBE_DTYPE
from matviz.errors import MatvizError

MAX_STACK = 32  # a 4-byte access can stack at most 32 words in one bank


def measured_gflops(kernel: str, params: dict) -> float | None:
    """GFLOP/s the bundled H200 benchmark (4096³) measured for this configuration, if any."""
    from matviz.bench.ladder import measured_configs

    found = [g for p, g in measured_configs(kernel) if p == params]
    return found[0] if found else None


NOTE_MAX_HEIGHT = 120  # px: about six lines
# conflicts per cp.async store by which ncu and the model differ before the view says so
COPY_CONFLICTS_AGREE = 0.5
# (caused, left) by a layout against the plain one, per kind of layout parameter
CONFLICT_CAUSES = {
    "pad": ("Padding itself causes this conflict:", "Padding leaves a conflict:"),
    "swizzle": ("The swizzle itself causes this conflict:", "The swizzle leaves a conflict:"),
}


def _op_order(item: tuple[str, int]) -> tuple[int, str]:
    """Loads before stores, wide before narrow: LDS.128, LDS.64, LDS, STS..., LDGSTS..."""
    op = item[0]
    width = int(op.split(".")[1]) if "." in op else 32
    return (op.startswith(("ST", "LDGSTS")), -width, op)


def lanes_text(lanes: list[int]) -> str:
    """'5', '0,8,16' or '0–31' (a run of consecutive lanes)."""
    if len(lanes) > 2 and lanes == list(range(lanes[0], lanes[-1] + 1)):
        return f"{lanes[0]}–{lanes[-1]}"
    return ",".join(map(str, lanes))


class BanksView(Retranslating, QWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.conflict_degree = 0  # n of "n-way" for the shown access (0: none shown)
        self.wavefronts = 0
        self.ideal_wavefronts = 0
        self.cells: dict[tuple[int, int], tuple[int, list[int]]] = {}  # (bank, level) -> word
        self.records = np.zeros(0, PROBE_DTYPE)  # the warp's accesses, in program order
        self.instrs: list[ins.Instruction] = []  # ... as the instructions ptxas emits
        self.plan: dict | None = None  # instructions.plan of the trace's configuration
        self._changes: tuple = (None, [])  # (key, instructions.compare) of padding_text
        self.source = ""  # "probe" (recorded on the GPU) or "model"
        self.key: tuple | None = None  # (block, warp, k-tile) shown
        self.row = 0  # the instruction shown (the session keeps its first access row)

        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.title = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.site_label = QLabel()
        self.sites = QComboBox()
        self.sites.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.sites.setMinimumContentsLength(24)  # long instruction texts must not widen the view
        self.sites.currentIndexChanged.connect(self._on_site)
        self.warp_label = QLabel()
        self.warp_box = QSpinBox()
        self.warp_box.valueChanged.connect(self._on_warp)
        self.summary = QLabel(textFormat=Qt.RichText, wordWrap=True)
        self.note = QLabel(textFormat=Qt.RichText, wordWrap=True)  # padding, measured stores
        # the notes scroll, so the bank plot keeps its height however long they are
        self.note_area = QScrollArea(widgetResizable=True, frameShape=QFrame.NoFrame)
        self.note_area.setWidget(self.note)
        self.note_area.setMaximumHeight(NOTE_MAX_HEIGHT)
        self.plot = palette.make_plot()
        item = self.plot.getPlotItem()
        item.getViewBox().setMouseEnabled(False, False)
        item.setRange(xRange=(0, banks.N_BANKS), yRange=(0, MAX_STACK), padding=0.01)
        item.getAxis("bottom").setTicks([palette.index_ticks(banks.N_BANKS, 32)])
        item.getAxis("left").setTicks([[(y - 0.5, str(y)) for y in (1, 4, 8, 16, 24, 32)]])
        self.image = pg.ImageItem(axisOrder="row-major")
        item.addItem(self.image)
        self.borders = palette.cell_lines(item, path=palette.cell_borders(32, MAX_STACK))
        self.labels = palette.CellLabels()  # lane numbers, painted when the cells are big enough
        item.addItem(self.labels)

        row = QHBoxLayout()
        row.addWidget(self.site_label)
        row.addWidget(self.sites, 1)
        row.addWidget(self.warp_label)
        row.addWidget(self.warp_box)
        self.stack = palette.stacked(
            self, self.placeholder, live(self.title), row, live(self.summary), (self.plot, 1),
            self.note_area,
        )

        self.plot.scene().sigMouseMoved.connect(self._on_move)
        session.traceChanged.connect(self.refresh)
        session.probeRowChanged.connect(self._on_probe_row)
        session.playheadChanged.connect(WhenOnScreen(self, self._follow).request)
        session.selectionChanged.connect(self._follow)
        self.refresh()

    # -- session -> view ---------------------------------------------------------------------
    def has_probe(self) -> bool:
        """Whether there is anything to show: the kernel has shared-memory access sites."""
        return self.session.trace is not None and bool(self.session.trace.config.sites)

    def _probe_key(self) -> tuple | None:
        """(block index, warp, k-tile) the trace's probe recorded, None without a probe."""
        trace = self.session.trace
        if trace is None or not len(trace.probe):
            return None
        return trace.probe_location or (0, 0, 0)

    def _ktile(self) -> int:
        """The selected block's k-tile at the playhead (its last one once done, 0 before)."""
        trace, timeline = self.session.trace, self.session.timeline
        n = max(trace.config.n_steps, 1)
        state, ktile = timeline.block_phase(self.session.selected_block, self.session.playhead_ns)
        if ktile >= 0:
            return int(ktile)
        done = self.session.playhead_ns >= int(trace.blocks["end"][self.session.selected_block])
        return n - 1 if done else 0

    def _current_key(self) -> tuple[int, int, int]:
        return self.session.selected_block, int(self.warp_box.value()), self._ktile()

    def _load_records(self) -> None:
        """The accesses of the selected block, warp and k-tile: probe or model."""
        trace = self.session.trace
        self.key = self._current_key()
        block, warp, ktile = self.key
        if self.plan is None:
            self.plan = ins.plan(trace.config)
        if self.key == self._probe_key() and not trace.is_simulated:
            self.records, self.source = trace.probe, "probe"
        else:
            b = trace.blocks[block]
            self.records = access.access_records(
                trace.config, warp, (int(b["bx"]), int(b["by"])), ktile
            )
            self.source = "model"
        self.instrs = ins.instructions(trace.config, self.records, self.plan)

    def _fill_sites(self) -> None:
        """The instruction list; refilled only where its texts changed (a new k-tile of the
        same warp mostly has the same instructions, and a refill lays the view out again)."""
        texts = [self.site_text(row) for row in range(len(self.instrs))]
        self.sites.blockSignals(True)
        if texts != [self.sites.itemText(i) for i in range(self.sites.count())]:
            self.sites.clear()
            self.sites.addItems(texts)
        if texts:
            self.sites.setCurrentIndex(self._row())
        self.sites.blockSignals(False)

    def refresh(self) -> None:
        self.key = None
        self.plan = None
        self.records = np.zeros(0, PROBE_DTYPE)
        self.instrs = []
        trace = self.session.trace
        if self.has_probe():
            self.warp_box.blockSignals(True)
            self.warp_box.setRange(0, trace.config.warps - 1)
            probe = self._probe_key()
            self.warp_box.setValue(probe[1] if probe else 0)
            self.warp_box.blockSignals(False)
            self._load_records()
        self.row = self._instruction_of(self.session.probe_row)
        self._fill_sites()
        self._draw()
        self.stack.setCurrentIndex(1 if self.has_probe() else 0)
        self.retranslate()

    def _follow(self, *_args) -> None:
        """Playhead or selection moved: redraw only when the block, warp or k-tile changed."""
        if not self.has_probe() or self._current_key() == self.key:
            return
        self._load_records()
        self._fill_sites()
        self._draw()
        self._set_title()
        self._update_texts()

    def _on_warp(self, _warp: int) -> None:
        self._follow()

    def _instruction_of(self, record_row: int) -> int:
        """The instruction that covers access record ``record_row`` (0 if none)."""
        for i, instr in enumerate(self.instrs):
            if record_row in instr.rows:
                return i
        return 0

    def _on_probe_row(self, row: int) -> None:
        self.row = self._instruction_of(row)
        self.sites.blockSignals(True)
        self.sites.setCurrentIndex(self._row())
        self.sites.blockSignals(False)
        self._draw()
        self._update_texts()

    def _row(self) -> int:
        return min(max(self.row, 0), max(len(self.instrs) - 1, 0))

    def instruction(self) -> ins.Instruction | None:
        """The instruction shown (None without one)."""
        return self.instrs[self._row()] if self.instrs else None

    def _on_site(self, index: int) -> None:
        if index < 0 or index >= len(self.instrs):
            return
        self.row = index
        # the session keeps the access row; refused where the trace's probe has fewer rows
        self.session.set_probe_row(self.instrs[index].rows[0])
        self._draw()
        self._update_texts()

    def _draw(self) -> None:
        self.cells.clear()
        self.labels.set_texts([])
        self.conflict_degree = self.wavefronts = self.ideal_wavefronts = 0
        instr = self.instruction()
        if not self.has_probe() or instr is None:
            self.image.clear()
            return
        offsets, width = instr.offsets, instr.width
        self.conflict_degree = instr.conflict_degree
        self.wavefronts = instr.wavefronts
        self.ideal_wavefronts = instr.ideal_wavefronts
        lanes_of: dict[int, list[int]] = {}
        for lane in np.flatnonzero(offsets >= 0):
            for w in range(width // banks.BANK_BYTES):
                lanes_of.setdefault(int(offsets[lane]) // banks.BANK_BYTES + w, []).append(
                    int(lane)
                )
        codes = np.zeros((MAX_STACK, banks.N_BANKS), np.uint8)
        texts = [[""] * banks.N_BANKS for _ in range(MAX_STACK)]
        level = np.zeros(banks.N_BANKS, np.int64)
        for word in sorted(lanes_of):
            bank, lanes = word % banks.N_BANKS, lanes_of[word]
            if level[bank] >= MAX_STACK:
                continue
            y = int(level[bank])
            level[bank] += 1
            codes[y, bank] = lanes[0] + 1
            self.cells[(bank, y)] = (word, lanes)
            texts[y][bank] = lanes_text(lanes)
        self.labels.set_texts(texts)
        self.image.setImage(codes, lut=palette.lane_lut(), levels=(0, 255), autoLevels=False)

    # -- hover -------------------------------------------------------------------------------
    def word_name(self, word: int) -> str:
        """'As[1][3]': the cell of the kernel's shared arrays (its description's ``shared``, laid
        out at ``array_bases``) a 4-byte word starts; 'word 7' outside every array."""
        config = self.session.trace.config
        byte = word * banks.BANK_BYTES
        name = cell_name(config, byte)
        return name if name is not None else f"word {word}"

    def describe(self, bank: int, level: int) -> str:
        word, lanes = self.cells[(bank, level)]
        return tr("bank {bank} · word {word} = {element} (byte {byte})\nlanes: {lanes}").format(
            bank=bank,
            word=word,
            element=self.word_name(word),
            byte=word * 4,
            lanes=lanes_text(lanes),
        )

    def _on_move(self, scene_pos) -> None:
        pos = self.plot.getPlotItem().getViewBox().mapSceneToView(QPointF(scene_pos))
        key = (int(np.floor(pos.x())), int(np.floor(pos.y())))
        self.plot.setToolTip(self.describe(*key) if key in self.cells else "")

    # -- texts -------------------------------------------------------------------------------
    def _repeats(self, site: str) -> bool:
        """Whether the description runs ``site`` more than once per k-step (then k names it)."""
        try:
            return self.session.trace.config.site(site).repeat > 1
        except KeyError:  # a site the description does not have: show k
            return True

    def site_text(self, row: int) -> str:
        instr = self.instrs[row]
        name = f"{instr.site} {instr.ks_text()}" if self._repeats(instr.site) else instr.site
        index = sum(1 for other in self.instrs[:row] if other.site == instr.site) + 1
        return tr("{name} · {opcode} ({i} of {count} per k-tile) — {n}-way, {wavefronts}").format(
            name=name,
            opcode=instr.opcode,
            i=index,
            count=instr.per_step,
            n=instr.conflict_degree,
            wavefronts=wavefront_count(instr.wavefronts),
        )

    def site_sentence(self, instr: ins.Instruction) -> str:
        """'ptxas reads As with 8 LDS.128 per k-tile (the source's 32 accesses), 2 wavefronts
        each.': a site's instances per k-step (one per k for kernel 02's, one per fragment for an
        ldmatrix site) and the instructions ptxas made of them."""
        config = self.session.trace.config
        mine = [i for i in self.instrs if i.site == instr.site]
        summary = ins.summarise(config, mine)[0]
        rs = config.site(instr.site)
        store = instr.kind == "store"
        if summary.each is not None:
            text = (
                tr("ptxas writes {array} with {count} {opcode} per k-tile, {wavefronts} each.")
                if store
                else tr(
                    "ptxas reads {array} with {count} {opcode} per k-tile (the source's {repeat} "
                    "accesses), {wavefronts} each."
                )
            )
            w = summary.each
        else:
            text = (
                tr("ptxas writes {array} with {count} {opcode} per k-tile, {wavefronts} in all.")
                if store
                else tr(
                    "ptxas reads {array} with {count} {opcode} per k-tile (the source's {repeat} "
                    "accesses), {wavefronts} in all."
                )
            )
            w = summary.wavefronts
        return text.format(
            array=rs.site.array,
            count=summary.count,
            opcode=summary.opcode,
            repeat=rs.repeat,
            wavefronts=wavefront_count(w),
        )

    # -- padding: what it changes, derived from the model ------------------------------------
    @staticmethod
    def element_name(config, byte: int) -> str:
        name = cell_name(config, byte)
        return name if name is not None else f"byte {byte}"

    def padding_text(self) -> str:
        """What the trace's shared layout (its description's layout parameters: padding, a
        swizzle) changes for this warp and k-tile against the plain layout (with the plain
        layout: against the first other one the kernel allows), site by site, from the model."""
        from matviz.core.registry import get_kernel

        trace = self.session.trace
        if self.key is None:
            return ""
        kernel = get_kernel(trace.kernel)
        pair = layout_pair(kernel, dict(trace.params))
        if pair is None:
            return ""
        base_params, padded_params = pair
        try:
            before = kernel.configure(base_params, *trace.shape, check=False)
            after = kernel.configure(padded_params, *trace.shape, check=False)
        except Exception:  # noqa: BLE001 - a configuration the description refuses: say nothing
            return ""
        swizzled = any(p.layout == "swizzle" and padded_params[p.name] for p in kernel.params)
        padded = next(
            (padded_params[p.name] for p in kernel.params if p.layout == "pad"), 0
        )
        block, warp, ktile = self.key
        b = trace.blocks[block]
        cache_key = (id(trace), tuple(padded_params.items()), self.key)
        if self._changes[0] != cache_key:  # playback redraws texts often: compare once per key
            where = (int(b["bx"]), int(b["by"]))
            self._changes = (cache_key, ins.compare(before, after, warp, where, ktile))
        changes = self._changes[1]
        if swizzled:
            lines = [
                tr("What the swizzle ({after}) changes against {before} (this warp, per k-tile):")
                .format(after=layout_label(kernel, padded_params),
                        before=layout_label(kernel, base_params))
            ] + [arr.swizzle_text for arr in after.shared if arr.swizzle_text]  # fmt: skip
        else:
            lines = [
                tr("What PAD {p} changes against PAD 0 (this warp, per k-tile):").format(p=padded)
            ]
        for ch in changes:
            if not ch.changed:
                continue
            old, new = ch.before, ch.after
            parts = []
            if (old.opcode, old.count) != (new.opcode, new.count):
                part = tr("{site}: {n0} {op0} → {n1} {op1}").format(
                    site=new.site, n0=old.count, op0=old.opcode, n1=new.count, op1=new.opcode
                )
                if new.width < old.width and ch.pitch_bytes % old.width:
                    part += " " + tr(
                        "(a row of {array} is {pitch} bytes, not a multiple of {width}: ptxas "
                        "can no longer merge the loads of a row)"
                    ).format(array=new.array, pitch=ch.pitch_bytes, width=old.width)
                parts.append(part)
            if old.degree == new.degree and old.wavefronts != new.wavefronts:
                parts.append(
                    tr("{site}: {w0} → {w1} wavefronts").format(
                        site=new.site, w0=old.wavefronts, w1=new.wavefronts
                    )
                )
            elif old.degree != new.degree:
                parts.append(
                    tr("{site}: {d0}-way → {d1}-way, {w0} → {w1} wavefronts").format(
                        site=new.site,
                        d0=old.degree,
                        d1=new.degree,
                        w0=old.wavefronts,
                        w1=new.wavefronts,
                    )  # fmt: skip
                )
            if ch.pair is not None:
                pair = ch.pair
                words = abs(pair.bytes[1] - pair.bytes[0]) // banks.BANK_BYTES
                causes = CONFLICT_CAUSES["swizzle" if swizzled else "pad"]
                cause = tr(causes[0] if new.degree > old.degree else causes[1])
                parts.append(
                    cause
                    + " "
                    + tr(
                        "lanes {a} and {b} access {ea} and {eb}, {d} words apart "
                        "({m} × 32): both in bank {bank}."
                    ).format(
                        a=pair.lanes[0],
                        b=pair.lanes[1],
                        ea=self.element_name(after, pair.bytes[0]),
                        eb=self.element_name(after, pair.bytes[1]),
                        d=words,
                        m=words // banks.N_BANKS,
                        bank=pair.bank,
                    )
                )
            lines.append("; ".join(parts))
        olds = [ch.before for ch in changes]
        news = [ch.after for ch in changes]
        lines.append(
            tr(
                "In all: {i0} → {i1} shared-memory instructions, {w0} → {w1} wavefronts per "
                "warp and k-tile."
            ).format(
                i0=sum(x.count for x in olds),
                i1=sum(x.count for x in news),
                w0=sum(x.wavefronts for x in olds),
                w1=sum(x.wavefronts for x in news),
            )
        )
        g0 = measured_gflops(trace.kernel, base_params)
        g1 = measured_gflops(trace.kernel, padded_params)
        if g0 and g1:
            measured = tr(
                "Measured on the H200 at 4096³: {g0:.0f} → {g1:.0f} GFLOP/s ({pct:+.0f}%)."
            )
            lines.append(measured.format(g0=g0, g1=g1, pct=100.0 * (g1 / g0 - 1.0)))
        return "<br>".join(lines)

    def sass_text(self) -> str:
        """What ptxas emitted per warp and k-tile (the bundled sm_90 table) against the
        instructions the model merges the description's accesses into."""
        from matviz.core.registry import get_kernel

        trace = self.session.trace
        kernel = get_kernel(trace.kernel)
        emitted = sass_table.emitted(kernel.stem, kernel.labels(dict(trace.params)))
        if emitted is None or not self.instrs:
            return ""
        model: dict[str, int] = {}
        for instr in self.instrs:
            model[instr.opcode] = model.get(instr.opcode, 0) + 1

        def listing(counts: dict[str, int]) -> str:
            return " + ".join(f"{n} {op}" for op, n in sorted(counts.items(), key=_op_order))

        if emitted == model:  # the instruction list above is what ptxas emitted
            return ""
        text = tr("ptxas (sm_90) emits per warp and k-tile: {emitted}.").format(
            emitted=listing(emitted)
        )
        return (
            text
            + " "
            + tr(
                "The model merges the description's accesses into {model}; ptxas issues "
                "{extra} more, and ncu counts ptxas's instructions."
            ).format(model=listing(model), extra=sum(emitted.values()) - sum(model.values()))
        )

    def store_note(self) -> str:
        """(e): why ncu counts more store wavefronts than the banks explain, as measured."""
        lo, hi = store_fills.excess_range()
        return tr(
            "Measured with ncu on the H200: shared stores count {lo:.0f}–{hi:.0f}% more "
            "wavefronts than their bank conflicts explain. The extra ones are L1 fills: the "
            "tile's global loads bring their lines into L1, whose data banks shared memory "
            "shares. With the loads cached in L2 only (__ldcg), ncu counts exactly this "
            "model's wavefronts."
        ).format(lo=100 * lo, hi=100 * hi)

    def copy_note(self) -> str:
        """Where ncu counted other bank conflicts for this kernel's cp.async stores than the
        model, as measured (the bundled ncu table's rows): this configuration's own row first,
        else the kernel's rows where the model finds none."""
        trace = self.session.trace
        kernel = trace.config.kernel
        why = tr(
            "Its data is written to shared memory as it arrives from L2, which the model does "
            "not follow."
        )
        own = store_fills.copy_conflicts_of(kernel, dict(trace.params))
        if own is not None:
            model, ncu = own
            if abs(model - ncu) < COPY_CONFLICTS_AGREE:
                return ""
            return join_sentences(
                tr(
                    "Measured with ncu on the H200 for this configuration: a cp.async store "
                    "(LDGSTS) counts {ncu:.1f} bank conflicts per instruction, where this model "
                    "counts {model:.1f}."
                ).format(ncu=ncu, model=model),
                why,
            )
        measured = [
            (m, n) for tag, m, n in store_fills.copy_conflicts() if tag.startswith(kernel.stem)
        ]
        free = [ncu for model, ncu in measured if model == 0]
        if not free or max(free) == 0:  # ncu found none where the model has none
            return ""
        return join_sentences(
            tr(
                "Measured with ncu on the H200: a cp.async store (LDGSTS) counts "
                "{lo:.1f}–{hi:.1f} bank conflicts per instruction even where this model finds "
                "none."
            ).format(lo=min(free), hi=max(free)),
            why,
            tr("The layouts still rank as the model ranks them (no padding or swizzle worst)."),
        )

    def _update_texts(self) -> None:
        instr = self.instruction()
        if not self.has_probe() or instr is None:
            self.note.setText("")
            return
        conflict = self.conflict_degree > 1
        colour = "#c0392b" if conflict else "#1e8449"
        degree = (
            tr("{n}-way bank conflict").format(n=self.conflict_degree)
            if conflict
            else tr("no bank conflict (1-way)")
        )
        source = (
            tr("recorded on the GPU (level-3 probe)")
            if self.source == "probe"
            else tr("model (from the kernel description)")
        )
        probe = self._probe_key()
        if self.source == "model" and probe is not None and not self.session.trace.is_simulated:
            b = self.session.trace.blocks[probe[0]]
            source += " " + tr(
                "(the GPU probe recorded block ({bx}, {by}), warp {warp}, {kt}: select them to "
                "see the measurement)"
            ).format(
                bx=int(b["bx"]),
                by=int(b["by"]),
                warp=probe[1],
                kt=palette.ktile_text(probe[2], self.session.trace.n_tiles),
            )
        covers = tr("{opcode}: {width} bytes per lane, {site} {ks}.").format(
            opcode=instr.opcode, width=instr.width, site=instr.site, ks=instr.ks_text()
        )
        broadcast = ""
        if instr.width > banks.BANK_BYTES and bool(banks.warp_broadcast(instr.offsets)):
            broadcast = " " + tr(
                "Every lane reads one address (a warp-wide broadcast): ncu measured {wavefronts} "
                "for it on the H200."
            ).format(wavefronts=wavefront_count(self.wavefronts))
        self.summary.setText(
            f"<span style='font-size:13pt; color:{colour}'><b>"
            + degree
            + " · "
            + tr("wavefronts: {w} (ideal {ideal})").format(
                w=self.wavefronts, ideal=self.ideal_wavefronts
            )
            + "</b></span><br><b>"
            + self.site_sentence(instr)
            + "</b> "
            + covers
            + broadcast
            + "<br><b>"
            + tr("Source: {source}.").format(source=source)
            + "</b> "
            + tr(
                "Lanes on the same word share it (broadcast); each further word in a bank "
                "costs one more pass."
            )
        )
        padding = self.padding_text()
        store = instr.kind == "store"  # the L1-fill excess concerns stores only
        measured = self.copy_note() if instr.async_copy else self.store_note() if store else ""
        notes = [padding, self.sass_text(), measured]
        self.note.setText("<br>".join(n for n in notes if n))

    def _set_title(self) -> None:
        """The block, warp and k-tile shown, the configuration and the source."""
        trace = self.session.trace
        block, warp, ktile = self.key or self._current_key()
        b = trace.blocks[block]
        self.title.setText(
            tr(
                "Shared-memory banks hit by one warp access: block ({bx}, {by}), warp {warp}, "
                "{kt}"
            ).format(
                bx=int(b["bx"]),
                by=int(b["by"]),
                warp=warp,
                kt=palette.ktile_text(ktile, trace.n_tiles),
            )
            + f"<br>{palette.config_text(trace)} · "
            + palette.source_html(trace, self.session.source_label)
        )

    def retranslate(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.placeholder.setText(tr("No trace loaded"))
        elif not self.has_probe() and trace.config.uses_shared:
            # shared memory that no lane addresses: the copy engine writes it, wgmma reads it
            config = trace.config
            swizzled = [a.name for a in config.shared if a.swizzle_text]
            self.placeholder.setText(
                tr(
                    "No lane of the {kernel} kernel reads or writes shared memory: the copy "
                    "engine (TMA) writes its tiles ({arrays}) and the Tensor Cores read them "
                    "through matrix descriptors, so there are no warp accesses whose banks to "
                    "show. The swizzle ({swizzled}) places each row's 16-byte chunks for those "
                    "reads, as padding does for lane loads; the Tiles view shows where they lie."
                ).format(
                    kernel=trace.kernel,
                    arrays=", ".join(a.name for a in config.shared),
                    swizzled=", ".join(swizzled) or "–",
                )
            )
        elif not self.has_probe():
            self.placeholder.setText(
                tr(
                    "The {kernel} kernel uses no shared memory, so there are no bank conflicts "
                    "to show."
                ).format(kernel=trace.kernel)
            )
        else:
            self._set_title()
            self.site_label.setText(tr("Instruction (as ptxas emits it):"))
            self.sites.setToolTip(
                tr(
                    "the shared-memory instructions of this warp in one k-tile, in program "
                    "order: ptxas merges loads of consecutive words into LDS.64 / LDS.128"
                )
            )
            self.warp_label.setText(tr("warp"))
            self.warp_box.setToolTip(tr("the warp of the selected block whose accesses are shown"))
            for row in range(self.sites.count()):
                self.sites.setItemText(row, self.site_text(row))
            item = self.plot.getPlotItem()
            palette.set_label(
                item, "bottom", tr("shared-memory bank (4-byte words, word index mod 32)")
            )
            palette.set_label(item, "left", tr("distinct words in the bank (passes)"))
            self._update_texts()


def wavefront_count(n: int) -> str:
    """'1 wavefront', '4 wavefronts' (the screen read '1 wavefronts each')."""
    return (tr("{n} wavefront") if n == 1 else tr("{n} wavefronts")).format(n=n)


def layout_pair(kernel, params: dict) -> tuple[dict, dict] | None:
    """(plain, laid out): ``params`` with every layout parameter at 0, and ``params`` itself;
    with a plain layout, the first other layout the kernel allows (PAD 1 before PAD 2).
    None where the kernel has no layout parameter or no other layout is allowed."""
    layout = [p for p in kernel.params if p.layout and p.name in params]
    if not layout:
        return None
    plain = {**params, **{p.name: 0 for p in layout}}
    if any(params[p.name] for p in layout):
        return plain, params
    for p in layout:
        for value in p.values:
            if not value:
                continue
            try:
                other = kernel.resolve_params({**params, p.name: value})
            except MatvizError:
                continue
            return plain, other
    return None


def layout_label(kernel, params: dict) -> str:
    """'X1' or 'P0 X0': the layout parameters' short labels."""
    return " ".join(p.short(params[p.name]) for p in kernel.params if p.layout)


def cell_name(config, byte: int) -> str | None:
    """'As[1][3]': the element a shared byte offset holds, or None outside every array; in a
    swizzled array the element's own column, and where it is stored ('As[5][0] at column 16')."""
    for arr in config.shared:
        local = byte - config.array_bases[arr.name]
        if 0 <= local < arr.nbytes:
            row, col = divmod(local // arr.elem_bytes, arr.stride)
            element = int(arr.stored_col(row, col)) if col < arr.cols else col
            name = f"{arr.name}[{row}][{element}]"
            return name if element == col else tr("{element} at column {col}").format(
                element=name, col=col
            )
    return None
