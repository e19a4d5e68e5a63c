"""The strict YAML reader: what it accepts and how it refuses hostile files."""

from __future__ import annotations

import pytest

from generator.errors import InputError
from generator.inputs.yamlio import MAX_INPUT_BYTES, read_yaml_file

BAD_FILES = [
    ("duplicate.yaml", "a: 1\na: 2\n", "line 2", "duplicate key 'a'"),
    ("alias.yaml", "a: &x [1, 2]\nb: *x\n", "line 1", "aliases"),
    ("laughs.yaml", 'a: &a ["lol","lol"]\nb: &b [*a,*a]\nc: &c [*b,*b]\n', "line 1", "aliases"),
    ("scalar-alias.yaml", "a: &x 1\nb: *x\n", "line 1", "aliases"),
    ("merge-key.yaml", "base: &b {x: 1}\nother:\n  <<: *b\n", "line 3", "invalid YAML"),
    ("tabs.yaml", "cpu:\n\tsockets: 2\n", "line 2", "invalid YAML"),
    ("list.yaml", "- 1\n- 2\n", "", "expected a YAML mapping at the top level, got a list"),
    ("empty.yaml", "", "", "got empty"),
    ("scalar.yaml", "hello\n", "", "got a str"),
    ("python.yaml", "a: !!python/object:os.system {}\n", "line 1", "invalid YAML"),
]


@pytest.mark.parametrize("name,text,where,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_yaml_is_one_clear_problem(write, name, text, where, message):
    path = write(name, text)
    with pytest.raises(InputError) as caught:
        read_yaml_file(path)
    [problem] = caught.value.problems
    assert problem.source == str(path)
    assert problem.path.startswith(where)
    assert message in problem.message


def test_binary_garbage_is_refused(write):
    path = write("garbage.yaml", b"\x7fELF\x00\x01\x02\xff\xfe")
    with pytest.raises(InputError, match="binary data"):
        read_yaml_file(path)


def test_invalid_utf8_is_refused(write):
    path = write("latin1.yaml", "name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        read_yaml_file(path)


def test_oversized_file_is_refused_before_parsing(write):
    path = write("big.yaml", "a: " + "x" * MAX_INPUT_BYTES + "\n")
    with pytest.raises(InputError, match="larger than"):
        read_yaml_file(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_yaml_file(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="is a directory"):
        read_yaml_file(tmp_path)


def test_plain_mapping_loads(write):
    path = write("ok.yaml", "a: 1\nb: [x, y]\nc: {d: true}\n")
    assert read_yaml_file(path) == {"a": 1, "b": ["x", "y"], "c": {"d": True}}
