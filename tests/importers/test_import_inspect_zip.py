"""The `.eval` member reader: the bytes and the errors of `ZipFile.read`, without its
per-member file object (evalops/importers/inspect.py, `_read_member`)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from evalops.importers.inspect import _read_member

SAMPLE = b'{"id": "A-1", "epoch": 1, "scores": {"s": {"value": "C"}}}' * 40


def archive(path: Path, compression: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as out:
        out.writestr("header.json", b"{}")
        out.writestr("samples/A-1_epoch_1.json", SAMPLE)
        out.writestr("samples/\u00e9t\u00e9_epoch_1.json", SAMPLE[::-1])  # a UTF-8 name
    return path


def member_offset(path: Path, name: str) -> int:
    """Where the member's compressed data starts in the file."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    data = path.read_bytes()
    name_len = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    return info.header_offset + 30 + name_len + extra_len


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_members_read_as_zipfile_reads_them(tmp_path: Path, compression: int) -> None:
    path = archive(tmp_path / "log.eval", compression)
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            assert _read_member(zf, name) == zf.read(name)
        # Read out of order and twice: each read seeks to its own member.
        names = zf.namelist()[::-1] * 2
        assert [_read_member(zf, n) for n in names] == [zf.read(n) for n in names]


def test_inspect_zstd_members_read_as_zipfile_reads_them(tmp_path: Path) -> None:
    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    method = getattr(zipfile, "ZIP_ZSTANDARD", 93)
    path = archive(tmp_path / "log.eval", method)
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("samples/A-1_epoch_1.json").compress_type == method
        for name in zf.namelist():
            assert _read_member(zf, name) == zf.read(name)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_damaged_member_is_an_error_not_other_bytes(tmp_path: Path, compression: int) -> None:
    path = archive(tmp_path / "log.eval", compression)
    start = member_offset(path, "samples/A-1_epoch_1.json")
    data = bytearray(path.read_bytes())
    data[start + 5] ^= 0x5A  # one byte: a stored member's CRC-32 fails, a deflated one's too
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf:
        with pytest.raises((zipfile.BadZipFile, OSError, ValueError)):
            zf.read("samples/A-1_epoch_1.json")
        with pytest.raises((zipfile.BadZipFile, OSError, ValueError)):
            _read_member(zf, "samples/A-1_epoch_1.json")
        assert _read_member(zf, "header.json") == b"{}"


def test_a_local_header_that_disagrees_is_left_to_zipfile(tmp_path: Path) -> None:
    path = archive(tmp_path / "log.eval", zipfile.ZIP_STORED)
    with zipfile.ZipFile(path) as zf:
        offset = zf.getinfo("samples/A-1_epoch_1.json").header_offset
    data = bytearray(path.read_bytes())
    data[offset + 30] = ord("X")  # the local header's copy of the name
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf, pytest.raises(zipfile.BadZipFile, match="differ"):
        _read_member(zf, "samples/A-1_epoch_1.json")


def test_a_truncated_archive_is_an_error(tmp_path: Path) -> None:
    path = archive(tmp_path / "log.eval", zipfile.ZIP_STORED)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("samples/A-1_epoch_1.json")
        # The directory was read; the member's data is then cut short on disk.
        with path.open("r+b") as stream:
            stream.truncate(member_offset(path, info.filename) + 10)
        with pytest.raises((zipfile.BadZipFile, OSError, EOFError)):
            _read_member(zf, info.filename)


def test_a_local_header_cut_short_is_an_error(tmp_path: Path) -> None:
    path = archive(tmp_path / "log.eval", zipfile.ZIP_STORED)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("samples/A-1_epoch_1.json")
        with path.open("r+b") as stream:
            stream.truncate(info.header_offset + 12)  # inside the member's local header
        with pytest.raises((zipfile.BadZipFile, OSError, EOFError)):
            zf.read(info.filename)
        with pytest.raises((zipfile.BadZipFile, OSError, EOFError)):
            _read_member(zf, info.filename)


def test_a_local_utf8_name_that_does_not_decode_is_refused_as_zipfile_refuses_it(
    tmp_path: Path,
) -> None:
    name = "samples/\u00e9t\u00e9_epoch_1.json"
    path = archive(tmp_path / "log.eval", zipfile.ZIP_STORED)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    assert info.flag_bits & 0x800  # the name is written as UTF-8
    data = bytearray(path.read_bytes())
    data[info.header_offset + 30 + len("samples/")] = 0xFF  # no longer UTF-8
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf:
        with pytest.raises(UnicodeDecodeError) as expected:
            zf.read(name)
        with pytest.raises(UnicodeDecodeError) as found:
            _read_member(zf, name)
    assert str(found.value) == str(expected.value)


def test_a_member_marked_encrypted_is_refused_as_zipfile_refuses_it(tmp_path: Path) -> None:
    name = "samples/A-1_epoch_1.json"
    path = archive(tmp_path / "log.eval", zipfile.ZIP_STORED)
    with zipfile.ZipFile(path) as zf:
        offset = zf.getinfo(name).header_offset
    data = bytearray(path.read_bytes())
    data[offset + 6] |= 0x1  # the local header's flags
    entry = data.index(b"PK\x01\x02")
    while data[entry + 46 : entry + 46 + len(name)] != name.encode():
        entry = data.index(b"PK\x01\x02", entry + 4)
    data[entry + 8] |= 0x1  # the central directory's flags
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf:
        with pytest.raises(RuntimeError, match="encrypted") as expected:
            zf.read(name)
        with pytest.raises(RuntimeError) as found:
            _read_member(zf, name)
    assert str(found.value) == str(expected.value)


def test_a_damaged_member_s_error_says_its_check_failed(tmp_path: Path) -> None:
    path = archive(tmp_path / "log.eval", zipfile.ZIP_STORED)
    start = member_offset(path, "samples/A-1_epoch_1.json")
    data = bytearray(path.read_bytes())
    data[start + 5] ^= 0x5A
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf, pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
        _read_member(zf, "samples/A-1_epoch_1.json")
