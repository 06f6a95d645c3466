"""Which vendor made a device: one rule for every backend, driven by the backend spec's vendor table.

A backend spec declares its vendor table as data (``specs/<vendor>/backend.yaml``, ``capabilities: vendors:``:
``{<substring>: VENDOR}`` in order, plus an optional ``default: VENDOR``), the generator renders it into the
backend's tables (``TABLES.vendors``, pairs in spec order), and every backend's tables answer
:meth:`VendorTable.vendor` with the same code: adding a backend adds a table, not a function.
"""

from __future__ import annotations

from ironaccelerator._core import Vendor

__all__ = ["DEFAULT", "VendorTable"]

#: The key of a vendor table's fallback entry (``default: NVIDIA``): the vendor of a device no substring names.
DEFAULT = "default"


class VendorTable:
    """Mixin of a backend's tables (a frozen dataclass with a ``vendors`` field): ``vendors`` holds the spec's
    ``(substring, Vendor)`` pairs in spec order, and a ``("default", Vendor)`` pair for the vendor of a device no
    substring names (``Vendor.OTHER`` where the spec has none)."""

    vendors: tuple[tuple[str, Vendor], ...]

    def vendor(self, name: str = "", implementation: str = "") -> Vendor:
        """The vendor of a device, by the spec's vendor table.

        The first pair (in spec order) whose substring is found, ignoring case, in ``implementation`` wins; else
        the first found in ``name``; else the table's ``default``; else ``Vendor.OTHER``.  ``implementation`` is
        what drives the device, where that differs from its maker: PoCL's CPU device reports its processor's maker
        ("AuthenticAMD") but is PoCL's.

        Args:
            name: the device's name or vendor string (``"NVIDIA GeForce RTX 4090"``, ``"AuthenticAMD"``); "" for
                none.
            implementation: the platform or driver that runs the device (OpenCL: the platform's name and
                version); "" for none.

        Returns:
            The :class:`Vendor`.

        Raises:
            Error: never (a name the table does not know is its default's, or ``Vendor.OTHER``).

        Backends:
            All: each backend's tables (``TABLES.vendor``), from its spec's ``capabilities: vendors:``.
        """
        for text in (implementation, name):
            if text:
                low = text.lower()
                for needle, vendor in self.vendors:
                    if needle != DEFAULT and needle.lower() in low:
                        return vendor
        for needle, vendor in self.vendors:
            if needle == DEFAULT:
                return vendor
        return Vendor.OTHER
