"""Hook points for what is built on the ledger (the extractor, dreaming). Sent after the rows are committed
(`transaction.on_commit`), so a receiver always reads what the signal announces.

- `assistant_turn_persisted(sender, session_id, workspace_id, turn_id, seq)`: an assistant message was appended.
- `assistant_turns_persisted(sender, session_id, workspace_id, turns)`: the same, once per append that persisted
  any, with `turns` the (turn_id, seq) of each, in seq order. A receiver with per-batch work (the extractor's
  trigger) listens to this one, so an import of many turns costs it one call, not one a turn.
- `session_stopped(sender, session_id, workspace_id, session_type, parent_session_id)`: a session stopped.

Receivers must be quick or hand the work to the task cluster: they run inside the caller's request.
"""

from __future__ import annotations

from django.dispatch import Signal

assistant_turn_persisted = Signal()
assistant_turns_persisted = Signal()
session_stopped = Signal()
