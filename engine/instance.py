"""Vulkan instance, validation messages and physical-device selection.

The instance enables ``VK_KHR_portability_enumeration`` when the loader has it
(MoltenVK devices are only listed with it), and the Khronos validation layer
plus a ``VK_EXT_debug_utils`` messenger when validation is requested
(``CALIPER_VK_VALIDATION=1``, which the test suite sets). Validation messages
of error severity are collected in :attr:`Instance.validation_errors` so a
test can fail on exactly the call that caused one, and, when
``CALIPER_VK_VALIDATION_LOG`` names a file, appended to it as ``pid<TAB>message``
lines (how the test suite counts the errors of the processes it starts).

Device choice: ``CALIPER_VK_DEVICE`` forces it: an index into the enumeration
order, or a case-insensitive substring of the device name (``llvmpipe``,
``nvidia``), or one of ``discrete``, ``integrated``, ``cpu``. Otherwise the
device whose ``deviceUUID`` a preference in :data:`UUID_PREFERENCES` names (the
package adds torch's current CUDA device, so every rank of a multi-GPU job
draws on its own GPU); otherwise a discrete GPU first, then an integrated one,
then any other (lavapipe is a "CPU" device).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field

import vulkan as vk

from . import profiles
from ._vk import api_version, chain, cstr, ffi, instance_proc, new, version_str
from .loader import no_vulkan_hint

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEVICE_ENV = "CALIPER_VK_DEVICE"
VALIDATION_ENV = "CALIPER_VK_VALIDATION"
VALIDATION_LOG_ENV = "CALIPER_VK_VALIDATION_LOG"
# MoltenVK's fast math contracts and reorders float operations, which breaks the byte-exact
# views; it reads this variable once, when the driver loads, so it is set before any
# Vulkan call (an explicit value in the environment wins; `caliper doctor` reports it).
FAST_MATH_ENV = "MVK_CONFIG_FAST_MATH_ENABLED"
# MoltenVK 1.3.0-1.4.1 turn MTLHeap placement on by default and then give an imported MTLBuffer's
# memory a buffer from a fresh heap (fixed in 1.4.2): the shader would read uninitialised memory
# instead of an MPS tensor. Off unless the user says otherwise (caliper_vk.exporters.mps stages
# MPS tensors when it is on for those versions; `caliper doctor` reports it).
MTLHEAP_ENV = "MVK_CONFIG_USE_MTLHEAP"
if sys.platform == "darwin":
    os.environ.setdefault(FAST_MATH_ENV, "0")
    os.environ.setdefault(MTLHEAP_ENV, "0")

# lavapipe (llvmpipe) rasterises on LP_NUM_THREADS threads, one per core by default, read once
# when an instance enumerates it. Beside a training loop on the same cores that doubles what a
# frame takes from training (both cores for the frame's wall time) and stalls torch's parallel
# regions; a live session makes its device with one (see cpu_raster_threads).
LP_THREADS_ENV = "LP_NUM_THREADS"


@contextlib.contextmanager
def cpu_raster_threads(n: int):
    """Instances made inside give a CPU Vulkan device (lavapipe) ``n`` rasteriser threads, unless
    ``LP_NUM_THREADS`` is set (an explicit value wins). The environment is restored after, so
    the setting reaches nothing else (subprocesses, the dashboard's device)."""
    if LP_THREADS_ENV in os.environ:
        yield
        return
    os.environ[LP_THREADS_ENV] = str(int(n))
    try:
        yield
    finally:
        os.environ.pop(LP_THREADS_ENV, None)


_TYPE_NAMES = {
    vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete",
    vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated",
    vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual",
    vk.VK_PHYSICAL_DEVICE_TYPE_CPU: "cpu",
    vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other",
}
_PREFERENCE = {"discrete": 0, "integrated": 1, "virtual": 2, "cpu": 3, "other": 4}

# Device extensions the engine uses when present; none is required.
OPTIONAL_DEVICE_EXTENSIONS = (
    "VK_EXT_external_memory_host",
    "VK_KHR_external_memory_fd",
    "VK_KHR_external_semaphore_fd",
    "VK_KHR_external_memory_win32",
    "VK_KHR_external_semaphore_win32",
    "VK_EXT_metal_objects",
    "VK_KHR_portability_subset",
    "VK_KHR_swapchain",
)


# Every validation error of every instance in this process, in order (the test suite
# fails the test during which one appears, whichever device or window caused it).
VALIDATION_LOG: list[str] = []


def _log_to_file(text: str) -> None:
    path = os.environ.get(VALIDATION_LOG_ENV)
    if path:
        try:
            with open(path, "a") as f:  # one short append per error
                f.write(f"{os.getpid()}\t{' '.join(text.split())}\n")
        except OSError:
            pass


class NoDeviceError(RuntimeError):
    """No usable Vulkan device; the message says what to install or set."""


def validation_layer_available() -> bool:
    """True when the Khronos validation layer is installed."""
    return any(layer.layerName == VALIDATION_LAYER
               for layer in vk.vkEnumerateInstanceLayerProperties())


def validation_requested() -> bool:
    return os.environ.get(VALIDATION_ENV, "") not in ("", "0", "false", "no")


# Callables () -> bytes | None, asked in order when nothing forces the device choice: the first
# UUID one returns that a device has picks it. caliper_vk.exporters adds torch's current CUDA
# device (the engine knows nothing of torch); a preference that raises is skipped.
UUID_PREFERENCES: list = []


def preferred_uuid() -> bytes | None:
    """The first device UUID a :data:`UUID_PREFERENCES` entry names, or None."""
    for preference in list(UUID_PREFERENCES):
        try:
            uuid = preference()
        except Exception:  # no driver, no bindings: no preference
            uuid = None
        if uuid:
            return bytes(uuid)
    return None


@dataclass
class PhysicalDeviceInfo:
    """What a physical device is and what it can do (read, never changed).

    Under a device profile (:mod:`.profiles`) this is what the profile's device class
    would report: ``name`` says so, ``profile_changes`` lists what was hidden or lowered,
    and every caller (feature negotiation, import alignment, size checks) sees only that.
    ``limits`` holds the limits the engine checks, by their Vulkan names.
    """

    handle: object = field(repr=False)
    index: int
    name: str
    kind: str
    api_version: str
    api_version_int: int
    driver_name: str
    driver_info: str
    vendor_id: int
    device_uuid: bytes
    extensions: frozenset = field(repr=False)
    timeline_semaphore: bool
    buffer_int64_atomics: bool
    max_storage_buffer_range: int
    max_compute_workgroup_count: tuple
    host_pointer_alignment: int
    timestamp_period_ns: float = 1.0
    driver_uuid: bytes = b""
    device_luid: bytes | None = None  # Windows: the adapter LUID, when the driver reports one
    driver_version: int = 0  # VkPhysicalDeviceProperties.driverVersion, vendor-encoded
    device_name: str = ""  # the driver's name for the device, whatever the profile
    shader_int64: bool = False
    features: dict = field(default_factory=dict, repr=False)  # Vulkan feature name -> bool
    limits: dict = field(default_factory=dict, repr=False)  # Vulkan limit name -> value
    portability: dict | None = None  # VK_KHR_portability_subset restrictions, when a profile sets them
    profile: str | None = None
    profile_changes: tuple = ()

    def has(self, extension: str) -> bool:
        return extension in self.extensions


def _query(handle, index: int) -> PhysicalDeviceInfo:
    props = vk.vkGetPhysicalDeviceProperties(handle)
    exts = frozenset(e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(handle, None))
    ids = new("VkPhysicalDeviceIDProperties")
    driver = new("VkPhysicalDeviceDriverProperties")
    floats = new("VkPhysicalDeviceFloatControlsProperties")  # core in Vulkan 1.2
    host = new("VkPhysicalDeviceExternalMemoryHostPropertiesEXT")
    chain(ids, driver, *([floats] if props.apiVersion >= api_version(1, 2) else []),
          *([host] if "VK_EXT_external_memory_host" in exts else []))
    props2 = new("VkPhysicalDeviceProperties2", pNext=ids)
    vk.vkGetPhysicalDeviceProperties2(handle, props2)
    f12 = new("VkPhysicalDeviceVulkan12Features")
    feats = new("VkPhysicalDeviceFeatures2", pNext=f12)
    if props.apiVersion >= api_version(1, 2):
        vk.vkGetPhysicalDeviceFeatures2(handle, feats)
    limits = props.limits
    kind = _TYPE_NAMES.get(props.deviceType, "other")
    features = {"timelineSemaphore": bool(f12.timelineSemaphore),
                "shaderBufferInt64Atomics": bool(f12.shaderBufferInt64Atomics),
                "shaderInt64": bool(feats.features.shaderInt64),
                # a property, kept with the features: RoundingModeRTE for 32-bit floats (limits.py)
                "shaderRoundingModeRTEFloat32": bool(floats.shaderRoundingModeRTEFloat32)}
    limit_values = {}
    for name in profiles.LIMIT_NAMES:
        value = getattr(limits, name)
        limit_values[name] = int(value) if isinstance(value, int) else tuple(int(v) for v in value)
    return PhysicalDeviceInfo(
        handle=handle,
        index=index,
        name=props.deviceName,
        kind=kind,
        api_version=version_str(props.apiVersion),
        api_version_int=props.apiVersion,
        driver_name=cstr(driver.driverName),
        driver_info=cstr(driver.driverInfo),
        vendor_id=props.vendorID,
        device_uuid=bytes(ffi.buffer(ids.deviceUUID)),
        extensions=exts,
        timeline_semaphore=features["timelineSemaphore"],
        buffer_int64_atomics=features["shaderBufferInt64Atomics"],
        shader_int64=features["shaderInt64"],
        features=features,
        limits=limit_values,
        device_name=props.deviceName,
        max_storage_buffer_range=limit_values["maxStorageBufferRange"],
        max_compute_workgroup_count=limit_values["maxComputeWorkGroupCount"],
        timestamp_period_ns=float(limits.timestampPeriod),
        driver_uuid=bytes(ffi.buffer(ids.driverUUID)),
        driver_version=int(props.driverVersion),
        device_luid=bytes(ffi.buffer(ids.deviceLUID)) if ids.deviceLUIDValid else None,
        host_pointer_alignment=(
            int(host.minImportedHostPointerAlignment) if "VK_EXT_external_memory_host" in exts else 0
        ),
    )


class Instance:
    """A ``VkInstance`` with optional validation. States: created → closed.

    Parameters
    ----------
    validation : bool, optional
        Enable the Khronos validation layer; defaults to ``CALIPER_VK_VALIDATION``.
    extensions : list of str
        Extra instance extensions (for example the surface extensions GLFW asks for).
    profile : str or Profile, optional
        A device profile (:mod:`.profiles`) every device is reported under; defaults to
        ``CALIPER_VK_PROFILE``. An unknown name raises :class:`~.profiles.ProfileError`.
    """

    def __init__(self, validation: bool | None = None, extensions=(), profile=None):
        self.profile = profiles.resolve(profile)
        self.validation = validation_requested() if validation is None else validation
        available = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
        layers_available = {layer.layerName for layer in vk.vkEnumerateInstanceLayerProperties()}
        wanted = list(extensions)
        flags = 0
        if "VK_KHR_portability_enumeration" in available:
            wanted.append("VK_KHR_portability_enumeration")
            flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
        if "VK_KHR_get_physical_device_properties2" in available:
            wanted.append("VK_KHR_get_physical_device_properties2")
        layers = []
        self.validation_errors: list[str] = []
        self.validation_warnings: list[str] = []
        self._lock = threading.Lock()
        if self.validation:
            if VALIDATION_LAYER not in layers_available:
                raise NoDeviceError(
                    "validation was requested but the Khronos validation layer is not installed; "
                    "install it (Debian/Ubuntu: apt-get install vulkan-validationlayers) "
                    f"or unset {VALIDATION_ENV}"
                )
            layers.append(VALIDATION_LAYER)
            wanted.append("VK_EXT_debug_utils")
        missing = [e for e in wanted if e not in available]
        if missing:
            raise NoDeviceError(f"the Vulkan loader lacks instance extensions {missing}")
        self.extensions = tuple(dict.fromkeys(wanted))
        app = new(
            "VkApplicationInfo",
            pApplicationName="caliper-vk",
            applicationVersion=1,
            pEngineName="caliper-vk",
            engineVersion=1,
            # a profile's class may have an older Vulkan: validation then flags newer calls
            apiVersion=api_version(*(self.profile.api_version if self.profile else (1, 3))),
        )
        self._callback = None
        messenger_info = None
        if self.validation:
            self._callback = self._on_message
            messenger_info = new(
                "VkDebugUtilsMessengerCreateInfoEXT",
                messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
                messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            )
            # The package wraps Python callables into C callbacks for this field.
            messenger_info = vk.VkDebugUtilsMessengerCreateInfoEXT(
                messageSeverity=messenger_info.messageSeverity,
                messageType=messenger_info.messageType,
                pfnUserCallback=self._callback,
            )
        info = new(
            "VkInstanceCreateInfo",
            flags=flags,
            pApplicationInfo=app,
            enabledLayerCount=len(layers),
            ppEnabledLayerNames=layers or None,
            enabledExtensionCount=len(self.extensions),
            ppEnabledExtensionNames=list(self.extensions) or None,
        )
        try:
            self.handle = vk.vkCreateInstance(info, None)
        except vk.VkError as exc:
            raise NoDeviceError(
                f"could not create a Vulkan instance ({type(exc).__name__}); is a Vulkan driver "
                f"installed? {no_vulkan_hint()}"
            ) from exc
        self._messenger = None
        if messenger_info is not None:
            create = instance_proc(self.handle, "vkCreateDebugUtilsMessengerEXT")
            self._messenger = create(self.handle, messenger_info, None)
            self._messenger_info = messenger_info
        self._devices: list[PhysicalDeviceInfo] | None = None

    # -- validation -------------------------------------------------------------
    def _on_message(self, severity, types, data, user_data):
        text = ffi.string(data.pMessage).decode(errors="replace")
        with self._lock:
            if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT:
                self.validation_errors.append(text)
                VALIDATION_LOG.append(text)
                _log_to_file(text)
            else:
                self.validation_warnings.append(text)
        return 0

    # -- devices ------------------------------------------------------------------
    def physical_devices(self) -> list[PhysicalDeviceInfo]:
        if self._devices is None:
            handles = vk.vkEnumeratePhysicalDevices(self.handle)
            self._devices = [profiles.apply(_query(h, i), self.profile,
                                            OPTIONAL_DEVICE_EXTENSIONS) for i, h in enumerate(handles)]
        return self._devices

    def select(self, choice: str | None = None) -> PhysicalDeviceInfo:
        """Pick a device: ``choice``, else ``CALIPER_VK_DEVICE``, else the preferred UUID's
        (:func:`preferred_uuid`), else the best kind."""
        devices = [d for d in self.physical_devices() if d.api_version_int >= api_version(1, 2)]
        if not devices:
            names = [f"{d.name} (Vulkan {d.api_version})" for d in self.physical_devices()]
            raise NoDeviceError(
                "no Vulkan 1.2 device found"
                + (f"; found only {names}" if names else "")
                + f". {no_vulkan_hint()}"
            )
        choice = choice if choice is not None else os.environ.get(DEVICE_ENV) or None
        if choice is None:
            uuid = preferred_uuid()
            for d in devices:
                if uuid is not None and bytes(d.device_uuid) == uuid:
                    return d
            return min(devices, key=lambda d: (_PREFERENCE[d.kind], d.index))
        text = choice.strip().lower()
        if text.isdigit():
            for d in devices:
                if d.index == int(text):
                    return d
        elif text in _PREFERENCE:
            for d in devices:
                if d.kind == text:
                    return d
        else:
            for d in devices:
                if text in d.device_name.lower():
                    return d
        listing = ", ".join(f"{d.index}: {d.name} ({d.kind})" for d in devices)
        raise NoDeviceError(
            f"{DEVICE_ENV}={choice!r} matches no device; available: {listing}. "
            "Use an index, a part of the name, or discrete/integrated/cpu."
        )

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, self.handle = self.handle, None
        if self._messenger is not None:
            destroy = instance_proc(handle, "vkDestroyDebugUtilsMessengerEXT")
            destroy(handle, self._messenger, None)
            self._messenger = None
        vk.vkDestroyInstance(handle, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
