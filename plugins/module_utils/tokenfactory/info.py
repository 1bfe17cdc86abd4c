# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Shared body of the *_info modules: read Token Factory objects, never their secrets."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import (
    INFO_ARG_SPEC,
    TokenFactoryModule,
)

INFO_OPTIONS = {
    "name": {"type": "str"},
    "label_selectors": {"type": "list", "elements": "str", "default": []},
}


def run_info(rtype, result_key):
    tfm = TokenFactoryModule(INFO_OPTIONS, base_spec=INFO_ARG_SPEC)

    def body():
        params = tfm.params
        tfm.require_crd(rtype.plural)
        if params["name"]:
            found = tfm.client.get(rtype, params["name"], params["namespace"])
            items = [found] if found else []
        else:
            items = tfm.client.list(rtype, params["namespace"], ",".join(params["label_selectors"]) or None)
        for item in items:
            item["metadata"].pop("managedFields", None)
        return {result_key: sorted(items, key=lambda o: o["metadata"]["name"])}

    tfm.run(body)
