"""The embeddable search widget (/widget.js, /widget.css) and the demo homepage (/): see
widget.blueprint and docs/design/widget.md."""
from widget.blueprint import widget_bp

__all__ = ["widget_bp"]
