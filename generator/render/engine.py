"""The Jinja environment the templates render in, its filters and bytecode cache, and the fixed
scripts, which are copied byte for byte and never rendered."""

from __future__ import annotations

import contextlib
import functools
import json
import pickle
from pathlib import Path
from typing import Any

import jinja2

from generator.cache import read_entry
from generator.errors import GenerationError
from generator.paths import cache_dir, make_cache_dir, templates_dir, write_cache_file
from generator.render.datafile import data_text
from generator.render.formats import (
    comment_text,
    explain_row,
    kernel_arg_text,
    md_cell,
    reason_comment,
    sh_quote,
    tmpfiles_field,
)
from generator.render.outputs import OUTPUTS, Output


class TemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's own bytecode cache, kept in the package like Python's __pycache__, whose entries
    are read and written as every cache entry of goldtune's (generator/cache.py): no link
    followed, only what a trusted user could have written (marshal's code runs when the
    template does), replaced atomically and readable by every user (root often fills the
    cache). Jinja checks each entry against the template's source, so a stale entry is
    recompiled; a read-only install compiles in memory every time."""

    def entry_path(self, bucket: jinja2.bccache.Bucket) -> Path:
        return Path(self.directory) / (self.pattern % bucket.key)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = read_entry(self.entry_path(bucket))
        if data is None:
            return
        try:
            bucket.bytecode_from_string(data)  # Jinja's format: a foreign or stale entry resets
        except (EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            write_cache_file(self.entry_path(bucket), bucket.bytecode_to_string())


def _template_cache() -> jinja2.BytecodeCache | None:
    # Inside the package (like __pycache__), not in templates/, which the wheel copies verbatim.
    directory = cache_dir("__jinja_cache__")
    if not make_cache_dir(directory):
        return None
    return TemplateCache(str(directory), pattern="%s.cache")


@functools.lru_cache(maxsize=1)
def make_environment() -> jinja2.Environment:
    """One environment per process: templates are compiled once, then reused for every bundle."""
    env = jinja2.Environment(
        bytecode_cache=_template_cache(),
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        # config files and shell data, not HTML: values are checked by their grammar instead
        autoescape=False,  # noqa: S701
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # a template loaded once serves the whole run: all bundles of one matrix come from the
        # same templates, so their files are not checked for changes at every use
        auto_reload=False,
    )
    env.filters.update(
        comment=comment_text,
        reason=reason_comment,
        sh=sh_quote,
        tmpfiles=tmpfiles_field,
        md=md_cell,
        explain_row=explain_row,
        data_lines=data_text,
        karg=kernel_arg_text,
        yaml_str=yaml_string,
    )
    return env


def preload_templates() -> None:
    """Compile every template now (before forking workers that then share them)."""
    env = make_environment()
    for output in OUTPUTS:
        if not output.verbatim:
            env.get_template(output.template)


def yaml_string(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(text, ensure_ascii=False)


@functools.cache
def fixed_script(name: str) -> bytes:
    """A fixed script, byte for byte as the repository (and the wheel) ships it."""
    return (templates_dir() / name).read_bytes()


# One str a run, not one a bundle (the user-data's library form of install-lib.sh).
@functools.cache
def fixed_script_text(name: str) -> str:
    return fixed_script(name).decode("utf-8")


def render_text(env: jinja2.Environment, output: Output, context: dict[str, Any]) -> bytes:
    if output.verbatim:
        return fixed_script(output.template)
    try:
        text = env.get_template(output.template).render(context)
    except jinja2.TemplateError as error:
        raise GenerationError(f"template {output.template}: {error}") from error
    return text.encode("utf-8")
