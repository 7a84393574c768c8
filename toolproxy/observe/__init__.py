"""What the proxy shows about itself: transform records, the SQLite transform log, Prometheus metrics."""
