"""Same-host shared memory for the services' replies: a region of memory that carries a reply's
out-of-band buffers (the histograms) from a worker's service to the client without the socket.

A pass of a distributed tree fit sends the client about a megabyte of histograms from each
worker (a few nodes' histograms for each of its blocks). Through a TCP socket on one host a
megabyte costs a copy into the kernel, the loopback's segments and a copy out (measured on a
2-core AMD EPYC VM, 2026-11-28: a round trip with a 1 MB reply took 0.60-0.77 ms over TCP,
0.42 ms over a Unix socket, where copying a megabyte takes 0.03 ms). When the client and the
worker share a host, the service writes the buffers into a file in ``/dev/shm`` that both map,
and the socket carries only the pickle and the sizes (:func:`viboost.dask.service.serve`); the
client copies the buffers out into arrays of its own before it sends the next message, after
which the service may overwrite them. In fits of 100 31-leaf trees on 10^6 rows (2 workers)
the client then read the replies in 0.53-0.59 s of a fit against 1.05-1.29 s, and eight fits
alternating with the socket in one cluster took 12.4 s against 13.1 s on average
(``docs/dask_history.md``).

The region is offered once, when the client connects: the service creates a file, writes a
random token at its start and sends its path and the token; the client maps the file and says
whether it found the token there. It does not when the worker runs on another host (the path
is not there, or names another file), and the buffers then go through the socket as before.
Only ``/dev/shm`` is used: a tmpfs, local to its host, so a file there is never read from
another machine (a file on a shared disk could be, without the two mappings staying in step).
The space is reserved when a file is made (``posix_fallocate``), so a full tmpfs fails there,
cleanly, and never while writing into the mapping; a reply that does not fit, or one larger
than :data:`MAX_REGION_BYTES`, goes through the socket. The client removes each file's name as
soon as it has mapped it, so nothing is left in ``/dev/shm`` once both processes close their
mappings (the service also removes its files when it ends, in case the client never mapped
them).
"""

from __future__ import annotations

import mmap
import os
import secrets
import tempfile
from collections.abc import Sequence

import numpy as np

__all__ = ["MAX_REGION_BYTES", "SHM_DIRECTORY", "RegionReader", "RegionWriter", "region_layout"]

#: Where the regions' files are made: Linux's shared-memory tmpfs (absent elsewhere: no region).
SHM_DIRECTORY = "/dev/shm"
#: Each buffer starts at a multiple of this many bytes (a cache line; every dtype's alignment).
_ALIGNMENT = 64
#: Bytes of the token that the client looks for at the start of an offered region.
_TOKEN_BYTES = 16
#: Replies whose buffers need more than this many bytes go through the socket: a region keeps
#: the size of the largest reply it carried for the whole fit.
MAX_REGION_BYTES = 1 << 26
#: The size of a new region (grown by doubling, at least to the reply at hand).
_INITIAL_BYTES = 1 << 20


