"""Tool-call dialects: one module per text format models write calls in, behind the interface in `base.py`."""
