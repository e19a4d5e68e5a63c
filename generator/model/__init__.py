"""The records every step reads: settings, the plan, the setting kinds, the bundle's layout.

No pydantic, no YAML, no Jinja, no I/O: this package sits below all five steps.
"""
