"""Tenant portal on the public listener (/portal/): see views.py and docs/gateway.md, "Tenant portal"."""

from .views import Portal

__all__ = ["Portal"]
