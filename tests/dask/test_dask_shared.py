"""viboost.dask.shared: the same-host region that carries a service's reply buffers (layout,
the writer and the reader, growth, refusals, and the messages that use it)."""

from __future__ import annotations

import os
import socket
import threading
from multiprocessing.connection import Connection

import numpy as np
import pytest

from viboost.dask import service as service_module
from viboost.dask import shared
from viboost.dask.shared import RegionReader, RegionWriter, region_layout

needs_shm = pytest.mark.skipif(
    not os.path.isdir(shared.SHM_DIRECTORY) or not os.access(shared.SHM_DIRECTORY, os.W_OK),
    reason="no writable /dev/shm on this system",
)


def _bytes(*sizes: int) -> list[memoryview]:
    rng = np.random.default_rng(sum(sizes))
    return [memoryview(rng.integers(0, 256, size, dtype=np.uint8)) for size in sizes]


def test_region_layout_places_each_buffer_at_the_next_cache_line():
    # By hand: 64-byte steps, a buffer of 0 bytes takes no room.
    assert region_layout([]) == ([], 0)
    assert region_layout([1, 64, 65, 0, 3]) == ([0, 64, 128, 256, 256], 320)


def test_a_writer_makes_its_file_reserves_it_and_removes_it_when_closed(tmp_path):
    writer = RegionWriter(directory=str(tmp_path), size=4096)
    assert os.path.dirname(writer.path) == str(tmp_path)
    assert os.path.getsize(writer.path) == writer.size == 4096
    with open(writer.path, "rb") as file:
        assert file.read(len(writer.token)) == writer.token
    writer.close()
    assert os.listdir(tmp_path) == []
    writer.close()  # (twice: nothing left to do)


def test_a_writer_grows_into_a_new_file_and_refuses_what_it_cannot_hold(tmp_path, monkeypatch):
    writer = RegionWriter(directory=str(tmp_path), size=4096)
    first = writer.path
    assert writer.put(_bytes(100, 200)) == ""  # fits: the reader knows the file
    path = writer.put(_bytes(5000))
    assert path and path != first and writer.size >= 5000
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # the old one's name removed
    assert writer.put(_bytes(10)) == ""  # announced once
    monkeypatch.setattr(shared, "MAX_REGION_BYTES", 8192)
    assert writer.put(_bytes(9000)) is None  # over the cap: the socket carries it
    monkeypatch.setattr(shared, "MAX_REGION_BYTES", 1 << 20)

    def full(self, size):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RegionWriter, "_new_file", full)
    before = writer.path
    assert writer.put(_bytes(20_000)) is None  # no room for a larger file: the same one kept
    assert writer.path == before and writer.put(_bytes(10)) == ""
    writer.close()
    assert os.listdir(tmp_path) == []


@needs_shm
def test_a_reader_maps_the_offered_region_removes_its_name_and_copies_the_buffers_out():
    writer = RegionWriter(size=4096)
    reader = RegionReader.attach(writer.path, writer.token)
    assert reader is not None
    assert not os.path.exists(writer.path)  # mapped by both: the name is not needed
    sent = _bytes(0, 1, 100, 64, 3000)
    assert writer.put(sent) == ""
    got = reader.take([view.nbytes for view in sent])
    for view, array in zip(sent, got, strict=True):
        np.testing.assert_array_equal(array, np.frombuffer(view, dtype=np.uint8))
        assert array.flags.writeable and array.flags.owndata
    big = _bytes(70_000, 5)
    path = writer.put(big)
    assert path
    got = reader.take([view.nbytes for view in big], path)
    np.testing.assert_array_equal(got[0], np.frombuffer(big[0], dtype=np.uint8))
    assert not os.path.exists(path)
    with pytest.raises(ValueError, match="need"):
        reader.take([1 << 30])
    reader.close()
    writer.close()


@needs_shm
def test_a_reader_refuses_a_region_that_is_not_this_hosts(tmp_path):
    writer = RegionWriter(size=4096)
    assert RegionReader.attach(None, None) is None
    assert RegionReader.attach(writer.path, b"another token...") is None  # another file
    assert os.path.exists(writer.path)  # (refused: its name left to the writer)
    assert RegionReader.attach(writer.path + "-missing", writer.token) is None
    elsewhere = RegionWriter(directory=str(tmp_path), size=4096)  # not in /dev/shm
    assert RegionReader.attach(elsewhere.path, elsewhere.token) is None
    for region in (writer, elsewhere):
        region.close()
    assert not os.path.exists(writer.path) and os.listdir(tmp_path) == []


def _pair() -> tuple[Connection, Connection]:
    here, there = socket.socketpair()
    return Connection(here.detach()), Connection(there.detach())


@needs_shm
@pytest.mark.parametrize("cap", [None, 1024])
def test_messages_through_a_region_arrive_whole_and_writable(monkeypatch, cap):
    """A reply's arrays through the region (or, over the region's cap, through the socket in
    the same message format) arrive equal and writable; the socket then carries only the
    frame."""
    if cap is not None:
        monkeypatch.setattr(shared, "MAX_REGION_BYTES", cap)
    a, b = _pair()
    writer = RegionWriter(size=4096)
    reader = RegionReader.attach(writer.path, writer.token)
    rng = np.random.default_rng(1)
    message = [rng.normal(size=(20, 257, 3)), np.arange(7), np.empty((0, 3)), "text"]
    for _ in range(2):  # the second reuses the grown region (or the socket again)
        sender = threading.Thread(target=service_module._send_message, args=(a, message, writer))
        sender.start()
        got = service_module._receive_message(b, 10.0, reader)
        sender.join(10)
        for sent, received in zip(message[:3], got[:3], strict=True):
            assert received.dtype == sent.dtype and received.shape == sent.shape
            np.testing.assert_array_equal(received, sent)
        assert got[0].flags.writeable and got[3] == "text"
    assert not b.poll(0)  # nothing else on the socket
    # Buffers in a region that the receiver does not have: a clear error.
    service_module._send_message(a, message, writer)
    if cap is None:
        with pytest.raises(ValueError, match="shared region"):
            service_module._receive_message(b, 10.0, None)
    for end in (a, b, reader, writer):
        end.close()


def test_a_refused_offer_leaves_the_replies_on_the_socket_and_no_file(monkeypatch, tmp_path):
    """The service's side of the offer: refused (the client is on another host), the region is
    closed (its file removed) and the service replies through the socket; without a region
    to offer (no /dev/shm), it offers none."""
    made = []

    class Writer(RegionWriter):
        def __init__(self) -> None:
            super().__init__(directory=str(tmp_path), size=4096)
            made.append(self)

    monkeypatch.setattr(service_module, "RegionWriter", Writer)
    a, b = _pair()
    offered: dict = {}
    thread = threading.Thread(
        target=lambda: offered.update(region=service_module._offer_region(a, 10.0))
    )
    thread.start()
    assert service_module._accept_region(b, 10.0) is None  # not under /dev/shm: refused
    thread.join(10)
    assert offered["region"] is None and len(made) == 1 and os.listdir(tmp_path) == []

    def no_shm() -> None:
        raise FileNotFoundError("/dev/shm")

    monkeypatch.setattr(service_module, "RegionWriter", no_shm)
    thread = threading.Thread(
        target=lambda: offered.update(region=service_module._offer_region(a, 10.0))
    )
    thread.start()
    assert service_module._accept_region(b, 10.0) is None
    thread.join(10)
    assert offered["region"] is None
    a.close()
    with pytest.raises((EOFError, OSError)):
        service_module._accept_region(b, 1.0)
    b.close()
