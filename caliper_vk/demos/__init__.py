"""Demos run by ``caliper demo NAME``."""
