"""Step 3, plan: the rules' settings -> one checked, ordered Plan (`build.build_plan`).

Conflicts, profile overrides, kernel availability and every check of a setting's grammar and of
the plan as a whole happen here, once.
"""
