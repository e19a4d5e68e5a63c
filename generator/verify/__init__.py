"""`gen verify`: is a bundle in effect on a machine, in a snapshot or in a mounted image?

Reads a bundle and one source; never imports the renderer or Jinja.
"""
