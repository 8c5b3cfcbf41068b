"""Exports that need no Qt: Perfetto / Chrome trace JSON, export options, frame writers
(GIF, MP4, PNG through imageio) and atomic output files.

Rendering the views into frames is Qt and lives in ``matviz.app.export_render``; an
import-linter contract keeps this package Qt-free, so ``matviz export --format perfetto`` and
``matviz sweep`` (``matviz.sweep``) run without PySide6.
"""