def region_layout(sizes: Sequence[int]) -> tuple[list[int], int]:
    """Where each of buffers of ``sizes`` bytes starts in a region, one after another, each at
    a multiple of the alignment; and the bytes they need in all."""
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += -(-int(size) // _ALIGNMENT) * _ALIGNMENT
    return offsets, end


class RegionWriter:
    """The service's side: a file in ``directory`` mapped into memory, into which
    :meth:`put` writes a reply's buffers, replacing the file by a larger one when a reply
    needs it.

    Parameters
    ----------
    directory : str, default=SHM_DIRECTORY
        Where the files are made.
    size : int, default=1 MiB
        The first file's size in bytes.

    Raises
    ------
    OSError
        The file could not be made or its space reserved (no ``directory``, a full tmpfs).
    """

    def __init__(self, directory: str = SHM_DIRECTORY, size: int = _INITIAL_BYTES) -> None:
        self.directory = directory
        self.path, self._map = self._new_file(size)
        #: The token written at the start of the first file
        #: (:func:`viboost.dask.service._offer_region`).
        self.token = secrets.token_bytes(_TOKEN_BYTES)
        self._map[:_TOKEN_BYTES] = self.token
        #: Whether the reader has yet to be told of the current file (:meth:`put`).
        self._announce = False

    def _new_file(self, size: int) -> tuple[str, mmap.mmap]:
        size = max(int(size), _TOKEN_BYTES)
        reserve = getattr(os, "posix_fallocate", None)
        if reserve is None:  # (not on macOS, which has no /dev/shm either)
            raise OSError("this system cannot reserve a file's space (posix_fallocate)")
        fd, path = tempfile.mkstemp(prefix="viboost-region-", dir=self.directory)
        try:
            reserve(fd, 0, size)
            return path, mmap.mmap(fd, size)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)

    @property
    def size(self) -> int:
        """The current file's size in bytes."""
        return len(self._map)

    def put(self, buffers: Sequence[memoryview]) -> str | None:
        """Write ``buffers`` (contiguous, as :func:`region_layout` places them) into the region
        and return the path of its file if the reader has not been told of it yet, else
        ``""``; None, writing nothing, when they do not fit and the region cannot grow (more
        than :data:`MAX_REGION_BYTES`, or no space for a larger file): they then go through
        the socket."""
        offsets, needed = region_layout([buffer.nbytes for buffer in buffers])
        if needed > self.size:
            if needed > MAX_REGION_BYTES:
                return None
            try:
                path, new = self._new_file(min(max(needed, 2 * self.size), MAX_REGION_BYTES))
            except OSError:
                return None
            self._drop_file()
            self.path, self._map, self._announce = path, new, True
        for buffer, offset in zip(buffers, offsets, strict=True):
            data = buffer.cast("B")
            self._map[offset : offset + data.nbytes] = data
        path, self._announce = (self.path if self._announce else ""), False
        return path

    def _drop_file(self) -> None:
        """Unmap the current file and remove its name (the reader removed it already, if it
        mapped it)."""
        self._map.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Unmap the region and remove its file's name if it is still there."""
        if not self._map.closed:
            self._drop_file()


class RegionReader:
    """The client's side: the service's current file, mapped read-only, from which
    :meth:`take` copies a reply's buffers. Made by :meth:`attach`.

    Parameters
    ----------
    mapped : mmap.mmap
        The mapped file.
    """

    def __init__(self, mapped: mmap.mmap) -> None:
        self._map = mapped

    @staticmethod
    def _map_file(path: str) -> mmap.mmap:
        """Map the file at ``path``, read-only."""
        fd = os.open(path, os.O_RDONLY)
        try:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)

    @classmethod
    def attach(cls, path: str | None, token: bytes | None) -> RegionReader | None:
        """The region that a service offers (``path`` and ``token``: :class:`RegionWriter`),
        its file's name removed once mapped (both processes now hold it); or None when there
        is none or it is not this host's: the file is missing, cannot be mapped, or does not
        start with ``token`` (then left as it is)."""
        if not path or not token or not path.startswith(SHM_DIRECTORY + os.sep):
            return None
        try:
            mapped = cls._map_file(path)
        except (OSError, ValueError):
            return None
        if mapped[: len(token)] != token:
            mapped.close()
            return None
        os.unlink(path)
        return cls(mapped)

    def take(self, sizes: Sequence[int], path: str = "") -> list[np.ndarray]:
        """Copies of the buffers of ``sizes`` bytes (as :func:`region_layout` places them), as
        new ``uint8`` arrays; first mapping the file at ``path`` instead of the current one if
        ``path`` is not empty (the service replaced its file)."""
        if path:
            new = self._map_file(path)
            os.unlink(path)
            self._map.close()
            self._map = new
        offsets, needed = region_layout(sizes)
        if needed > len(self._map):
            raise ValueError(
                f"a reply's buffers need {needed} bytes of a shared region of {len(self._map)}"
            )
        # Each view of the mapping is dropped once copied (a view alive would keep the file
        # from being unmapped).
        return [
            np.frombuffer(self._map, dtype=np.uint8, count=int(size), offset=offset).copy()
            for offset, size in zip(offsets, sizes, strict=True)
        ]

    def close(self) -> None:
        """Unmap the region."""
        self._map.close()
