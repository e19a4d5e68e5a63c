"""Step 4, render: a Plan -> every file of the bundle in memory (`render.render_bundle`).

No checks of the plan happen here; the plan step has done them.
"""
