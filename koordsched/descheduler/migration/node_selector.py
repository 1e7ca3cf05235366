"""``MigrationControllerArgs.nodeSelector``: a label selector as a string (equality-based)."""

from __future__ import annotations


class NodeSelectorSyntaxError(ValueError):
    pass


def parse_node_selector(text: str) -> list[tuple[str, str, str]]:
    """``MigrationControllerArgs.nodeSelector``, Kubernetes' equality-based selector syntax:
    ``k=v``, ``k==v``, ``k!=v``, ``k`` (exists), ``!k`` (does not exist), comma-separated.
    Set-based terms (``in``, ``notin``) are refused rather than misread."""
    out: list[tuple[str, str, str]] = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        if " in " in raw or " notin " in raw or "(" in raw:
            raise NodeSelectorSyntaxError(
                f"set-based requirement {raw!r} is not supported, use k=v, k!=v, k or !k"
            )
        if "!=" in raw:
            k, v = raw.split("!=", 1)
            out.append((k.strip(), "!=", v.strip()))
        elif "==" in raw or "=" in raw:
            k, v = raw.split("==", 1) if "==" in raw else raw.split("=", 1)
            out.append((k.strip(), "=", v.strip()))
        elif raw.startswith("!"):
            out.append((raw[1:].strip(), "!", ""))
        else:
            out.append((raw, "exists", ""))
        if not out[-1][0]:
            raise NodeSelectorSyntaxError(f"requirement {raw!r} has no key")
    return out


def selector_matches(terms: list[tuple[str, str, str]], labels: dict[str, str]) -> bool:
    for key, op, value in terms:
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!" and key in labels:
            return False
    return True
