# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Attributes of the modules that only read (the *_info modules, usage_info)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Read-only; runs normally in check mode.
    support: full
  diff_mode:
    description: Read-only; nothing to diff.
    support: N/A
"""
