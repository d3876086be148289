"""Compute pipelines and their descriptor sets.

A :class:`ComputePipeline` is made from SPIR-V and a binding list: one entry
per ``layout(binding = i)``, each ``"buffer"`` (storage buffer), ``"uniform"``
(uniform buffer: small per-frame parameters, whose loads a CPU implementation
makes once per invocation group instead of once per lane) or ``"image"``
(storage image). :meth:`ComputePipeline.bind` allocates a
:class:`DescriptorSet` pointing at concrete resources; a view keeps one set
per frame target and re-records only when its resources change.
"""

from __future__ import annotations

import vulkan as vk

from . import limits
from ._vk import WHOLE_SIZE, ffi, new
from .device import Device

_KINDS = {
    "buffer": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
    "uniform": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
    "image": vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE,
}


class ComputePipeline:
    """A compute pipeline with its descriptor-set layout. States: live → closed.

    Parameters
    ----------
    device : Device
        Borrowed; must outlive the pipeline.
    spirv : bytes
        The compiled module; entry point ``main``.
    bindings : sequence of str
        ``"buffer"``, ``"uniform"`` or ``"image"`` for bindings 0, 1, ...
    name : str
        For error messages.
    specialization : dict of int to int, optional
        Values of the module's ``layout(constant_id = k) const uint`` constants (32-bit
        unsigned). The driver compiles the pipeline with them folded in, so a branch on
        one costs nothing at run time: a CPU implementation (lavapipe) otherwise runs
        every side of a branch.
    names : sequence of str, optional
        A name per binding (a pass's declaration: engine/shaders/passes.py, ``Pass``):
        then :meth:`bind` takes the resources by name.
    """

    def __init__(self, device: Device, spirv: bytes, bindings, name: str = "compute",
                 specialization: dict | None = None, names=None):
        self.device = device
        self.name = name
        self.bindings = tuple(bindings)
        self.names = tuple(names) if names is not None else None
        if self.names is not None and len(self.names) != len(self.bindings):
            raise ValueError(f"{name}: {len(self.names)} binding names for {len(self.bindings)} bindings")
        unknown = [b for b in self.bindings if b not in _KINDS]
        if unknown:
            raise ValueError(f"unknown binding kinds {unknown}; use 'buffer', 'uniform' or 'image'")
        spirv = limits.fit_rounding_mode(device.info, spirv)
        limits.check_pipeline(device.info, spirv, self.bindings, name)
        self.specialization = dict(specialization or {})
        spec = _specialization_info(self.specialization) if self.specialization else None
        dev = device.handle
        code = ffi.new("char[]", bytes(spirv))
        self.module = vk.vkCreateShaderModule(
            dev,
            new("VkShaderModuleCreateInfo", codeSize=len(spirv), pCode=ffi.cast("uint32_t *", code)),
            None,
        )
        layout_bindings = [
            new(
                "VkDescriptorSetLayoutBinding",
                binding=i,
                descriptorType=_KINDS[kind],
                descriptorCount=1,
                stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            )
            for i, kind in enumerate(self.bindings)
        ]
        self.set_layout = vk.vkCreateDescriptorSetLayout(
            dev,
            new(
                "VkDescriptorSetLayoutCreateInfo",
                bindingCount=len(layout_bindings),
                pBindings=layout_bindings,
            ),
            None,
        )
        self.layout = vk.vkCreatePipelineLayout(
            dev,
            new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=[self.set_layout]),
            None,
        )
        stage = new(
            "VkPipelineShaderStageCreateInfo",
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=self.module,
            pName="main",
            pSpecializationInfo=spec,
        )
        info = new("VkComputePipelineCreateInfo", stage=stage, layout=self.layout,
                   basePipelineIndex=-1)
        self.handle = vk.vkCreateComputePipelines(dev, None, 1, info, None)[0]
        self._pools: list = []

    def bind(self, resources=None, /, **named) -> DescriptorSet:
        """A descriptor set for ``resources`` (Buffers / StorageImages in binding order), or for
        the resources given by binding name (``bind(params=..., data=..., target=...)``) when
        the pipeline was made with names: every name once, no other."""
        if named:
            if self.names is None or resources is not None:
                raise TypeError(f"{self.name}: give the resources in binding order or, to a pipeline "
                                "made with binding names, by name; not both")
            missing = [n for n in self.names if n not in named]
            unknown = sorted(set(named) - set(self.names))
            if missing or unknown:
                raise ValueError(f"{self.name} binds {', '.join(self.names)}: " + "; ".join(
                    s for s in (f"missing {', '.join(missing)}" if missing else "",
                                f"no binding named {', '.join(unknown)}" if unknown else "") if s))
            resources = [named[n] for n in self.names]
        if resources is None:
            raise TypeError(f"{self.name}: no resources to bind")
        if len(resources) != len(self.bindings):
            raise ValueError(
                f"{self.name} takes {len(self.bindings)} resources, got {len(resources)}"
            )
        return DescriptorSet(self, resources)

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, self.handle = self.handle, None
        dev = self.device.handle
        module, layout, set_layout = self.module, self.layout, self.set_layout

        def destroy():
            vk.vkDestroyPipeline(dev, handle, None)
            vk.vkDestroyPipelineLayout(dev, layout, None)
            vk.vkDestroyDescriptorSetLayout(dev, set_layout, None)
            vk.vkDestroyShaderModule(dev, module, None)

        self.device.retire(destroy)


