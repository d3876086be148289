"""A GLFW window with a Vulkan swapchain that shows a canvas's exact bytes.

GLFW gives the window and its surface on X11, Wayland, Win32 and Cocoa. Each
frame the canvas image is copied by a tiny compute pass into an integer image
in the swapchain's byte order, then ``vkCmdCopyImage`` moves those bytes into
the acquired swapchain image untouched: a screenshot of the window equals the
rendered canvas.

Nothing here waits for the display: :meth:`Window.acquire` asks for an image
with a zero timeout and reports ``False`` when none is free (the caller skips
the frame). Input arrives as :class:`Event` records in :attr:`Window.events`;
what they mean is the caller's business (``caliper_vk.live``).

Event pumping must happen on the thread that created the window (macOS
requires the main thread: :func:`.display.window_refusal` refuses a window elsewhere,
before AppKit would abort the process). A minimised window (0x0 on Win32) is never
waited for: :meth:`Window.recreate` returns False until it has an area again.

A lost display (the X server gone) must not end the process that trains: Xlib's
default fatal-I/O handler calls ``exit()``. On X11 the window installs handlers
(:mod:`.display`) that mark the display lost instead; the window then reports ``alive == False``
and ``lost == True`` and draws no more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import vulkan as vk

from . import shaders
from ._vk import device_proc, ffi, instance_proc, new
from .commands import Recorder
from .compute import ComputePipeline
from .device import Device
from .image import StorageImage, subresource_range
from .instance import Instance, NoDeviceError
from .display import _lost_displays, _survive_display_loss, _watched_displays, why_no_window
from .display import display_available as display_available  # the public name, where it always was
from .display import window_refusal as window_refusal
from .loader import share_with_glfw
from .memory import Buffer

PREFERRED_FORMATS = (vk.VK_FORMAT_B8G8R8A8_UNORM, vk.VK_FORMAT_R8G8B8A8_UNORM,
                     vk.VK_FORMAT_B8G8R8A8_SRGB, vk.VK_FORMAT_R8G8B8A8_SRGB)
BGRA = (vk.VK_FORMAT_B8G8R8A8_UNORM, vk.VK_FORMAT_B8G8R8A8_SRGB)
PRESENT_MODES = (vk.VK_PRESENT_MODE_MAILBOX_KHR, vk.VK_PRESENT_MODE_IMMEDIATE_KHR,
                 vk.VK_PRESENT_MODE_FIFO_KHR)


@dataclass
class Event:
    """One input event, in window coordinates (not framebuffer pixels).

    ``kind`` is one of:

    ``"drag"``      left button held while moving (``dx``, ``dy``: the motion);
    ``"scroll"``    wheel or touchpad (``dx``, ``dy``: the offsets);
    ``"key"``       a key went down (``key``: its lowercase name or ``"space"``,
                    ``"escape"``, else ``""``; ``code``: the GLFW key code; ``mods``);
    ``"key_up"``    a key went up (same fields);
    ``"move"``      the cursor moved (every motion, dragging or not);
    ``"button"``    a mouse button went down or up (``button``: 0 left, 1 right,
                    2 middle, ...; ``down``; ``mods``);
    ``"char"``      text input (``text``: one character, after keyboard layout).

    ``mods`` is GLFW's modifier bit set (shift 1, control 2, alt 4, super 8).
    """

    kind: str
    x: float = 0.0
    y: float = 0.0
    dx: float = 0.0
    dy: float = 0.0
    key: str = ""
    code: int = -1
    button: int = -1
    down: bool = True
    mods: int = 0
    text: str = ""


class BinarySemaphore:
    def __init__(self, device: Device):
        self.device = device
        self.handle = vk.vkCreateSemaphore(device.handle, new("VkSemaphoreCreateInfo"), None)

    def close(self):
        if self.handle is not None:
            handle, self.handle = self.handle, None
            dev = self.device.handle
            self.device.retire(lambda: vk.vkDestroySemaphore(dev, handle, None))


def _glfw():
    import glfw

    return glfw


# Open windows in this process. GLFW is terminated when the last one closes, so that the
# next window connects to the display named then (DISPLAY may have changed, e.g. under Xvfb).
_open_windows = 0

class Window:
    """A window showing one canvas. States: open → closed (by the user or ``close``).

    Parameters
    ----------
    size : (width, height)
    title : str
    device : Device, optional
        Must have been made with the surface extensions GLFW needs; by default the
        window makes its own device (and instance) and closes them.
    """

    def __init__(self, size, title: str = "Caliper", device: Device | None = None):
        refused = why_no_window()
        if refused is not None:  # before GLFW: on macOS a window off the main thread aborts the process
            raise NoDeviceError(f"cannot open a window: {refused}; use an offscreen session (window=False)")
        glfw = _glfw()
        share_with_glfw(glfw)  # one loader for the window and the engine (before glfw.init)
        if not glfw.init():
            raise NoDeviceError("GLFW could not initialise a display (is DISPLAY or WAYLAND_DISPLAY "
                                "set and reachable?); use an offscreen session (window=False)")
        if not glfw.vulkan_supported():
            raise NoDeviceError("GLFW found no Vulkan loader for windows")
        glfw.window_hint(glfw.CLIENT_API, glfw.NO_API)
        glfw.window_hint(glfw.RESIZABLE, glfw.TRUE)
        self.handle = glfw.create_window(int(size[0]), int(size[1]), title, None, None)
        if not self.handle:
            raise NoDeviceError("GLFW could not create a window")
        global _open_windows
        _open_windows += 1
        self._display = _survive_display_loss(glfw)
        self._own_device = device is None
        if device is None:
            exts = list(glfw.get_required_instance_extensions())
            device = Device(Instance(extensions=exts))
        self.device = device
        if "VK_KHR_swapchain" not in device.extensions:
            raise NoDeviceError(f"{device.info.name} cannot present to windows (no VK_KHR_swapchain)")
        surface = ffi.new("VkSurfaceKHR *")
        result = glfw.create_window_surface(device.instance.handle, self.handle, None, surface)
        if result != vk.VK_SUCCESS:
            raise NoDeviceError(f"could not create a Vulkan surface for the window (VkResult {result})")
        self.surface = surface[0]
        inst = device.instance.handle
        supported = instance_proc(inst, "vkGetPhysicalDeviceSurfaceSupportKHR")(
            device.info.handle, device.queue_family, self.surface)
        if not supported:
            raise NoDeviceError(f"{device.info.name}'s compute queue cannot present to this window")
        self.events: list[Event] = []
        self.alive = True
        self.lost = False  # the display (X server) or the window's surface went away
        self.resized = False
        self._drag = None
        self._install_callbacks()
        d = device.handle
        self._create_swapchain = device_proc(d, "vkCreateSwapchainKHR")
        self._destroy_swapchain = device_proc(d, "vkDestroySwapchainKHR")
        self._get_images = device_proc(d, "vkGetSwapchainImagesKHR")
        self._acquire = device_proc(d, "vkAcquireNextImageKHR")
        self._queue_present = device_proc(d, "vkQueuePresentKHR")
        self.pipeline = ComputePipeline(device, shaders.load("present"), ["buffer", "image", "image"],
                                        name="present")
        self.swapchain = None
        self.canvas = None
        self._acquired: int | None = None
        self._acquire_sems: list = []
        self._setup()

    # -- swapchain ---------------------------------------------------------------------------
    def framebuffer_size(self) -> tuple[int, int]:
        w, h = _glfw().get_framebuffer_size(self.handle)
        return max(1, w), max(1, h)

    def _setup(self) -> None:
        dev, inst, pd = self.device.handle, self.device.instance.handle, self.device.info.handle
        caps = instance_proc(inst, "vkGetPhysicalDeviceSurfaceCapabilitiesKHR")(pd, self.surface)
        formats = instance_proc(inst, "vkGetPhysicalDeviceSurfaceFormatsKHR")(pd, self.surface)
        modes = instance_proc(inst, "vkGetPhysicalDeviceSurfacePresentModesKHR")(pd, self.surface)
        available = {f.format: f for f in formats}
        fmt = next((f for f in PREFERRED_FORMATS if f in available), None)
        if fmt is None:
            raise NoDeviceError(f"the window offers no 8-bit RGBA/BGRA format ({list(available)})")
        if not caps.supportedUsageFlags & vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT:
            raise NoDeviceError("the window's swapchain images cannot be copied into")
        self.format = fmt
        self.swap_rb = fmt in BGRA
        mode = next(m for m in PRESENT_MODES if m in modes or m == vk.VK_PRESENT_MODE_FIFO_KHR)
        w, h = self.framebuffer_size()
        if caps.currentExtent.width != 0xFFFFFFFF:
            w, h = caps.currentExtent.width, caps.currentExtent.height
        self.extent = (max(1, w), max(1, h))
        count = caps.minImageCount + 1
        if caps.maxImageCount:
            count = min(count, caps.maxImageCount)
        info = new(
            "VkSwapchainCreateInfoKHR",
            surface=self.surface, minImageCount=count, imageFormat=fmt,
            imageColorSpace=available[fmt].colorSpace,
            imageExtent=new("VkExtent2D", width=self.extent[0], height=self.extent[1]),
            imageArrayLayers=1, imageUsage=vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT,
            imageSharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, preTransform=caps.currentTransform,
            compositeAlpha=vk.VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR, presentMode=mode, clipped=vk.VK_TRUE,
            oldSwapchain=self.swapchain,
        )
        old = self.swapchain
        self.swapchain = self._create_swapchain(dev, info, None)
        if old is not None:
            self._destroy_swapchain(dev, old, None)
        self.images = self._get_images(dev, self.swapchain)
        self.present_image = StorageImage(self.device, *self.extent)
        self.params = Buffer(self.device, 16)
        self.params.write(np.array([self.extent[0], self.extent[1], int(self.swap_rb), 0], np.uint32))
        self.done_sems = [BinarySemaphore(self.device) for _ in self.images]
        self._acquire_sems = [BinarySemaphore(self.device) for _ in range(len(self.images) + 1)]
        self._next_sem = 0
        self._recorders: list[Recorder] = []
        self._sets = []
        self.resized = False

    def _teardown(self) -> None:
        self.device.wait()
        vk.vkDeviceWaitIdle(self.device.handle)
        for r in self._recorders:
            r.close()
        for s in self._sets:
            s.close()
        for s in self.done_sems + self._acquire_sems:
            s.close()
        self.present_image.close()
        self.params.close()
        self._recorders, self._sets = [], []
        self._acquired = None

    def minimised(self) -> bool:
        """True while the window has no area to draw into: minimised (GLFW's Win32 backend reports
        a 0x0 framebuffer then; Cocoa and Wayland may too) or sized to nothing. X11 never does."""
        w, h = _glfw().get_framebuffer_size(self.handle)
        return w == 0 or h == 0

    def recreate(self, wait: bool = False) -> bool:
        """Rebuild the swapchain after a resize (the caller re-lays out its canvas); True when done.

        While the window is :meth:`minimised` there is nothing to build: by default this returns
        False at once and :attr:`resized` stays set, so the caller skips its frame and tries again
        at a later one (the training thread never waits for a window to come back). ``wait=True``
        is for a loop that does nothing but draw (the dashboard): it sleeps in GLFW's event wait
        until the window has an area again.
        """
        while self.alive and self.minimised():
            if not wait:
                return False
            _glfw().wait_events()  # minimised: nothing to draw into
            self._check_alive()
        if not self.alive:
            return False
        self._teardown()
        self._setup()
        if self.canvas is not None:
            self.bind_canvas(self.canvas)
        return True

    def bind_canvas(self, canvas) -> None:
        """Record the per-image presentation commands for ``canvas``.

        ``canvas`` is anything with ``width``, ``height`` and an ``image`` that
        binds as an ``rgba8ui`` storage image and is in ``GENERAL`` layout
        whenever a frame is submitted: a :class:`~.canvas.Canvas` or an
        :class:`~.overlay.Overlay`. Bind again after it is resized or replaced.
        """
        self.device.wait()
        for r in self._recorders:
            r.close()
        for s in self._sets:
            s.close()
        self.canvas = canvas
        self._sets = [self.pipeline.bind([self.params, canvas.image, self.present_image])]
        self._recorders = []
        w = min(canvas.width, self.extent[0])
        h = min(canvas.height, self.extent[1])
        for image in self.images:
            rec = Recorder(self.device).begin()
            rec.to_general(self.present_image)
            rec.clear(self.present_image, (0, 0, 0, 255))
            rec.barrier()
            rec.dispatch(self._sets[0], -(-w // 16), -(-h // 16))
            rec.barrier()
            _transition(rec, image, vk.VK_IMAGE_LAYOUT_UNDEFINED,
                        vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL)
            region = new(
                "VkImageCopy",
                srcSubresource=_layers(), srcOffset=new("VkOffset3D"), dstSubresource=_layers(),
                dstOffset=new("VkOffset3D"),
                extent=new("VkExtent3D", width=self.extent[0], height=self.extent[1], depth=1))
            vk.vkCmdCopyImage(rec.handle, self.present_image.handle, vk.VK_IMAGE_LAYOUT_GENERAL, image,
                              vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, region)
            _transition(rec, image, vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                        vk.VK_IMAGE_LAYOUT_PRESENT_SRC_KHR)
            rec.end()
            self._recorders.append(rec)

    # -- frames ---------------------------------------------------------------------------------
    def acquire(self) -> bool:
        """Get a swapchain image without waiting; False when none is free (skip the frame)."""
        if self._acquired is not None:
            return True
        sem = self._acquire_sems[self._next_sem]
        index = ffi.new("uint32_t *")
        try:
            self._acquire(self.device.handle, self.swapchain, 0, sem.handle, None, index)
        except vk.VkSuboptimalKhr:
            # acquired all the same (MoltenVK says so on every resize): the image is drawn and
            # presented, its semaphore is waited on, and the swapchain is rebuilt after the present
            self.resized = True
        except (vk.VkNotReady, vk.VkTimeout):
            return False
        except vk.VkErrorOutOfDateKhr:
            self.resized = True
            return False
        except vk.VkErrorSurfaceLostKhr:
            self._lose()
            return False
        self._next_sem = (self._next_sem + 1) % len(self._acquire_sems)
        self._acquired = index[0]
        self._acquired_sem = sem
        return True

    def present_commands(self):
        """The command buffer that shows the canvas in the acquired image."""
        return self._recorders[self._acquired].handle

    @property
    def frame_semaphores(self):
        """(wait, signal) binary semaphores for the frame's submission."""
        return self._acquired_sem, self.done_sems[self._acquired]

    def present(self) -> None:
        index, self._acquired = self._acquired, None
        info = new("VkPresentInfoKHR", waitSemaphoreCount=1,
                   pWaitSemaphores=[self.done_sems[index].handle], swapchainCount=1,
                   pSwapchains=[self.swapchain], pImageIndices=[index])
        try:
            self._queue_present(self.device.queue, info)
        except (vk.VkErrorOutOfDateKhr, vk.VkSuboptimalKhr):
            self.resized = True
        except vk.VkErrorSurfaceLostKhr:
            self._lose()

    def _lose(self) -> None:
        self.alive = False
        self.lost = True

    # -- input ------------------------------------------------------------------------------------
    def _install_callbacks(self) -> None:
        glfw = _glfw()
        names = {glfw.KEY_SPACE: "space", glfw.KEY_ESCAPE: "escape"}

        def on_button(win, button, action, mods):
            x, y = glfw.get_cursor_pos(win)
            self.events.append(Event("button", x=x, y=y, button=button, down=action == glfw.PRESS,
                                     mods=mods))
            if button == glfw.MOUSE_BUTTON_LEFT:
                self._drag = (x, y) if action == glfw.PRESS else None

        def on_cursor(win, x, y):
            self.events.append(Event("move", x=x, y=y))
            if self._drag is not None:
                px, py = self._drag
                self.events.append(Event("drag", x=x, y=y, dx=x - px, dy=y - py))
                self._drag = (x, y)

        def on_scroll(win, dx, dy):
            x, y = glfw.get_cursor_pos(win)
            self.events.append(Event("scroll", x=x, y=y, dx=dx, dy=dy))

        def on_key(win, key, scancode, action, mods):
            if action in (glfw.PRESS, glfw.RELEASE):
                name = glfw.get_key_name(key, scancode) or names.get(key, "")
                x, y = glfw.get_cursor_pos(win)
                self.events.append(Event("key" if action == glfw.PRESS else "key_up", x=x, y=y,
                                         key=name.lower(), code=key, mods=mods))

        def on_char(win, codepoint):
            self.events.append(Event("char", text=chr(codepoint)))

        def on_size(win, w, h):
            self.resized = True

        self._callbacks = (on_button, on_cursor, on_scroll, on_key, on_char, on_size)  # keep them alive
        glfw.set_mouse_button_callback(self.handle, on_button)
        glfw.set_cursor_pos_callback(self.handle, on_cursor)
        glfw.set_scroll_callback(self.handle, on_scroll)
        glfw.set_key_callback(self.handle, on_key)
        glfw.set_char_callback(self.handle, on_char)
        glfw.set_framebuffer_size_callback(self.handle, on_size)

    def window_size(self) -> tuple[int, int]:
        """The window's size in screen units, the coordinates of input events (at least 1x1).

        ``framebuffer_size() / window_size()`` is the HiDPI scale (2 on a Retina display).
        """
        w, h = _glfw().get_window_size(self.handle)
        return max(1, w), max(1, h)

    def poll(self) -> list[Event]:
        """Pump window events; returns (and clears) the input events since the last poll."""
        glfw = _glfw()
        if self._display not in _lost_displays:
            glfw.poll_events()
        self._check_alive()
        events, self.events = self.events, []
        return events

    def _check_alive(self) -> None:
        if self._display in _lost_displays:
            self._lose()
        elif _glfw().window_should_close(self.handle):
            self.alive = False

    def set_title(self, title: str) -> None:
        _glfw().set_window_title(self.handle, title)

    def position(self) -> tuple[int, int]:
        return _glfw().get_window_pos(self.handle)

    def close(self) -> None:
        if self.handle is None:
            return
        self._teardown()
        self.pipeline.close()
        self._destroy_swapchain(self.device.handle, self.swapchain, None)
        instance_proc(self.device.instance.handle, "vkDestroySurfaceKHR")(
            self.device.instance.handle, self.surface, None)
        _glfw().destroy_window(self.handle)
        self.handle = None
        self.alive = False
        if self._own_device:
            self.device.close()
            self.device.instance.close()
        global _open_windows
        _open_windows -= 1
        if _open_windows == 0:
            _glfw().terminate()  # the connection is closed: its address may be reused
            _watched_displays.discard(self._display)
            _lost_displays.discard(self._display)


def _layers():
    return new("VkImageSubresourceLayers", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0,
               baseArrayLayer=0, layerCount=1)


def _transition(rec: Recorder, image, old: int, new_layout: int) -> None:
    barrier = new(
        "VkImageMemoryBarrier",
        srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT if old != vk.VK_IMAGE_LAYOUT_UNDEFINED else 0,
        dstAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT
        if new_layout == vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL else 0,
        oldLayout=old, newLayout=new_layout,
        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        image=image, subresourceRange=subresource_range())
    vk.vkCmdPipelineBarrier(rec.handle, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                            vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 0, None, 0, None, 1, barrier)

