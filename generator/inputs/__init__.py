"""Step 1, load & resolve: hardware and profile YAML -> immutable Facts and a resolved Profile.

The only package that parses YAML and validates with pydantic; `load.load_inputs` is its entry.
"""
