# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The two shapes of a Token Factory Kubernetes module: one named object present/absent, and the *_info reads."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import dns_subdomain
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import (
    NAMESPACE_ARG_SPEC,
    TokenFactoryModule,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.references import (
    refuse_if_used,
    require_crd,
)

INFO_OPTIONS = {
    "name": {"type": "str"},
    "label_selectors": {"type": "list", "elements": "str", "default": []},
}


def run_object(tfm, rtype, result_key, present, used_by=None, check_name=dns_subdomain, absent_result=None):
    """Body of the object modules: check the name and the CRD; state=absent deletes the object (refused while
    used_by=(users_type, spec_field) objects point at it) and returns {result_key: {}, **absent_result(removed)};
    state=present returns present(name, namespace)."""

    def body():
        params = tfm.params
        name, namespace = check_name("name", params["name"]), params["namespace"]
        require_crd(tfm.client, rtype.plural)
        if params["state"] == "absent":
            if used_by:
                refuse_if_used(tfm.client, rtype.kind, name, namespace, *used_by)
            removed = tfm.objects.remove(rtype, name, namespace, wait=params["wait"])
            return {result_key: {}, **(absent_result(removed) if absent_result else {})}
        return present(name, namespace)

    tfm.run(body)


def run_info(rtype, result_key, options=None, extra=None):
    """Body of every *_info module: one object by name or all matching the label selectors, never secret data;
    `options` extend the argument spec and extra(tfm, items) adds keys to the result."""
    tfm = TokenFactoryModule({**INFO_OPTIONS, **(options or {})}, base_spec=NAMESPACE_ARG_SPEC)

    def body():
        params = tfm.params
        require_crd(tfm.client, rtype.plural)
        if params["name"]:
            found = tfm.client.get(rtype, params["name"], params["namespace"])
            items = [found] if found else []
        else:
            items = tfm.client.list(rtype, params["namespace"], ",".join(params["label_selectors"]) or None)
        for item in items:
            item["metadata"].pop("managedFields", None)
        items = sorted(items, key=lambda o: o["metadata"]["name"])
        return {result_key: items, **(extra(tfm, items) if extra else {})}

    tfm.run(body)
