"""The OpenAI wire format, pure: JSON with explicit limits, SSE framing, backend-only field cleaning."""
