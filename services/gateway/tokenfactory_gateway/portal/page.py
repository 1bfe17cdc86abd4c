"""The portal's HTML: one self-contained page (inline CSS and SVG; no script, no external asset, works offline).

Every value that comes from a request or the database is escaped here. The page is built from sections (usage,
limits, budgets, models, keys), one function each, in the order `dashboard` lists them.
"""

from __future__ import annotations

from html import escape

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1a202c;background:#f7fafc}
header{background:#1a365d;color:#fff;padding:10px 24px;display:flex;gap:16px;align-items:center}
header h1{font-size:18px;margin:0;flex:1} main{padding:12px 24px;max-width:1100px}
section{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:12px 16px;margin:12px 0}
h2{font-size:16px;margin:4px 0 10px} table{border-collapse:collapse;font-size:13px}
td,th{border-bottom:1px solid #e2e8f0;padding:4px 10px;text-align:left} th{background:#edf2f7}
td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#edf2f7;padding:8px;overflow:auto;font-size:12px}
.flash{background:#fefcbf;border:1px solid #d69e2e;padding:8px 12px} .err{background:#fed7d7;border-color:#c53030}
.key{font-family:monospace;font-size:14px;user-select:all;background:#c6f6d5;padding:6px;display:inline-block}
nav a{margin-right:12px} button{cursor:pointer} form.inline{display:inline}
"""


def _layout(title: str, body: str, header: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head><body>'
            f"<header><h1>Token Factory portal</h1>{header}</header><main>{body}</main></body></html>")  # fmt: skip


def sign_in(message: str = "") -> str:
    flash = f'<p class="flash err" id="message">{escape(message)}</p>' if message else ""
    body = (f'<section><h2>Sign in</h2>{flash}<form method="post" action="/portal/sign-in" autocomplete="off">'
            '<label>API key of your tenant <input type="password" name="key" id="key" size="56" required></label> '
            '<button type="submit" id="sign-in">Sign in</button></form>'
            "<p>Any key of the tenant shows that key's usage; a <b>tenant-admin</b> key also shows the whole "
            "tenant and manages its keys.</p></section>")  # fmt: skip
    return _layout("Sign in - Token Factory", body)


def dashboard(view: dict) -> str:
    s = view["session"]
    csrf = escape(view["csrf"])
    role = "tenant admin" if s.tenant_admin else "key"
    header = (f'<span id="who">tenant <b>{escape(s.tenant)}</b> - {role} {escape(s.key_name)} '
              f"({escape(s.key_prefix)}...)</span>"
              f'<form class="inline" method="post" action="/portal/sign-out"><input type="hidden" name="csrf" '
              f'value="{csrf}"><button type="submit" id="sign-out">Sign out</button></form>')  # fmt: skip
    parts = [_flash(view), usage_section(view), limits_section(view), budgets_section(view), models_section(view)]
    if s.tenant_admin:
        parts.append(keys_section(view, csrf))
    return _layout(f"{s.tenant} - Token Factory", "".join(parts), header)


def _flash(view) -> str:
    if view.get("created_key"):
        name, value = view["created_key"]
        return (f'<section class="flash" id="created"><b>Key {escape(name)} created.</b> Copy it now: it is shown '
                f'this once and cannot be shown again.<br><span class="key" id="new-key">{escape(value)}</span>'
                "</section>")  # fmt: skip
    if view.get("message"):
        return f'<p class="flash" id="message">{escape(view["message"])}</p>'
    return ""


def usage_section(view) -> str:
    ranges = " ".join(
        f'<a href="/portal/?range={r}"{" aria-current=page" if r == view["range"] else ""}>{label}</a>'
        for r, label in view["ranges"]
    )
    scope = "whole tenant" if view["session"].tenant_admin else "this key"
    return (f'<section id="usage"><h2>Usage ({scope}, {escape(view["range_label"])})</h2><nav>{ranges}</nav>'
            f'{view["charts"]}<h2>Per model</h2>{_usage_table(view["by_model"], "model")}'
            f'<h2>Per key</h2>{_usage_table(view["by_key"], "key_name")}</section>')  # fmt: skip


def _usage_table(rows, first) -> str:
    if not rows:
        return "<p>No usage in this range.</p>"
    head = (f"<tr><th>{'model' if first == 'model' else 'key'}</th><th>requests</th><th>errors</th>"
            "<th>prompt tokens</th><th>completion tokens</th><th>cost</th><th>currency</th></tr>")  # fmt: skip
    body = "".join(
        f"<tr><td>{escape(str(r.get(first) or '-'))}</td><td class=n>{r['requests']}</td><td class=n>{r['errors']}"
        f"</td><td class=n>{r['prompt_tokens']}</td><td class=n>{r['completion_tokens']}</td>"
        f"<td class=n>{escape(r['cost'])}</td><td>{escape(r['currency'])}</td></tr>"
        for r in rows
    )
    return f'<table class="usage-{first}">{head}{body}</table>'


def _limit(value: int) -> str:
    return "unlimited" if not value else f"{value:,}/min"


def limits_section(view) -> str:
    s = view["session"]
    rows = [("tenant", s.tenant_limits), (f"key {s.key_name}", s.key_limits)]
    rows += [(f"{m['model']}: {scope.replace('_', ' ')}", limits) for m in view["models"]
             for scope, limits in m["rate_limits"].items() if any(limits.values())]  # fmt: skip
    body = "".join(
        f"<tr><td>{escape(name)}</td><td class=n>{_limit(lim['requests_per_minute'])}</td>"
        f"<td class=n>{_limit(lim['tokens_per_minute'])}</td></tr>"
        for name, lim in rows
    )
    return (f'<section id="limits"><h2>Rate limits</h2><table><tr><th>scope</th><th>requests</th><th>tokens</th>'
            f"</tr>{body}</table></section>")  # fmt: skip


def budgets_section(view) -> str:
    """Each capped budget of the tenant and of this key: cap, spent in the current period, left, renewal."""
    currencies = sorted({m["pricing"]["currency"] for m in view["models"]})
    unit = escape(", ".join(currencies)) if currencies else "(the deployment's currency)"
    rows = []
    for b in view["budgets"]:
        units = (("tokens", b["tokens"], b["spent_tokens"], b["left_tokens"]),
                 (f"amount {unit}", b["amount"], b["spent_amount"], b["left_amount"]))  # fmt: skip
        for what, cap, spent, left in units:
            if left is not None:
                rows.append(f'<tr class="budget"><td>{escape(b["scope"])}</td><td>{escape(b["period"])}</td>'
                            f"<td>{what}</td><td class=n>{escape(str(cap))}</td><td class=n>{escape(str(spent))}</td>"
                            f'<td class=n>{escape(str(left))}</td><td>{escape(b["renews_at"])}</td></tr>')  # fmt: skip
    if not rows:
        return '<section id="budgets"><h2>Spend budgets</h2><p>No spend budget is set.</p></section>'
    return ('<section id="budgets"><h2>Spend budgets</h2><table><tr><th>scope</th><th>period</th><th>unit</th>'
            "<th>budget</th><th>spent</th><th>left</th><th>renews (UTC)</th></tr>"
            f'{"".join(rows)}</table></section>')  # fmt: skip


def models_section(view) -> str:
    base = escape(view["base_url"])
    items = []
    for m in view["models"]:
        name = escape(m["model"])
        price = m["pricing"]
        body = f'{{"model": "{name}", "messages": [{{"role": "user", "content": "Hello"}}]}}'
        curl = (f'curl {base}/chat/completions \\\n  -H "Authorization: Bearer $TOKENFACTORY_API_KEY" \\\n'
                f"  -H 'Content-Type: application/json' \\\n  -d '{body}'")  # fmt: skip
        sdk = ("import os\nfrom openai import OpenAI\n\n"
               f'client = OpenAI(base_url="{base}", api_key=os.environ["TOKENFACTORY_API_KEY"])\n'
               f'answer = client.chat.completions.create(\n    model="{name}",\n'
               '    messages=[{"role": "user", "content": "Hello"}],\n)\n'
               "print(answer.choices[0].message.content)")  # fmt: skip
        items.append(f'<div class="model"><h3>{name}</h3><p>price per 1M tokens: input '
                     f'{escape(price["input_per_1m"])} / output {escape(price["output_per_1m"])} '
                     f'{escape(price["currency"])}</p>'
                     f"<pre>{curl}</pre><pre>{sdk}</pre></div>")  # fmt: skip
    body = "".join(items) or "<p>No model is shared with this tenant yet.</p>"
    return f'<section id="models"><h2>Models</h2>{body}</section>'


def keys_section(view, csrf) -> str:
    rows = "".join(
        f"<tr><td>{escape(k['name'])}</td><td><code>{escape(k['prefix'])}...</code></td><td>{escape(k['scope'])}</td>"
        f"<td>{escape(k['created_at'] or '')}</td><td>{escape(k['last_used_at'] or 'never')}</td><td>"
        f'<form class="inline" method="post" action="/portal/keys/{escape(k["name"])}/revoke">'
        f'<input type="hidden" name="csrf" value="{csrf}"><button type="submit" class="revoke" '
        f'data-key="{escape(k["name"])}">Revoke</button></form></td></tr>'
        for k in view["keys"]
    )
    return (f'<section id="keys"><h2>Keys</h2><table><tr><th>name</th><th>prefix</th><th>scope</th><th>created</th>'
            f"<th>last used</th><th></th></tr>{rows}</table>"
            f'<form method="post" action="/portal/keys" autocomplete="off"><input type="hidden" name="csrf" '
            f'value="{csrf}"><label>New key name <input name="name" id="new-key-name" required '
            f'pattern="[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}"></label> <button type="submit" id="create-key">Create key'
            "</button></form></section>")  # fmt: skip
