"""One room per wire protocol a client speaks: each decodes its requests into the core's chat request and
encodes the core's answers, streams and errors in its own shape (transform/turn.py is what they encode)."""
