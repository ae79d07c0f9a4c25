import io
import os
import stat

import pytest

from kernelkiln.atomic import write_atomic


def test_text_bytes_and_a_file_are_written_whole_into_a_new_folder(tmp_path):
    target = tmp_path / "new" / "out.txt"
    assert write_atomic(target, "héllo\n") == target
    assert target.read_text(encoding="utf-8") == "héllo\n"
    write_atomic(target, b"bytes")
    assert target.read_bytes() == b"bytes"
    write_atomic(target, io.BytesIO(b"copied"))
    assert target.read_bytes() == b"copied"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert os.listdir(target.parent) == ["out.txt"]  # no temporary file left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    class Broken(io.RawIOBase):
        def readinto(self, buffer):
            raise OSError("the source went away")

    with pytest.raises(OSError, match="went away"):
        write_atomic(target, Broken())
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.txt"]
