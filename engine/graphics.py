"""The overlay's graphics pipeline: render pass, pipeline, samplers (one set per device).

Everything else in the engine rasterizes in compute shaders; the overlay
(Dear ImGui / ImPlot chrome, see :mod:`.overlay`) uses the fixed-function
path because its triangles are alpha-blended and anti-aliased through a font
atlas, and none of it is under the byte-exact contract.

What is fixed here, and why:

- **Render pass**: one ``R8G8B8A8_UNORM`` colour attachment, cleared on load
  (``initialLayout`` ``UNDEFINED``: the previous frame is discarded), stored,
  and left in ``GENERAL`` layout so the window's present pass and the readback
  copy can read it as they read a canvas. A classic ``VkRenderPass`` +
  framebuffer needs no device feature beyond Vulkan 1.0. Its two external
  dependencies order it after earlier readers/writers of the target (present,
  readback, the previous frame) and make its writes visible to later compute
  and transfer work.
- **Vertex layout**: Dear ImGui's ``ImDrawVert`` (20 bytes: ``vec2`` position,
  ``vec2`` uv, ``RGBA8`` colour) -- :data:`VERTEX_DTYPE`.
- **Blending**: straight alpha, ``src * a + dst * (1 - a)`` for colour and
  ``src_a + dst_a * (1 - a)`` for alpha (Dear ImGui's reference backends).
- **Dynamic state**: viewport and scissor (one scissor per draw command).
- **Descriptor set 0**: one combined image sampler (the texture) in the
  fragment stage. **Push constants**: ``vec2 scale, vec2 translate`` (16 bytes,
  vertex stage) map display units to clip space.

The objects live in ``device.cache`` (:func:`overlay_pipeline`) and are closed
with the device, so every :class:`~.overlay.Overlay` and
:class:`~.texture.Texture` on a device shares them.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

from . import shaders
from ._vk import ffi, new
from .device import Device
from .limits import check_graphics

TARGET_FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
VERTEX_DTYPE = np.dtype([("position", "<f4", (2,)), ("uv", "<f4", (2,)), ("color", "u1", (4,))])
PUSH_CONSTANT_BYTES = 16
FILTERS = {"linear": vk.VK_FILTER_LINEAR, "nearest": vk.VK_FILTER_NEAREST}
_CACHE_KEY = "overlay_pipeline"


class OverlayPipeline:
    """Render pass, descriptor-set layout, pipeline and samplers. States: live → closed.

    Do not construct directly; use :func:`overlay_pipeline` (one per device,
    owned by ``device.cache`` and closed with the device).
    """

    def __init__(self, device: Device):
        self.device = device
        check_graphics(device.info, "the overlay pipeline", PUSH_CONSTANT_BYTES, VERTEX_DTYPE.itemsize)
        dev = device.handle
        self.render_pass = vk.vkCreateRenderPass(dev, _render_pass_info(), None)
        # the same pass over the target as it stands (retained regions copied in: engine/retained.py)
        self.load_pass = vk.vkCreateRenderPass(dev, _render_pass_info(load=True), None)
        binding = new("VkDescriptorSetLayoutBinding", binding=0,
                      descriptorType=vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, descriptorCount=1,
                      stageFlags=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
        self.set_layout = vk.vkCreateDescriptorSetLayout(
            dev, new("VkDescriptorSetLayoutCreateInfo", bindingCount=1, pBindings=[binding]), None)
        push = new("VkPushConstantRange", stageFlags=vk.VK_SHADER_STAGE_VERTEX_BIT, offset=0,
                   size=PUSH_CONSTANT_BYTES)
        self.layout = vk.vkCreatePipelineLayout(
            dev, new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=[self.set_layout],
                     pushConstantRangeCount=1, pPushConstantRanges=[push]), None)
        self.modules = [_module(dev, shaders.load(name)) for name in ("overlay_vs", "overlay_fs")]
        self.handle = vk.vkCreateGraphicsPipelines(dev, None, 1, self._pipeline_info(), None)[0]
        self.samplers = {name: vk.vkCreateSampler(dev, _sampler_info(f), None)
                         for name, f in FILTERS.items()}

    def _pipeline_info(self):
        stages = [
            new("VkPipelineShaderStageCreateInfo", stage=vk.VK_SHADER_STAGE_VERTEX_BIT,
                module=self.modules[0], pName="main"),
            new("VkPipelineShaderStageCreateInfo", stage=vk.VK_SHADER_STAGE_FRAGMENT_BIT,
                module=self.modules[1], pName="main"),
        ]
        vertex_binding = new("VkVertexInputBindingDescription", binding=0, stride=VERTEX_DTYPE.itemsize,
                             inputRate=vk.VK_VERTEX_INPUT_RATE_VERTEX)
        attributes = [
            new("VkVertexInputAttributeDescription", location=i, binding=0, format=fmt,
                offset=VERTEX_DTYPE.fields[name][1])
            for i, (name, fmt) in enumerate([("position", vk.VK_FORMAT_R32G32_SFLOAT),
                                             ("uv", vk.VK_FORMAT_R32G32_SFLOAT),
                                             ("color", vk.VK_FORMAT_R8G8B8A8_UNORM)])
        ]
        blend = new(
            "VkPipelineColorBlendAttachmentState", blendEnable=vk.VK_TRUE,
            srcColorBlendFactor=vk.VK_BLEND_FACTOR_SRC_ALPHA,
            dstColorBlendFactor=vk.VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA, colorBlendOp=vk.VK_BLEND_OP_ADD,
            srcAlphaBlendFactor=vk.VK_BLEND_FACTOR_ONE,
            dstAlphaBlendFactor=vk.VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA, alphaBlendOp=vk.VK_BLEND_OP_ADD,
            colorWriteMask=vk.VK_COLOR_COMPONENT_R_BIT | vk.VK_COLOR_COMPONENT_G_BIT
            | vk.VK_COLOR_COMPONENT_B_BIT | vk.VK_COLOR_COMPONENT_A_BIT,
        )
        dynamic = [vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_SCISSOR]
        return new(
            "VkGraphicsPipelineCreateInfo",
            stageCount=2, pStages=stages,
            pVertexInputState=new("VkPipelineVertexInputStateCreateInfo",
                                  vertexBindingDescriptionCount=1,
                                  pVertexBindingDescriptions=[vertex_binding],
                                  vertexAttributeDescriptionCount=len(attributes),
                                  pVertexAttributeDescriptions=attributes),
            pInputAssemblyState=new("VkPipelineInputAssemblyStateCreateInfo",
                                    topology=vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST),
            pViewportState=new("VkPipelineViewportStateCreateInfo", viewportCount=1, scissorCount=1),
            pRasterizationState=new("VkPipelineRasterizationStateCreateInfo",
                                    polygonMode=vk.VK_POLYGON_MODE_FILL, cullMode=vk.VK_CULL_MODE_NONE,
                                    frontFace=vk.VK_FRONT_FACE_COUNTER_CLOCKWISE, lineWidth=1.0),
            pMultisampleState=new("VkPipelineMultisampleStateCreateInfo",
                                  rasterizationSamples=vk.VK_SAMPLE_COUNT_1_BIT),
            pDepthStencilState=new("VkPipelineDepthStencilStateCreateInfo"),
            pColorBlendState=new("VkPipelineColorBlendStateCreateInfo", attachmentCount=1,
                                 pAttachments=[blend]),
            pDynamicState=new("VkPipelineDynamicStateCreateInfo", dynamicStateCount=len(dynamic),
                              pDynamicStates=dynamic),
            layout=self.layout, renderPass=self.render_pass, subpass=0, basePipelineIndex=-1,
        )

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, self.handle = self.handle, None
        dev = self.device.handle
        objects = ((self.render_pass, self.load_pass), self.set_layout, self.layout, list(self.modules),
                   list(self.samplers.values()))

        def destroy():
            render_pass, set_layout, layout, modules, samplers = objects
            vk.vkDestroyPipeline(dev, handle, None)
            for sampler in samplers:
                vk.vkDestroySampler(dev, sampler, None)
            for module in modules:
                vk.vkDestroyShaderModule(dev, module, None)
            vk.vkDestroyPipelineLayout(dev, layout, None)
            vk.vkDestroyDescriptorSetLayout(dev, set_layout, None)
            for rp in render_pass:
                vk.vkDestroyRenderPass(dev, rp, None)

        self.device.retire(destroy)


def overlay_pipeline(device: Device) -> OverlayPipeline:
    """The device's shared :class:`OverlayPipeline` (made on first use, closed with the device)."""
    pipeline = device.cache.get(_CACHE_KEY)
    if pipeline is None or pipeline.handle is None:
        pipeline = device.cache[_CACHE_KEY] = OverlayPipeline(device)
    return pipeline


