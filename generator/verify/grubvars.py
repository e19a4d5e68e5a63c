"""GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT of an image, read as data, never executed.

grub-mkconfig sources ``/etc/default/grub`` and then ``/etc/default/grub.d/*.cfg`` with ``sh``.
Those files belong to the image, so ``gen verify --root`` must not run them: it parses the
plain-assignment subset of sh that such files use,

    NAME=word        export NAME=word        (several on one line, separated by ``;``)

where a word is made of unquoted text, '…', "…" with backslash escapes, and the expansions
``$NAME``, ``${NAME}``, ``${NAME:-w}``, ``${NAME-w}``, ``${NAME:+w}`` and ``${NAME+w}`` (the
``"${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT }arg"`` append of goldtune's
drop-in). Anything else that could change the two variables (a command substitution, an
assignment under ``if`` or in a function, ``.``/``source``/``eval``, bash's ``+=``, a variable no
file sets) is not guessed: the result says, with file and line, what it could not judge.

grub-mkconfig sources the files in its own shell, under ``set -e`` (Debian 12's
/usr/sbin/grub-mkconfig, lines 2 and 160-166): an ``exit`` or ``return``, or any command that
fails, ends the sourcing before goldtune's drop-in is read. So a line that runs a command is not
judged, whatever the command, except ``:``, ``true`` and ``echo`` with plain words; and so is
every line after one whose quote, ``$(…)``, here-document or backslash-newline continues past
its end where the parser stops reading it line by line (sh would read on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CMDLINE_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
# A statement that starts one of these makes what follows conditional or deferred.
_COMPOUND = re.compile(
    r"(if|then|else|elif|fi|for|while|until|do|done|case|esac|function)\b|[{}()]"
)
_EXPORT_ONLY = re.compile(r"export([ \t]+[A-Za-z_][A-Za-z0-9_]*)+[ \t]*(#.*)?$")
_WORD_END = " \t\n;&|<>()"
# A command that cannot end the sourcing or set a variable of grub-mkconfig's shell: plain words.
_HARMLESS = re.compile(r"(?::|true|echo)(?:[ \t][^;&|<>()$`'\"\\\n]*)?")
BACKTICKS = "a command substitution (`…`); goldtune does not run the image's code"


class Unjudged(Exception):  # noqa: N818 -- not an error: valid grub that is not evaluated
    """A construct the parser does not evaluate; the message says which."""


@dataclass
class GrubVars:
    """What the files set: a variable's value, or None when it is set in a way not evaluated."""

    values: dict[str, str | None] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)  # "path: line N: why", for the two variables

    def cmdline(self) -> str | None:
        """GRUB_CMDLINE_LINUX + _DEFAULT as grub-mkconfig joins them; None if not judged."""
        if self.unjudged:
            return None
        parts = [self.values.get(name) or "" for name in CMDLINE_VARS]
        return " ".join(parts)


