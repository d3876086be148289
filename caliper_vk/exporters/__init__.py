"""Torch tensor → importable handle (cpu, cuda, mps) under the v1 contract.

The exporters arrive with the live-attach work; until then views take host
arrays through ``set_data`` (the staging path).
"""
