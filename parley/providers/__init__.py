"""Upstream adapters, one package per upstream type, behind small capability Protocols."""
