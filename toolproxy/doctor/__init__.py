"""`toolproxy doctor`: will tool calling work with this model on this server, and how to configure it."""
