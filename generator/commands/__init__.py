"""The verbs of `gen`: each one a recipe of the steps below it (cli.py only parses options)."""