def _module(dev, spirv: bytes):
    code = ffi.new("char[]", bytes(spirv))
    return vk.vkCreateShaderModule(
        dev, new("VkShaderModuleCreateInfo", codeSize=len(spirv), pCode=ffi.cast("uint32_t *", code)),
        None)


def _sampler_info(filt: int):
    clamp = vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE
    return new("VkSamplerCreateInfo", magFilter=filt, minFilter=filt,
               mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST, addressModeU=clamp, addressModeV=clamp,
               addressModeW=clamp, maxAnisotropy=1.0, minLod=0.0, maxLod=0.0,
               borderColor=vk.VK_BORDER_COLOR_FLOAT_TRANSPARENT_BLACK)


def _render_pass_info(load: bool = False):
    attachment = new(
        "VkAttachmentDescription", format=TARGET_FORMAT, samples=vk.VK_SAMPLE_COUNT_1_BIT,
        loadOp=vk.VK_ATTACHMENT_LOAD_OP_LOAD if load else vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE, stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE,
        initialLayout=vk.VK_IMAGE_LAYOUT_GENERAL if load else vk.VK_IMAGE_LAYOUT_UNDEFINED,
        finalLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
    )
    ref = new("VkAttachmentReference", attachment=0, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    subpass = new("VkSubpassDescription", pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                  colorAttachmentCount=1, pColorAttachments=[ref])
    color = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
    readers = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
    before = new(  # after earlier frames' writes and the present/readback reads of the target
        "VkSubpassDependency", srcSubpass=vk.VK_SUBPASS_EXTERNAL, dstSubpass=0,
        srcStageMask=color | readers, dstStageMask=color,
        srcAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
        dstAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT | vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
    )
    after = new(  # the present pass (compute) and the readback (transfer) read what was drawn
        "VkSubpassDependency", srcSubpass=0, dstSubpass=vk.VK_SUBPASS_EXTERNAL,
        srcStageMask=color, dstStageMask=readers,
        srcAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
        dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT,
    )
    return new("VkRenderPassCreateInfo", attachmentCount=1, pAttachments=[attachment], subpassCount=1,
               pSubpasses=[subpass], dependencyCount=2, pDependencies=[before, after])
