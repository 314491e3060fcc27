"""Hook points for what is built on the ledger (the extractor, dreaming). Sent after the rows are committed
(`transaction.on_commit`), so a receiver always reads what the signal announces.

- `assistant_turns_persisted(sender, session_id, workspace_id, turns)`: assistant messages were appended; sent
  once per append that persisted any, with `turns` the (turn_id, seq) of each turn's last assistant row, in seq
  order. Once per append, not per turn, so an import of many turns costs a receiver (the extractor's trigger) one
  call.
- `session_stopped(sender, session_id, workspace_id, session_type, parent_session_id)`: a session stopped.

Receivers must be quick or hand the work to the task cluster: they run inside the caller's request.
"""

from __future__ import annotations

from django.dispatch import Signal

assistant_turns_persisted = Signal()
session_stopped = Signal()
