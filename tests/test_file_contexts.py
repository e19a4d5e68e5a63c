"""FILE_CONTEXTS (generator/render/contexts.py) gives a template the words it alone reads: each of
its keys must be a template of the outputs table, or those words never reach a file."""

from __future__ import annotations

from generator.render.contexts import FILE_CONTEXTS
from generator.render.outputs import OUTPUTS


def test_every_file_context_names_a_rendered_template() -> None:
    templates = {output.template for output in OUTPUTS}
    unknown = sorted(set(FILE_CONTEXTS) - templates)
    assert not unknown, (
        f"FILE_CONTEXTS names {unknown}, no template of generator/render/outputs.py's tables: "
        "rename the key in generator/render/contexts.py with the template"
    )
