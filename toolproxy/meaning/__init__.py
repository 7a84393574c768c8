"""The pure core of meaning: extraction of calls from text, schema coercion and validation, JSON repair,
reasoning split, loop guard and access policy. No I/O; imports neither Flask, gevent nor requests."""
