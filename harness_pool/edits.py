"""Builders of harness edits (harness_pool/patch.py formats) for the benchmarks' offline operators."""

from __future__ import annotations


def skill_edit(name: str, text: str) -> dict:
    return {"op": "add_skill", "name": name, "text": text}


def recovery_edit(message: str, **when) -> dict:
    return {"op": "add_recovery_rule", "when": when, "message": message}


def code_hook_edit(at: str, name: str, source: str) -> dict:
    return {"op": "add_code_hook", "hook": {"at": at, "name": name, "source": source}}
