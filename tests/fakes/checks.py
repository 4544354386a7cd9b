"""A compile whose rendered tree fails one of its checks, as a real defect would make it fail."""

from __future__ import annotations


def fail_check(monkeypatch, name: str, description: str) -> None:
    """Make the staged tree's check ``name`` fail with ``description``; the others run for real."""
    from c2s_pipeline.assets import publish as publish_stage
    from c2s_pipeline.validate import check_tree

    def failing(*args, **kwargs):
        outcomes = check_tree(*args, **kwargs)
        for outcome in outcomes:
            if outcome.name == name:
                outcome.passed, outcome.description = False, description
        return outcomes

    monkeypatch.setattr(publish_stage, "check_tree", failing)
