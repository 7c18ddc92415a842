"""Routing: decide each question's path (router) and rewrite it for retrieval (transforms)."""
