"""The transports: how a Client reaches a server (stdio, Streamable HTTP, HTTP+SSE, direct).

A package (not a namespace directory) so that the API reference tools can read it.
"""
