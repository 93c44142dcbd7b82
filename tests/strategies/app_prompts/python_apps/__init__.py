"""The apps written in Python, one module each: their templates copied verbatim, their join mirrored or run (the
frameworks they are built on run where installed). Each imports `..corpus`, `..shape` and `..templates` only."""
