"""The HTTP edge, where a client's bytes arrive: the server (uvicorn as released) and the bounds kept around its
stock protocol (the connection limit, the head's deadline and size, unread answers), admission (concurrency and
the memory budget's leases), canonical paths and the reading of a client's JSON body.

It may import the proxy's shared modules (errors, settings, budget, json_text, the request record) and nothing of
routes/, upstream/ or shadow/: a route uses the edge, never the other way round."""
