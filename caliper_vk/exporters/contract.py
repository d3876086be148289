"""The v1 contract between a torch tensor and the renderer (frozen in docs/contract.md).

An exporter turns a tensor into an :class:`ExternalBuffer`: a small versioned
record of how the renderer can reach the tensor's bytes. The checks here
refuse what the renderer must not read, with the reason and the caller's fix:

- **views are rejected, never repaired**: a tensor that is not contiguous is
  refused (``.contiguous()`` is the caller's explicit copy, never ours); a
  contiguous view with a storage offset is read from its own first element;
- **dtype whitelist**: float32, float16, bfloat16, int32, uint8;
- **size**: at most the device's ``maxStorageBufferRange`` bytes;
- **lifetime**: the record holds the tensor's storage; :func:`check_unchanged`
  notices a storage that was resized or swapped under an attached tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._arrays import is_torch_tensor

CONTRACT_VERSION = 1
SUPPORTED_DTYPES = ("float32", "float16", "bfloat16", "int32", "uint8")
HANDLE_KINDS = ("host-pointer", "opaque-fd", "opaque-win32", "metal-buffer", "staging")


class ContractError(ValueError):
    """A tensor the renderer will not read; the message names the reason and the fix."""


class NotContiguousError(ContractError):
    pass


class UnsupportedDtypeError(ContractError):
    pass


class TooLargeError(ContractError):
    pass


class LifetimeError(ContractError):
    pass


@dataclass
class ExternalBuffer:
    """How the renderer reaches one tensor's bytes (contract version 1).

    Attributes
    ----------
    kind : str
        One of :data:`HANDLE_KINDS`.
    handle : int or None
        Host address (``host-pointer``), file descriptor (``opaque-fd``), Win32
        handle, ``MTLBuffer`` pointer; ``None`` for ``staging``.
    offset, nbytes : int
        The tensor's bytes are ``[handle + offset, handle + offset + nbytes)``.
    dtype, shape
        As the tensor has them (``dtype`` from :data:`SUPPORTED_DTYPES`).
    device_uuid : bytes or None
        The GPU that owns the memory (``None`` for host memory); the engine
        refuses a handle from another GPU.
    semaphore : object or None
        ``None``: the session makes a plain timeline semaphore and the producer waits
        on the host (CPU tensors). Otherwise the exporter's producer-side sync: an
        object with ``timeline`` (the engine ``TimelineSemaphore`` the frames wait on and
        signal), ``before_write(v)``, ``after_write(read_value, v)`` and ``close()``
        (``cuda.StreamSync``: on torch's CUDA stream; ``mps.HostSync``: on the host).
    owner : object
        Keeps the storage alive while the record exists (the tensor and its storage).
    reason : str
        Why this path was chosen; always set for ``staging``.
    memory : object or None
        How to import ``handle``: an ``engine.external.MemoryExport`` (opaque handles:
        allocation size, memory type, dedicated) or the ``MTLBuffer``'s length in bytes.
    mirrored : bool
        The renderer reads a copy in shared VRAM refreshed once per frame on the
        producer's stream (``on-device copy``), not the tensor itself.

    An ``opaque-fd`` / ``opaque-win32`` handle belongs to the record until it is
    imported (``exporters.import_external`` consumes it); ``exporters.release``
    closes a handle and sync that were never used.
    """

    kind: str
    handle: int | None
    offset: int
    nbytes: int
    dtype: str
    shape: tuple
    device_uuid: bytes | None = None
    semaphore: object | None = None
    owner: object = field(default=None, repr=False)
    reason: str = ""
    version: int = CONTRACT_VERSION
    memory: object = field(default=None, repr=False)
    mirrored: bool = False

    def __post_init__(self):
        if self.kind not in HANDLE_KINDS:
            raise ValueError(f"unknown handle kind {self.kind!r}; one of {HANDLE_KINDS}")
        if self.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")


def dtype_name(tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


def check_tensor(tensor, name: str = "tensor", max_bytes: int | None = None) -> None:
    """Raise a :class:`ContractError` unless the renderer may read ``tensor`` in place."""
    if not is_torch_tensor(tensor):
        hint = " (torch.from_numpy(a) shares a numpy array's memory)" if type(tensor).__module__ == "numpy" \
            else ""
        raise ContractError(f"{name} is a {type(tensor).__name__}, not a torch tensor; attach a torch "
                            f"tensor{hint}, or draw host arrays with a view's set_data()")
    # layouts first: a sparse or nested tensor has no strides to check (torch raises on is_contiguous)
    if getattr(tensor, "is_nested", False):
        raise ContractError(f"{name} is a nested tensor; attach each component ({name}.unbind()) or a "
                            f"padded dense copy ({name}.to_padded_tensor(0.0)) that you keep and update")
    layout = str(tensor.layout).replace("torch.", "")
    if layout != "strided":
        raise ContractError(f"{name} is a {layout} tensor; Caliper reads dense tensors: attach "
                            f"{name}.to_dense() (an explicit copy you keep and update)")
    if getattr(tensor, "is_quantized", False):
        raise ContractError(f"{name} is a quantized tensor ({dtype_name(tensor)}); attach its values "
                            f"as {name}.dequantize() (an explicit float32 copy you keep and update)")
    if tensor.device.type == "meta":
        raise ContractError(f"{name} is on the meta device, which holds no data; attach a tensor with "
                            "storage (cpu, cuda or mps), e.g. one from caliper_vk.empty()")
    dt = dtype_name(tensor)
    if dt not in SUPPORTED_DTYPES:
        example = {"float64": ".float()", "int64": ".int()", "bool": ".to(torch.uint8)",
                   "int16": ".int()", "int8": ".int()", "uint16": ".int()",
                   "complex64": ".abs()", "complex128": ".abs().float()", "complex32": ".abs().float()",
                   "bits8": ".view(torch.uint8)"}.get(dt, ".float()")
        raise UnsupportedDtypeError(
            f"{name} has dtype {dt}; Caliper reads {', '.join(SUPPORTED_DTYPES)}. Convert it "
            f"explicitly into a tensor you keep and update (e.g. {name}{example}), or allocate one "
            "with caliper_vk.empty(shape, dtype=torch.float32)")
    if not tensor.is_contiguous():
        raise NotContiguousError(
            f"{name} is not contiguous (shape {tuple(tensor.shape)}, strides {tuple(tensor.stride())}): "
            "it is a view such as a transpose, a strided slice, an expand or a channels-last "
            "layout. Caliper reads a tensor's memory in place and never copies it behind your back: "
            f"attach {name}.contiguous() (an explicit copy you keep and update) or write into a "
            "tensor from caliper_vk.empty()")
    nbytes = tensor.numel() * tensor.element_size()
    if max_bytes is not None and nbytes > max_bytes:
        raise TooLargeError(
            f"{name} holds {nbytes:,} bytes; this Vulkan device reads at most {max_bytes:,} bytes "
            "in one buffer (maxStorageBufferRange). Attach a slice of it (e.g. the first rows) "
            "or a downsampled copy")


def storage_fingerprint(tensor) -> tuple:
    """What must stay the same for an import of ``tensor`` to remain valid: the address of its
    first element and its shape (checked every frame, so two calls, not four).

    The storage itself need not be asked: the export's record holds the storage it imported, so
    no other allocation can take that address while the panel lives. A ``set_()`` onto other
    memory, a ``resize_()`` that reallocates and an ``out=`` that replaces the storage move the
    address; a resize or reshape in place changes the shape. (The frame loop compares the same
    pair inline in ``Panel._refresh``, and calls ``LiveInput.refresh`` only when it differs.)"""
    return (tensor.data_ptr(), tensor.shape)


def check_unchanged(tensor, fingerprint: tuple, name: str = "tensor") -> None:
    """Raise :class:`LifetimeError` if ``tensor``'s storage moved since it was attached."""
    if storage_fingerprint(tensor) != fingerprint:
        raise LifetimeError(
            f"{name}'s storage was resized, replaced or reshaped while attached (for example by "
            "resize_(), set_() or an out= call that reallocated); the panel stopped reading it. "
            "Update attached tensors in place (copy_, fill_, [...] =), or attach the new tensor")
