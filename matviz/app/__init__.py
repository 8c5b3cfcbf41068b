"""The Qt desktop app. Only this package imports Qt; it reads the session and trace model."""
