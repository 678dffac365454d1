"""Config files as Kafka Connect's and RocketMQ Connect's users keep them (worker/config_files.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.worker.config_files import LoadedConfig, load_config, parse_properties, read_config_file
from sluice.worker.errors import UsageError

KAFKA_STANDALONE = r"""# Kafka's config/connect-file-source.properties
name=local-file-source
connector.class=FileStreamSource
tasks.max=1
file=test.txt
topic=connect-test
"""

# (file name, content, expected name, expected config, expected initial state)
FILES = [
    ("kafka.properties", KAFKA_STANDALONE, "local-file-source",
     {"connector.class": "FileStreamSource", "tasks.max": "1", "file": "test.txt",
      "topic": "connect-test"}, ""),
    ("post.json",
     '{"name": "src", "config": {"connector.class": "file-source", "tasks.max": 2, "x.enabled": true}}',
     "src", {"connector.class": "file-source", "tasks.max": "2", "x.enabled": "true"}, ""),
    ("flat.json", '{"connector.class": "file-sink", "topics": "a", "name": "snk"}',
     "snk", {"connector.class": "file-sink", "topics": "a"}, ""),
    ("rocketmq.json",
     '{"connector.class": "org.apache.rocketmq.connect.file.FileSourceConnector", "filename": "/tmp/a",'
     ' "connect.topicname": "t", "max.tasks": "1"}',
     "", {"connector.class": "org.apache.rocketmq.connect.file.FileSourceConnector", "filename": "/tmp/a",
          "connect.topicname": "t", "max.tasks": "1"}, ""),
    ("paused.json", '{"name": "p", "config": {"connector.class": "dummy-source"}, "initial_state": "paused"}',
     "p", {"connector.class": "dummy-source"}, "PAUSED"),
    ("kafka-get.json", '{"name": "g", "config": {"name": "g", "topic": "t"}, "tasks": [], "type": "source"}',
     "g", {"topic": "t"}, ""),
    ("c.yaml", "name: y\nconfig:\n  connector.class: file-sink\n  topics: [a, b]\n  tasks.max: 3\n",
     "y", {"connector.class": "file-sink", "topics": "a,b", "tasks.max": "3"}, ""),
    ("flat.yml", "connector.class: dummy-source\ntopic: t\nratio: 0.5\n", "",
     {"connector.class": "dummy-source", "topic": "t", "ratio": "0.5"}, ""),
    ("sniffed.conf", "connector.class=dummy-source\n", "", {"connector.class": "dummy-source"}, ""),
    ("noext", '{"topic": "t"}', "", {"topic": "t"}, ""),
    ("noext-yaml", "topic: t\n", "", {"topic": "t"}, ""),
    ("noext-props", "topic=t\nname = n\n", "n", {"topic": "t"}, ""),
]  # fmt: skip


@pytest.mark.parametrize(("filename", "content", "name", "config", "state"), FILES, ids=[f[0] for f in FILES])
def test_config_files(
    tmp_path: Path, filename: str, content: str, name: str, config: dict[str, str], state: str
) -> None:
    path = tmp_path / filename
    path.write_text(content)
    assert read_config_file(str(path)) == LoadedConfig(name, config, state)


# (properties text, expected map): java.util.Properties.load's rules.
PROPERTIES = [
    ("# comment\n! also a comment\n\n   \na=1", {"a": "1"}),
    ("a = 1\nb:2\nc 3\nd\t=\t4", {"a": "1", "b": "2", "c": "3", "d": "4"}),
    ("a==b\nc = =d\ne:=f", {"a": "=b", "c": "=d", "e": "=f"}),
    ("key\\ with\\ spaces = v", {"key with spaces": "v"}),
    ("k\\=eq=v\\:colon", {"k=eq": "v:colon"}),
    ("tabs=a\\tb\\nc", {"tabs": "a\tb\nc"}),
    ("u=caf\\u00e9", {"u": "café"}),
    ("multi = one, \\\n    two, \\\n    three", {"multi": "one, two, three"}),
    ("path=C:\\\\data\\\\in.txt", {"path": "C:\\data\\in.txt"}),
    ("even=ends with backslash\\\\\nnext=x", {"even": "ends with backslash\\", "next": "x"}),
    ("last=dangling\\", {"last": "dangling"}),
    ("empty=\nbare", {"empty": "", "bare": ""}),
    ("dup=1\ndup=2", {"dup": "2"}),
    ("  indented.key = v  ", {"indented.key": "v  "}),
    ("url=jdbc:postgresql://h:5432/db?a=b#frag", {"url": "jdbc:postgresql://h:5432/db?a=b#frag"}),
    # Comments: only as a line's first non-blank; never continued; a continued line's "#" is data.
    ("  \t# indented comment\n\f! after a form feed\na=1", {"a": "1"}),
    ("# comment ending in a backslash \\\na=1", {"a": "1"}),
    ("a=1 \\\n  # not a comment", {"a": "1 # not a comment"}),
    ("a=1\n#b=2\n!c=3", {"a": "1"}),
    # ":" separators: with blanks around, the first unescaped one only, escaped in a key.
    ("a : 1\nb\t:\t2\nc :=3", {"a": "1", "b": "2", "c": "=3"}),
    ("time:12:30", {"time": "12:30"}),
    ("k\\:x:v\nhost\\:port = h:1", {"k:x": "v", "host:port": "h:1"}),
    ("a:\nb :", {"a": "", "b": ""}),
    # Continuations: in a key, over CR LF and CR, several in a row, onto a blank line.
    ("ke\\\n   y = v", {"key": "v"}),
    ("a=1\\\r\n  2\r\nb=3\\\r  4", {"a": "12", "b": "34"}),
    ("list = a,\\\n\tb,\\\n\f c", {"list": "a,b,c"}),
    ("a=1\\\n\nb=2", {"a": "1", "b": "2"}),
    ("odd=x\\\\\\\n y", {"odd": "x\\y"}),
    # \uXXXX: either case, in keys, never a separator, a leading blank kept, surrogate pairs joined.
    ("\\u0041\\u00E9=\\u00c9t\\u00e9", {"A\u00e9": "\u00c9t\u00e9"}),
    ("a\\u003db\\u003a=c", {"a=b:": "c"}),
    ("pad=\\u0020 x", {"pad": "  x"}),
    ("emoji=\\uD83D\\uDE00", {"emoji": "\U0001f600"}),
    # Lines end at LF, CR LF or CR only (as in Java): \f is a blank, \v, NEL, LS are data.
    ("a\f=\f1\rb=2", {"a": "1", "b": "2"}),
    ("a=x\x85y\u2028z\x0bw", {"a": "x\x85y\u2028z\x0bw"}),
]


@pytest.mark.parametrize(("text", "expected"), PROPERTIES)
def test_properties_like_java(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("b=1\na=2\nc=3", [("b", "1"), ("a", "2"), ("c", "3")]),
        ("b=1\na=2\nb=3", [("b", "3"), ("a", "2")]),  # a later duplicate wins, in the first's place
    ],
)
def test_properties_keep_the_file_order(text: str, items: list[tuple[str, str]]) -> None:
    assert list(parse_properties(text).items()) == items


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("u=\\u00zz", 1),
        ("\\uzz=v", 1),
        ("a=1\n# c\n\nb=x\\\n  y\nu=\\u12", 6),
        ("a=1\nlong=x\\\n  \\u00zz", 2),  # the entry's first line
        ("a=1\r\nb=2\rc=\\u", 3),
    ],
)
def test_malformed_unicode_escape_names_the_line(text: str, line: int) -> None:
    with pytest.raises(ValueError, match=rf"^line {line}: .*\\u"):
        parse_properties(text)


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ([], {"connector.class": "file-source", "tasks.max": "2", "file": "/in"}),
        (["tasks.max=4"], {"connector.class": "file-source", "tasks.max": "4", "file": "/in"}),
        (["tasks.max=4", "tasks.max=5", "new=a=b"],
         {"connector.class": "file-source", "tasks.max": "5", "file": "/in", "new": "a=b"}),
        (["file="], {"connector.class": "file-source", "tasks.max": "2", "file": ""}),
    ],
)  # fmt: skip
def test_set_overrides_the_file_in_order(tmp_path: Path, sets: list[str], expected: dict[str, str]) -> None:
    path = tmp_path / "c.properties"
    path.write_text("name=n\nconnector.class=file-source\ntasks.max=2\nfile=/in\n")
    loaded = load_config(str(path), sets)
    assert loaded.config == expected and loaded.name == "n"
    assert load_config(None, ["a=1"]) == LoadedConfig("", {"a": "1"}, "")


@pytest.mark.parametrize(
    ("filename", "content", "sets", "message"),
    [
        (None, None, ["no-equals"], "KEY=VALUE"),
        (None, None, ["=value"], "KEY=VALUE"),
        ("c.json", "{oops", [], "not valid JSON"),
        ("c.json", "[1, 2]", [], "must hold a mapping"),
        ("c.json", '{"config": "x"}', [], "'config' must be a mapping"),
        ("c.json", '{"config": {"a": {"nested": 1}}}', [], "key 'a'"),
        ("c.json", '{"config": {"a": null}}', [], "got null"),
        ("c.json", '{"name": "a", "config": {"name": "b"}}', [], "both 'a' and 'b'"),
        ("c.json", '{"name": 5, "config": {}}', [], "'name' must be a string"),
        ("c.json", '{"config": {}, "initial_state": "SLEEPING"}', [], "initial_state"),
        ("c.yaml", "a: [unclosed", [], "not valid YAML"),
        ("c.yaml", "- a\n- b\n", [], "must hold a mapping"),
        ("c.properties", "u=\\u00zz", [], "line 1"),
        ("c.properties", "a=1\n# c\nb=x\\\n  y\nu=\\u00zz", [], "line 5"),
        ("missing.json", None, [], "cannot read config file"),
    ],
)
def test_bad_input_is_one_usage_error_naming_the_file(
    tmp_path: Path, filename: str | None, content: str | None, sets: list[str], message: str
) -> None:
    path = str(tmp_path / filename) if filename else None
    if path and content is not None:
        Path(path).write_text(content)
    with pytest.raises(UsageError, match=message) as err:
        load_config(path, sets)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    if path:
        assert path in str(err.value)


def test_latin1_properties_file_is_read(tmp_path: Path) -> None:
    """Properties.load(InputStream) reads ISO-8859-1; such files must not fail to decode."""
    path = tmp_path / "legacy.properties"
    path.write_bytes("topic=caf\xe9\n".encode("latin-1"))
    assert read_config_file(str(path)).config == {"topic": "café"}
