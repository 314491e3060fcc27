"""The checkpoint never carries Compozy's own blocks: a <compozy_memory> section a client put in the first user
message (as Claude Code's SessionStart delivers it) is neither the goal, a pending ask nor a relevant file."""

from __future__ import annotations

from memory.domain import checkpoint

INJECTED = ('<compozy_memory>\n<compozy_memory_index scope="workspace">\n# Memory Index\n'
            "- [Staging URL](project_staging_url.md) — where staging lives\n</compozy_memory_index>\n"
            "</compozy_memory>\n")


def test_a_checkpoint_from_a_first_message_holding_an_injected_block_keeps_the_real_request():
    messages = [
        {"seq": 1, "kind": "user_message",
         "content": INJECTED + "Fix the Safari crash in CheckoutSummary when the cart is empty."},
        {"seq": 2, "kind": "assistant_message", "content": "Fixed: CheckoutSummary now handles an empty cart."},
    ]
    body = checkpoint.build(messages, "", max_bytes=25_600, max_lines=200)
    assert "## Goal\n- Fix the Safari crash in CheckoutSummary when the cart is empty." in body
    assert "compozy_memory" not in body and "project_staging_url.md" not in body