class _Reader:
    """A cursor over one file's text, expanding words against ``values``."""

    def __init__(self, text: str, values: dict[str, str | None]) -> None:
        self.text = text
        self.pos = 0
        self.values = values
        self.unused = 0  # inside the word of a ${…} operator whose word is not used

    @property
    def line(self) -> int:
        return self.text.count("\n", 0, self.pos) + 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t") or self.text.startswith("\\\n", self.pos):
            self.pos += 2 if self.peek() == "\\" else 1

    def skip_to_line_end(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end

    def word(self, stop: str = _WORD_END) -> str:
        """One shell word from the cursor, expanded; stops at an unquoted character of ``stop``."""
        out: list[str] = []
        while self.pos < len(self.text) and self.peek() not in stop:
            char = self.peek()
            if char == "'":
                end = self.text.find("'", self.pos + 1)
                if end < 0:
                    raise Unjudged("an unterminated '…' string")
                out.append(self.text[self.pos + 1 : end])
                self.pos = end + 1
            elif char == '"':
                self.pos += 1
                out.append(self.double_quoted())
            elif char == "\\":
                out.append(self.text[self.pos + 1 : self.pos + 2].replace("\n", ""))
                self.pos += 2
            elif char == "$":
                out.append(self.expansion(quoted=False))
            elif char == "`":
                raise Unjudged(BACKTICKS)
            else:
                out.append(char)
                self.pos += 1
        return "".join(out)

    def double_quoted(self, stop: str = '"') -> str:
        out: list[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise Unjudged('an unterminated "…" string')
            if char in stop:
                self.pos += 1 if char == '"' else 0
                return "".join(out)
            if char == '"':
                raise Unjudged('quotes inside a "${…}" expansion')
            if char == "\\":
                following = self.text[self.pos + 1 : self.pos + 2]
                # inside "…" a backslash escapes only $ ` " \ and a newline
                kept = following if following in '$`"\\' else "\\" + following
                out.append("" if following == "\n" else kept)
                self.pos += 2
            elif char == "$":
                out.append(self.expansion(quoted=True))
            elif char == "`":
                raise Unjudged(BACKTICKS)
            else:
                out.append(char)
                self.pos += 1

    def lookup(self, name: str) -> str:
        if self.unused:
            return ""  # parsed for its end only: sh does not expand it either
        if name not in self.values and name in CMDLINE_VARS:
            return ""  # grub-mkconfig starts without them: only these files set them
        if name not in self.values:
            raise Unjudged(f"${name}, which no GRUB file sets (unknown at update-grub time)")
        value = self.values[name]
        if value is None:
            raise Unjudged(f"${name}, whose value is not judged")
        return value

    def expansion(self, quoted: bool) -> str:
        self.pos += 1  # the '$'
        if self.peek() == "(":
            raise Unjudged("a command substitution ($(…)); goldtune does not run the image's code")
        if self.peek() != "{":
            found = _NAME.match(self.text, self.pos)
            if not found:
                if self.peek() in ("", " ", "\t", "\n", '"'):
                    return "$"  # a lone '$' is literal
                raise Unjudged(f"the special parameter ${self.peek()}")
            self.pos = found.end()
            return self.lookup(found.group())
        return self.braced(quoted)

    def braced(self, quoted: bool) -> str:
        self.pos += 1  # the '{'
        found = _NAME.match(self.text, self.pos)
        if not found:
            raise Unjudged("a ${…} expansion that is not of a variable")
        name = found.group()
        self.pos = found.end()
        operators = (":-", ":+", "-", "+", "}")
        operator = next((op for op in operators if self.text.startswith(op, self.pos)), None)
        if operator is None:
            raise Unjudged(f"an expansion of ${{{name}…}} other than :- :+ - +")
        self.pos += len(operator)
        if operator == "}":
            return self.lookup(name)
        is_set = name in self.values
        value = self.lookup(name) if is_set else ""
        used = {":-": not value, "-": not is_set, ":+": bool(value), "+": is_set}[operator]
        self.unused += 0 if used else 1
        try:
            word = self.double_quoted(stop="}") if quoted else self.word(stop="}")
        finally:
            self.unused -= 0 if used else 1
        if self.peek() != "}":
            raise Unjudged(f"an unterminated ${{{name}…}}")
        self.pos += 1
        if operator in (":-", "-"):
            return word if used else value
        return word if used else ""


Assigned = tuple[str, str | None, str]  # (name, value or None, why it is not judged)


def closes_on_its_line(rest: str) -> bool:
    """Whether sh stops reading ``rest`` at the end of its line: no quote, backquote, ``$(``
    or ``(`` left open, no here-document, no backslash-newline. Errs towards False (the caller
    then judges nothing): quotes nested in substitutions are not followed."""
    if "<<" in rest:
        return False
    quote, backquoted, depth, index = "", False, 0, 0
    while index < len(rest):
        char = rest[index]
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            index += 1
            if index >= len(rest):
                return False  # a backslash-newline: the line goes on
        elif char == "#" and not quote and (index == 0 or rest[index - 1] in " \t;&|()"):
            break  # a comment, to the end of the line
        elif char in "'\"":
            quote = "" if quote == char else quote or char
        elif char == "`":
            backquoted = not backquoted
        elif rest.startswith("$(", index) or (char == "(" and not quote):
            depth += 1
        elif char == ")" and (not quote or depth):
            depth -= 1
        index += 1
    return not quote and not backquoted and depth == 0


def _line_rest(reader: _Reader) -> str:
    line_end = reader.text.find("\n", reader.pos)
    return reader.text[reader.pos :] if line_end < 0 else reader.text[reader.pos : line_end]


EVERY = "*"  # an Assigned name: what follows leaves both variables not judged


def _everything(why: str) -> list[Assigned]:
    return [(EVERY, None, why)]


def _statement(reader: _Reader, conditional: bool) -> tuple[list[Assigned], bool]:
    """The assignments of the statement at the cursor: (name, value or None, why not judged)."""
    reader.skip_blanks()
    rest = _line_rest(reader)
    if rest.startswith("#") or not rest.strip():
        reader.skip_to_line_end()  # sh ends a comment at the newline, backslash or not
        return [], conditional
    found = _ASSIGNMENT.match(reader.text, reader.pos)
    if found is None and _EXPORT_ONLY.match(rest):
        reader.skip_to_line_end()  # marks variables for export: their values do not change
        return [], conditional
    if found is None:
        reader.skip_to_line_end()
        if _HARMLESS.fullmatch(rest.rstrip()):
            return [], conditional
        command = rest.split(None, 1)[0][:20]
        why = (
            f"a command ({command}) that grub-mkconfig runs as it sources the file: under its "
            "set -e, exit, return or a failing command ends the sourcing, and shell code is "
            "not evaluated"
        )
        return _everything(why), conditional or bool(_COMPOUND.match(rest))
    name, append = found.group(1), found.group(2)
    reader.pos = found.end()
    touched: list[Assigned] = []
    try:
        if append:
            raise Unjudged("bash's += (grub-mkconfig's sh does not read it)")
        value: str | None = reader.word()
        why = "an assignment under if/for/case or in a function" if conditional else ""
    except Unjudged as error:
        value, why = None, str(error)
        if not closes_on_its_line(_line_rest(reader)):
            touched = _everything(f"{why}, continued past its line (sh reads on; this does not)")
        reader.skip_to_line_end()
    reader.skip_blanks()
    if reader.peek() not in ("", "\n", ";", "#"):
        value, why = None, why or "an assignment followed by a command or an operator"
        touched = _everything(f"{why}: the command runs under grub-mkconfig's set -e")
        reader.skip_to_line_end()
    return [(name, None if why else value, why), *touched], conditional


def parse_grub_files(files: list[tuple[str, str]]) -> GrubVars:
    """Evaluate ``files`` (path, text) in order, as grub-mkconfig sources them, without running."""
    result = GrubVars(files=[path for path, _ in files])
    for path, text in files:
        reader = _Reader(text, result.values)
        conditional = False
        while reader.pos < len(text):
            line = reader.line
            assignments, conditional = _statement(reader, conditional)
            for name, value, why in assignments:
                if name == EVERY:
                    result.values.update(dict.fromkeys(CMDLINE_VARS))
                    result.unjudged.append(f"{path}: line {line}: {why}")
                    continue
                result.values[name] = value
                if value is None and name in CMDLINE_VARS:
                    result.unjudged.append(f"{path}: line {line}: {name} is set by {why}")
            if reader.peek() in (";", "\n", "&", "|"):
                reader.pos += 1
    return result
