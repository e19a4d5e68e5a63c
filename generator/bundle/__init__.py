"""Step 5, write (and its inverse, read): the bundle directory on disk.

`write` swaps a rendered bundle into place atomically; `read` loads one back, checking it against
its manifest. Neither knows the rules or the templates.
"""