def _specialization_info(values: dict):
    """A ``VkSpecializationInfo`` of 32-bit unsigned constants (``constant_id -> value``)."""
    ids = sorted(values)
    bad = [k for k in ids if not 0 <= int(values[k]) <= 0xFFFFFFFF]
    if bad:
        raise ValueError(f"specialization constants {bad} do not fit a 32-bit unsigned int")
    data = ffi.new("uint32_t[]", [int(values[k]) for k in ids])
    entries = [new("VkSpecializationMapEntry", constantID=k, offset=4 * i, size=4)
               for i, k in enumerate(ids)]
    return new("VkSpecializationInfo", mapEntryCount=len(ids), pMapEntries=entries,
               dataSize=4 * len(ids), pData=data)


class DescriptorSet:
    """One descriptor set (with its own small pool) for a pipeline. States: live → closed."""

    def __init__(self, pipeline: ComputePipeline, resources):
        self.pipeline = pipeline
        self.resources = tuple(resources)
        dev = pipeline.device.handle
        counts: dict[int, int] = {}
        for kind in pipeline.bindings:
            counts[_KINDS[kind]] = counts.get(_KINDS[kind], 0) + 1
        sizes = [new("VkDescriptorPoolSize", type=t, descriptorCount=n) for t, n in counts.items()]
        self.pool = vk.vkCreateDescriptorPool(
            dev,
            new("VkDescriptorPoolCreateInfo", maxSets=1, poolSizeCount=len(sizes), pPoolSizes=sizes),
            None,
        )
        self.handle = vk.vkAllocateDescriptorSets(
            dev,
            new(
                "VkDescriptorSetAllocateInfo",
                descriptorPool=self.pool,
                descriptorSetCount=1,
                pSetLayouts=[pipeline.set_layout],
            ),
        )[0]
        writes = []
        for i, (kind, res) in enumerate(zip(pipeline.bindings, self.resources, strict=False)):
            if kind != "image":
                limits.check_range(pipeline.device.info, kind, res.size, pipeline.name)
                info = new("VkDescriptorBufferInfo", buffer=res.handle, offset=0, range=WHOLE_SIZE)
                writes.append(new("VkWriteDescriptorSet", dstSet=self.handle, dstBinding=i,
                                  descriptorCount=1, descriptorType=_KINDS[kind], pBufferInfo=info))
            else:
                info = new("VkDescriptorImageInfo", imageView=res.view,
                           imageLayout=vk.VK_IMAGE_LAYOUT_GENERAL)
                writes.append(new("VkWriteDescriptorSet", dstSet=self.handle, dstBinding=i,
                                  descriptorCount=1, descriptorType=_KINDS[kind], pImageInfo=info))
        array = ffi.new("VkWriteDescriptorSet[]", len(writes))
        for i, w in enumerate(writes):
            array[i] = w[0]
        vk.vkUpdateDescriptorSets(dev, len(writes), array, 0, None)

    def close(self) -> None:
        if getattr(self, "pool", None) is None:
            return
        pool, self.pool, self.handle = self.pool, None, None
        dev = self.pipeline.device.handle
        self.resources = ()
        self.pipeline.device.retire(lambda: vk.vkDestroyDescriptorPool(dev, pool, None))
