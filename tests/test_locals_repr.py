"""The reprs `dump --locals` makes from what the sampler read of a variable (record/locals.py):
each kind, the cut ones, and values whose bytes are not what their kind needs."""

from __future__ import annotations

import struct

from leadline.record.locals import CUT, VALUE_KINDS, local_reprs, value_repr

K = {name: i for i, name in enumerate(VALUE_KINDS)}


def test_each_kind() -> None:
    assert value_repr(K["none"], "NoneType", b"") == "None"
    assert value_repr(K["bool"], "bool", b"\x01") == "True"
    assert value_repr(K["bool"], "bool", b"\x00") == "False"
    assert value_repr(K["int"], "int", b"-12345678901234567890") == "-12345678901234567890"
    assert value_repr(K["bigint"], "int", struct.pack("<Q", 210)) == "<int of 210 bits>"
    assert value_repr(K["float"], "float", struct.pack("<d", 0.1)) == "0.1"
    assert value_repr(K["float"], "float", struct.pack("<d", float("inf"))) == "inf"
    assert value_repr(K["str"], "str", b"it's\n") == '"it\'s\\n"'
    assert value_repr(K["bytes"], "bytes", b"\x00a") == "b'\\x00a'"
    assert value_repr(K["sized"], "list", struct.pack("<q", 3)) == "<list of 3 items>"
    assert value_repr(K["sized"], "OrderedDict", struct.pack("<q", 1)) == "<OrderedDict of 1 item>"
    assert value_repr(K["sized"], "tuple", struct.pack("<q", 0)) == "()"
    assert value_repr(K["sized"], "dict", struct.pack("<q", 0)) == "{}"
    assert value_repr(K["object"], "Session", struct.pack("<Q", 0x7F00)) == (
        "<Session object at 0x7f00>"
    )


def test_cut_values_say_so() -> None:
    assert value_repr(K["str"] | CUT, "str", b"x" * 200) == repr("x" * 200) + "…"
    assert value_repr(K["bytes"] | CUT, "bytes", b"y" * 100) == repr(b"y" * 100) + "…"
    # A repr that escapes grows beyond the text: bounded all the same.
    long = value_repr(K["str"], "str", b"\x01" * 200)
    assert len(long) == 401 and long.endswith("…")


def test_values_that_are_not_what_their_kind_needs() -> None:
    # Bytes of the wrong length (never written so, but END is data): the type alone.
    assert value_repr(K["float"], "float", b"\x00") == "<float>"
    assert value_repr(K["sized"], "list", b"") == "<list>"
    assert value_repr(K["object"], "X", b"1234") == "<X>"
    # An unknown kind (a newer writer's) is shown as an object; text not UTF-8 is replaced.
    assert value_repr(99, "Y", struct.pack("<Q", 16)) == "<Y object at 0x10>"
    assert value_repr(K["str"], "str", b"\xff") == repr("\ufffd")


def test_local_reprs_decode_names() -> None:
    out = local_reprs([(3, 1, K["int"], b"n\xc3\xa9", b"int", b"7")])
    assert out == [{"serial": 3, "frame": 1, "name": "né", "type": "int", "repr": "7"}]
