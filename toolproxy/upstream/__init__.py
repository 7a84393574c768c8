"""The upstream server: the HTTP client (the only place that touches requests), the relay with heartbeats."""
