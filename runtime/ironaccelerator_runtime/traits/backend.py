"""The :class:`Backend` trait base: one vendor runtime, which enumerates and opens devices."""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from ironaccelerator._core import BackendKind, ErrorKind

from ..errors import fail
from ..integers import _integer
from .values import DeviceId
from .checks import unsupported

if TYPE_CHECKING:
    from .values import DeviceDescriptor
    from .device import Device


class Backend:
    """A vendor API: enumerates its devices and opens them.

    Get one from the registry (``BackendRegistry.default().get("opencl")``) or construct a vendor's class
    (``ironaccelerator.backends.opencl.OpenCLBackend()``); a backend whose vendor library cannot load raises
    ``LIBRARY_NOT_FOUND`` there.  ``kind`` is its :class:`BackendKind`.  The base class raises
    ``Error(UNSUPPORTED)`` for what a backend does not provide.

    Backends:
        OpenCL (``OpenCLBackend``), CUDA and HIP (``CudaBackend``/``HipBackend``), Metal (``MetalBackend``),
        QNN (``QnnBackend``).
    """

    kind: BackendKind

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind.name}>"

    def versions(self) -> dict[str, Any]:
        """The driver, runtime and platform versions the backend can report (for ``python -m ironaccelerator``).

        Returns:
            name -> value, as the vendor gives them; empty where it reports none.

        Raises:
            Error: the vendor's error where a version query fails (OpenCL: enumerating the platforms).

        Backends:
            All.  OpenCL: each platform with its ``CL_PLATFORM_VERSION``; CUDA/HIP: driver (and HIP runtime)
            version; Metal: the Objective-C runtime and the frameworks opened; QNN: core and backend API
            versions, provider and build id.
        """
        return {}

    def devices(self) -> list[DeviceDescriptor]:
        """The backend's devices as enumerated, in the vendor's order, without opening any.

        Enumerated once per backend object and cached.

        Returns:
            One :class:`DeviceDescriptor` per device; empty where the library loads but finds none (HIP without
            an AMD GPU; OpenCL without a platform).

        Raises:
            Error: the vendor's error (mapped to an :class:`ErrorKind`, ``.code`` the vendor's status) where the
                enumeration fails, e.g. ``NOT_INITIALIZED`` when the driver cannot initialise.

        Backends:
            All.
        """
        raise unsupported(self.kind, "Backend.devices")

    def open(self, device_id: DeviceId | int = 0) -> Device:
        """Open a device: create its context (or device handle) so it can allocate, run and load code.

        Args:
            device_id: a :class:`DeviceId` of this backend (from :meth:`devices`) or an index (an ``int`` or
                anything with ``__index__``, such as ``np.int64``); default the first device.

        Returns:
            The opened :class:`Device` (the backend's subclass, e.g. ``OpenCLDevice``); a context manager that
            closes the device on exit.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for an index out of range or negative, a :class:`DeviceId` of
                another backend, or anything that is not an index (``"0"``, ``0.5``, ``True``), on every backend;
                ``ErrorKind.NO_DEVICE`` for an index when the backend has no device at all (OpenCL, CUDA, HIP, QNN;
                Metal says ``INVALID_VALUE``); the vendor's error where creating the context fails.

        Backends:
            All.  QNN also takes ``arch=`` and ``soc=`` keywords (the HTP architecture / SoC model graphs are
            prepared for: see ``QnnBackend.open``).
        """
        raise unsupported(self.kind, "Backend.open")

    def _index(self, device_id: DeviceId | int) -> int:
        """The device index ``open`` was given: a :class:`DeviceId` of this backend, or an integer (an ``int`` or
        anything with ``__index__``, ex. ``np.int64``); anything else (``"0"``, ``0.9``, ``True``: a bool is not
        an index) is ``INVALID_VALUE``, like an id of another backend or out of range."""
        if type(device_id) is DeviceId:
            if device_id.backend != self.kind:
                raise fail(ErrorKind.INVALID_VALUE, "Backend.open", f"{device_id} is not a {self.kind.name} device",
                           self)
            return device_id.index
        n = _integer(device_id)
        if n is None:
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open", "device_id must be a DeviceId or an int index, not "
                       f"{type(device_id).__name__} ({device_id!r:.80})", self)
        if n < 0:  # (a bad value whatever the devices: INVALID_VALUE on a backend without any too, not NO_DEVICE)
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open", f"device index {n} is negative", self)
        return n

    def operations(self) -> tuple[str, ...]:
        """The operations of the trait surface this backend implements, derived from what its classes override.

        Returns:
            ``"Trait.method"`` names (ex. ``"Stream.capture"``) in the order of the trait bases; the surface's
            operations this backend leaves out raise ``UNSUPPORTED`` (see :mod:`ironaccelerator_runtime.operations`
            for the rule).  Derived once per backend class.

        Raises:
            Error: nothing on a backend of the package; a backend class whose methods lack the return annotations
                the derivation follows raises the ``TypeError`` of the failed lookup.

        Backends:
            All.  What ``python -m ironaccelerator --json`` lists as each backend's ``operations``.
        """
        from ..operations import implemented

        return implemented(type(self))

    def supports(self, operation: str) -> bool:
        """Whether this backend implements ``operation``: ask instead of calling it and catching ``UNSUPPORTED``.

        Args:
            operation: an operation of the trait surface, ``"Trait.method"`` (ex. ``"Stream.capture"``,
                ``"Kernel.max_active_blocks"``).

        Returns:
            True where the backend's class overrides the base method (or the base implements it for every
            backend and what it builds on is there), False where calling it raises ``UNSUPPORTED``.  An
            implemented operation may still refuse some arguments with ``UNSUPPORTED`` (a memory kind, a module
            format): the device's capability flags say those.

        Raises:
            Error: ``INVALID_VALUE`` for a name that is not an operation of the surface; the message lists them.

        Backends:
            All.
        """
        from ..operations import supports

        return supports(type(self), operation, self.kind.name)
