"""Immutable facts about a device and the identities of its runtime (DESIGN 2, 3):
``CudaDeviceInfo`` (what ``session.device_info()`` returns), ``CudaRuntimeIdentity`` and
``AllocationDomainId``. Plain values: the execution core and the runtime both use them.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _driver

__all__ = ["CudaDeviceInfo", "CudaRuntimeIdentity", "AllocationDomainId", "read_info"]


@dataclass(frozen=True)
class CudaDeviceInfo:
    """Immutable facts about one device."""

    ordinal: int
    name: str
    uuid: str
    compute_capability: tuple[int, int]
    total_memory: int
    multiprocessor_count: int
    l2_cache_bytes: int
    memory_bus_width_bits: int
    memory_clock_khz: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    max_shared_per_block: int
    memory_pools_supported: bool

    @property
    def arch(self) -> int:
        """The NVRTC target (``90`` for sm_90)."""
        major, minor = self.compute_capability
        return 10 * major + minor

    @property
    def peak_bandwidth_gbps(self) -> float:
        """Theoretical DRAM bandwidth: 2 transfers per clock x bus width."""
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_width_bits / 8 / 1e9


@dataclass(frozen=True)
class CudaRuntimeIdentity:
    ordinal: int
    uuid: str
    serial: int
    pid: int


@dataclass(frozen=True)
class AllocationDomainId:
    value: int


def read_info(ordinal: int, dev) -> CudaDeviceInfo:
    """The facts of device ``dev`` (ordinal ``ordinal``), read from the driver."""
    a = _driver.device_attributes(dev)
    return CudaDeviceInfo(
        ordinal=ordinal,
        name=_driver.device_name(dev),
        uuid=_driver.device_uuid(dev),
        compute_capability=(a["cc_major"], a["cc_minor"]),
        total_memory=int(_driver.device_total_mem(dev)),
        multiprocessor_count=a["sm_count"],
        l2_cache_bytes=a["l2_bytes"],
        memory_bus_width_bits=a["bus_width_bits"],
        memory_clock_khz=a["memory_clock_khz"],
        max_threads_per_block=a["max_threads_per_block"],
        max_block_dims=(a["max_block_x"], a["max_block_y"], a["max_block_z"]),
        max_grid_dims=(a["max_grid_x"], a["max_grid_y"], a["max_grid_z"]),
        max_shared_per_block=a["max_shared_per_block_optin"],
        memory_pools_supported=bool(a["memory_pools"]),
    )
