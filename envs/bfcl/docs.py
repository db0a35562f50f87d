"""BFCL's function documents as the policy reads them.

The package's documents are JSON, and every function of an app repeats the app's own
paragraph ("This tool belongs to ..."): a task's documents run to 4,790 tokens at the median
(SmolLM2's tokenizer, the warm start's 120 training tasks), most of a demonstration. The
signature list says the same in about a quarter of the tokens: the app's paragraph once, then per
function its signature (argument types, defaults of the optional ones, the fields it returns),
its description, and one line per argument. Harnesses choose: `{function_list}` (this) or
`{functions}` (the JSON documents, one per line).
"""

from __future__ import annotations

import json

SPLIT = " Tool description: "  # the package's documents: "<app paragraph> Tool description: <function>"


def _argument(name: str, spec: dict, required: set[str]) -> str:
    out = f"{name}: {spec.get('type', 'any')}"
    return out if name in required else f"{out} = {json.dumps(spec.get('default'))}"


def function_list(docs: list[dict] | tuple[dict, ...]) -> str:
    """The documents as a signature list, each app's paragraph once before its first function."""
    lines, apps = [], set()
    for doc in docs:
        app, _, description = doc.get("description", "").partition(SPLIT)
        if not description:  # no app paragraph: the whole text describes the function
            app, description = "", app
        if app and app not in apps:
            apps.add(app)
            lines.append(f"# {app.strip()}")
        params = doc.get("parameters") or {}
        props, required = params.get("properties") or {}, set(params.get("required") or [])
        returns = list(((doc.get("response") or {}).get("properties") or {}))
        signature = f"{doc['name']}({', '.join(_argument(n, s, required) for n, s in props.items())})"
        lines.append(f"{signature}{' -> ' + ', '.join(returns) if returns else ''}: {description.strip()}")
        lines += [f"  {n}: {' '.join(str(s.get('description', '')).split())}" for n, s in props.items()]
    return "\n".join(lines)
