"""The chat routes: one Exchange per request, the order of its stages readable on one screen."""
