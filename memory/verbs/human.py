"""The human views of the verbs' results: what `compozy <noun> <verb>` prints without `-o json`, declared beside the
verbs (each `Verb.human`) so that the declarations every surface is generated from depend on no surface. The CLI
only chooses between this view and the JSON document, and escapes what it prints (`memory/cli/render.py: emit`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], *, max_width: int = 48) -> str:
    """A plain aligned table; long cells are cut with an ellipsis so rows stay on one line."""

    def cell(value: Any) -> str:
        text = "-" if value is None or value == "" else str(value)
        text = " ".join(text.split())
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def when(value: str | None, missing: str = "-") -> str:
    """A stored RFC 3339 instant as every view prints it, to the second and marked UTC (the inspector shows local
    time, so an unmarked time in a terminal would be read as local)."""
    return f"{value[:19].replace('T', ' ')} UTC" if value else missing


def _scope_label(item: dict[str, Any]) -> str:
    """`agent:<name>:<tier>` with only the parts that are known (never `agent:None:None`)."""
    if item.get("scope") == "agent":
        return ":".join(["agent", *(str(part) for part in (item.get("agent_name"), item.get("agent_tier")) if part)])
    return item.get("scope") or "-"


def human_write(document: dict[str, Any], verbose: int = 0) -> str:
    """One line: op, file, decision id (and where, and whether it landed); the rule trace with -v."""
    decision = document["decision"]
    status = "dry run, nothing written" if document.get("dry_run") else (
        "applied" if document.get("applied") else "not applied")
    line = (f"{decision['op']}  {decision['target_filename'] or '-'}  {decision['id']}  "
            f"[{_scope_label(decision)}]  {status}")
    if not verbose:
        return line
    return "\n".join([
        line,
        f"reason: {decision['reason']}",
        "",
        table([(e["name"], "pass" if e["passed"] else "-", e["reason"], e.get("target"))
               for e in decision["rule_trace"]], ["rule", "hit", "reason", "target"], max_width=70),
    ])


def human_resolve(document: dict[str, Any]) -> str:
    """One line per decision the resolution made."""
    lines = [f"{document['filename']}: keep {document['keep']}"]
    lines.extend("  " + human_write(write) for write in document["writes"])
    return "\n".join(lines)


def human_sync(document: dict[str, Any]) -> str:
    lines = _human_root_sync(document)
    for agent in document.get("agents", []):
        lines.append(f"agent {agent['agent_name']} (global tier):")
        lines.extend("  " + line for line in _human_root_sync(agent))
    return "\n".join(lines)


def _human_root_sync(document: dict[str, Any]) -> list[str]:
    lines = [f"{document['path']} ⇄ {document['remote']}" + (" (new repository)" if document["initialized"] else "")]
    if document["hand_edits"]:
        lines.append(f"recorded {len(document['hand_edits'])} hand edit(s) first")
    lines.append(f"committed {len(document['committed'])} decision(s)")
    lines.extend(f"  {c['decision_id']}  {c['op']}  {c['filename']}" for c in document["committed"][:20])
    if len(document["committed"]) > 20:
        lines.append(f"  … and {len(document['committed']) - 20} more")
    lines.append(f"pulled {document['pulled']} commit(s): {len(document['arrived'])} file(s) changed, "
                 f"{len(document['reconciled'])} decision(s) of origin sync")
    for conflict in document["conflicts"]:
        lines.append(f"CONFLICT {conflict['filename']}: before ======= {conflict['ours']}; after it "
                     f"{conflict['theirs']}\n  resolve: {conflict['resolve']}")
    lines.append("pushed" if document["pushed"] else
                 "not pushed: resolve the conflicts, then sync again" if document["conflicts"] else "nothing pushed")
    return lines


def human_revert(document: dict[str, Any]) -> str:
    decision = document["decision"]
    status = "dry run, nothing written" if document.get("dry_run") else (
        "reverted" if document.get("reverted") else "already reverted")
    return (f"{decision['op']}  {decision['target_filename']}  [{_scope_label(decision)}]  {status}\n"
            f"decision {decision['id']} reverts {decision['reverts']}")


def human_list(document: dict[str, Any]) -> str:
    rows = [(m["filename"], _scope_label(m), m["type"], when(m["updated_at"], ""), m["name"])
            for m in document["memories"]]
    page = document["page"]
    warning = f"warning: {document['warning']}\n" if document.get("warning") else ""
    if not rows:
        return warning + "No memories."
    footer = f"\n{len(rows)} of {page['total']} shown"
    if page["has_more"]:
        footer += f"; next page: --cursor {page['next_cursor']}"
    return warning + table(rows, ["filename", "scope", "type", "updated", "name"]) + footer


def human_show(document: dict[str, Any]) -> str:
    memory = document["memory"]
    summary = memory["summary"]
    header = [
        f"# {summary['name']}",
        f"{summary['description']}",
        "",
        f"file:     {memory['path']}",
        f"type:     {summary['type']}    scope: {_scope_label(summary)}",
        f"updated:  {when(summary['updated_at'])}    created: {when(summary['created_at'])}",
        "",
    ]
    return "\n".join(header) + "\n" + memory["content"]


def human_decisions(document: dict[str, Any]) -> str:
    rows = [(d["id"], d["op"], d["origin"], d["target_filename"], _scope_label(d),
             when(d["decided_at"], ""), "yes" if d["applied_at"] else "NO")
            for d in document["decisions"]]
    if not rows:
        return "No decisions."
    page = document["page"]
    footer = f"\n{len(rows)} of {page['total']} shown"
    if page["has_more"]:
        footer += f"; next page: --cursor {page['next_cursor']}"
    return table(rows, ["id", "op", "origin", "file", "scope", "decided", "applied"]) + footer


def human_decision(document: dict[str, Any]) -> str:
    d = document["decision"]
    lines = [
        f"decision {d['id']}",
        f"op:       {d['op']} ({d['source']}, confidence {d['confidence']})",
        f"file:     {d['target_filename']}  [{_scope_label(d)}]",
        f"origin:   {d['origin']}" + (f"  session {d['session_id']}" if d.get("session_id") else ""),
        f"reason:   {d['reason']}",
        f"decided:  {when(d['decided_at'])}    applied: {when(d['applied_at'], 'NOT APPLIED')}",
    ]
    if d.get("reverts"):
        lines.append(f"reverts:  {d['reverts']}")
    lines += ["", table([(e["name"], "pass" if e["passed"] else "-", e["reason"], e.get("target"))
                         for e in d["rule_trace"]], ["rule", "hit", "reason", "target"], max_width=70)]
    if d.get("llm_trace"):
        lines += ["", "llm trace: " + json.dumps(d["llm_trace"], ensure_ascii=False)]
    if d.get("post_content"):
        lines += ["", "--- post content ---", d["post_content"].rstrip()]
    return "\n".join(lines)


def human_history(document: dict[str, Any]) -> str:
    rows = [(when(h["ts"], ""), h["operation"], h["filename"], _scope_label(h), h["actor"])
            for h in document["history"]]
    if not rows:
        return "No history."
    page = document.get("page") or {}
    footer = f"; next page: --cursor {page['next_cursor']}" if page.get("has_more") else ""
    shown = f"\n{len(rows)} shown{footer}" if footer else ""
    return table(rows, ["time", "operation", "file", "scope", "actor"]) + shown


def human_health(document: dict[str, Any]) -> str:
    lines = [
        f"status:               {document['status']}",
        f"reason:               {document['reason']}",
        f"global files:         {document['global_files']}",
        f"workspace files:      {document['workspace_files']}",
        f"workspaces known:     {document['workspace_count']}",
        f"indexed files:        {document['indexed_files']}",
        f"unindexed files:      {document['unindexed_files']}",
        f"modified files:       {document['modified_files']}",
        f"orphaned rows:        {document['orphaned_files']}",
        f"unapplied decisions:  {document['unapplied_decisions']}",
        f"last reindex:         {when(document['last_reindex'], 'never')}",
        f"operations:           {document['operation_count']} (last {when(document['last_operation_at'], 'never')})",
        f"generation:           {document['generation']}",
        "full-text b-trees:    " + ", ".join(f"{index} {count}" for index, count in document["fts_segments"].items()),
    ]
    by_scope = ["{}: {}".format(scope, ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items())))
                for scope, counts in sorted(document.get("file_counts", {}).items()) if counts]
    if by_scope:
        lines.append(f"files by type:        {'; '.join(by_scope)}")
    extractor = document.get("extractor") or {}
    if "inbox_files" in extractor:
        lines.append(f"extractor:            {extractor['status']} ({extractor['provider']}), "
                     f"{extractor['inbox_files']} staged, {extractor['failures']} failures")
    for item in document["invalid_files"]:
        lines.append(f"invalid:              {item['root_key']} {item['filename']} ({item['reason']})")
    if document.get("all_workspaces") and document.get("workspaces"):
        rows = [(w["path"], w["id"], w["status"], w["files"], w["drift_files"], w["unapplied_decisions"])
                for w in document["workspaces"]]
        lines += ["", table(rows, ["workspace", "id", "status", "files", "drift", "unapplied"], max_width=60)]
    return "\n".join(lines)


def human_reindex(document: dict[str, Any]) -> str:
    rows = [(r["root_key"], r["files"], r["indexed"], len(r["external_decisions"]), len(r["invalid"]))
            for r in document["roots"]]
    lines = [table(rows, ["root", "files", "indexed", "hand edits", "invalid"], max_width=70), "",
             f"reindexed {document['indexed']} of {document['files']} file(s); "
             f"{document['external_decisions']} hand edit(s) recorded; generation {document['generation']}"]
    for item in document["invalid"]:
        lines.append(f"invalid: {item['root_key']} {item['filename']} ({item['reason']})")
    return "\n".join(lines)


# (letter, why_recalled key, what it measures) for the WHY column of a search.
_WHY_PARTS = (("w", "unicode", "word match"), ("t", "trigram", "substring match"), ("m", "semantic", "meaning"),
              ("k", "token", "token match"), ("r", "recency", "recency"), ("s", "signal", "recalled before"))


def human_search(document: dict[str, Any]) -> str:
    if document.get("skipped"):
        return "Query skipped: it has no meaningful word (only stopwords or one-letter words)."
    warning = f"warning: {document['warning']}\n" if document.get("warning") else ""
    if not document["results"]:
        return warning + "No memories matched."
    rows = []
    for hit in document["results"]:
        memory = hit["memory"]
        why = hit["why_recalled"]
        shadow = hit["shadowed_by"]
        note = f"shadowed by {shadow['scope']}:{shadow['filename']}" if shadow else (hit["banner"] and "stale" or "")
        rows.append((f"{hit['score']:.3f}", memory["filename"], _scope_label(memory),
                     " ".join(f"{letter}{why[part]:.2f}" for letter, part, _ in _WHY_PARTS), note, hit["snippet"]))
    # Every part of the score is shown, so that WHY adds up to SCORE, and the letters are spelled out once below
    # the table.
    legend = "why: " + ", ".join(f"{letter} {words}" for letter, _, words in _WHY_PARTS) + "; they add up to the score"
    return (warning + table(rows, ["score", "filename", "scope", "why", "note", "snippet"], max_width=60) + "\n"
            + legend)


def human_snapshot_log(document: dict[str, Any]) -> str:
    rows = [(item["position"], item["source"], _scope_label(item), item["filename"]) for item in document["injections"]]
    head = (f"session {document['session_id']} at generation {document['generation']}"
            + (f" (inherited from {document['parent_session_id']})" if document.get("parent_session_id") else ""))
    return head + "\n" + (table(rows, ["#", "source", "scope", "filename"]) if rows else "Nothing was injected.")


def human_compact(document: dict[str, Any]) -> str:
    rows = [(i["index"], i["segments_before"], i["segments_after"], i["steps"]) for i in document["indexes"]]
    steps = sum(i["steps"] for i in document["indexes"])
    head = "every full-text index was already one b-tree" if not steps else f"merged in {steps} step(s)"
    return table(rows, ["index", "b-trees before", "after", "steps"]) + "\n" + head


def human_prune(document: dict[str, Any]) -> str:
    verb = "would prune" if document["dry_run"] else "pruned"
    head = (f"{verb} {document['pruned']} applied decision(s) older than {document['days']} days "
            f"(before {when(document['cutoff'])}); kept {document['kept']} that existing files need")
    rows = [(r["root_key"], r["pruned"], r["kept"]) for r in document["roots"]]
    return head if not rows else head + "\n" + table(rows, ["root", "pruned", "kept"], max_width=70)


def human_snapshot(document: dict[str, Any]) -> str:
    return document["text"].rstrip("\n")


def _dream_line(run: dict[str, Any]) -> str:
    decision = f"{run['decision_op']} {run['decision_id']}" if run.get("decision_id") else "no decision"
    error = f"; {run['error']['code']} at {run['error'].get('step') or '-'}" if run.get("error") else ""
    return (f"run {run['id']}  {run['status']}  {run['trigger']}{' (forced)' if run['forced'] else ''}  "
            f"{run['candidate_count']} candidate(s), {run['promoted']} promoted, {decision}{error}")


def _gate_rows(gates: list[dict[str, Any]]) -> str:
    rows = [(g["gate"], "skipped" if g["skipped"] else "pass" if g["passed"] else "BLOCKS", g["detail"],
             g["waiting_for"]) for g in gates]
    return table(rows, ["gate", "state", "seen", "waiting for"], max_width=70)


def human_dream_trigger(document: dict[str, Any]) -> str:
    if not document["triggered"]:
        return f"not triggered: the {document['reason']} gate blocks ({document['detail']})"
    run = document["dream"]
    return f"triggered\n{_dream_line(run)}\n\n{_gate_rows(run['gates'])}"


def human_dream_status(document: dict[str, Any]) -> str:
    schedule = document["schedule"]
    lines = [
        f"workspace {document['workspace_id']}: dreaming {'enabled' if document['enabled'] else 'DISABLED'}, "
        f"{'ready to run' if document['ready'] else 'waiting'}",
        f"last successful run: {when(document['last_success_at'], 'never')}; the schedule checks every "
        f"{schedule['every_minutes']} min (next {when(schedule['next_check_at'], 'when the cluster starts')})",
        "",
        _gate_rows(document["gates"]),
    ]
    if document.get("running"):
        lines += ["", "running: " + _dream_line(document["running"])]
    if document.get("latest"):
        lines += ["", "latest:  " + _dream_line(document["latest"])]
    return "\n".join(lines)


def human_dream_list(document: dict[str, Any]) -> str:
    rows = [(r["id"], r["status"], r["trigger"] + (" forced" if r["forced"] else ""), r["candidate_count"],
             r["promoted"], r["decision_op"] or "-", when(r["started_at"], ""))
            for r in document["dreams"]]
    if not rows:
        # An empty list alone says nothing about why; status says which gate waits for what.
        return "No dreaming runs yet. `compozy memory dream status` shows what each gate is waiting for."
    return table(rows, ["run", "status", "trigger", "candidates", "promoted", "decision", "started"])


def human_dream_show(document: dict[str, Any]) -> str:
    run = document["dream"]
    lines = [_dream_line(run), f"started {when(run['started_at'])}, finished {when(run['finished_at'])}; timings "
             + ", ".join(f"{k} {v:g}" for k, v in run["timings"].items()), "", _gate_rows(run["gates"]), ""]
    rows = [(f"{c['score']:.3f}", c["filename"], c["recall_count"], f"{c['parts']['relevance']:.2f}", c["name"])
            for c in run["candidates"]]
    lines.append(table(rows, ["score", "file", "recalls", "ema", "name"]) if rows else "No candidates.")
    if document.get("artifact_text"):
        lines += ["", f"--- {run['artifact']} ---", document["artifact_text"].rstrip()]
    return "\n".join(lines)


# ----- sessions -------------------------------------------------------------------------------------------------


def human_session_start(document: dict[str, Any]) -> str:
    """The same bytes `memory snapshot` prints: the section the session's prompt begins with."""
    return document["snapshot"]["text"].rstrip("\n")


def human_session_resume(document: dict[str, Any]) -> str:
    return document["text"].rstrip("\n")


def human_session_append(d: dict[str, Any]) -> str:
    span = f" (seq {d['first_seq']}–{d['last_seq']})" if d["appended"] else ""
    return (f"appended {d['appended']} event(s) to {d['session_id']}{span}"
            + (f"; {d['duplicates']} already imported, skipped" if d["duplicates"] else ""))


def human_session_compaction(c: dict[str, Any] | None) -> str:
    if c is None:
        return "no compaction"
    span = f" seq {c['from_seq']}–{c['to_seq']}" if c["from_seq"] is not None else ""
    return f"compaction: {c['reason']}{span}, {c['archived']} row(s) archived"


def human_session_usage(d: dict[str, Any]) -> str:
    session = d["session"]
    pressure = f"{d['pressure']:.1%}" if d["pressure"] is not None else "unknown (no context window)"
    return (f"{session['session_id']}: {session['last_usage']} of {session['context_window'] or '?'} tokens, "
            f"pressure {pressure} (threshold {d['threshold']:.0%})\n{human_session_compaction(d['compaction'])}")


def human_session_stop(d: dict[str, Any]) -> str:
    checkpoint = d["checkpoint"]
    note = "checkpoint update queued" if checkpoint["queued"] else f"no checkpoint update ({checkpoint['reason']})"
    return f"stopped {d['session']['session_id']} after {d['session']['events']} event(s); {note}"


def _session_lines(s: dict[str, Any]) -> list[str]:
    return [
        f"session   {s['session_id']}  [{s['type']}, {s['status']}]"
        + (f"  sub-agent of {s['parent_session_id']}" if s["parent_session_id"] else ""),
        f"agent     {s['agent_name'] or '-'}    workspace {s['workspace_id'] or '-'}",
        f"started   {when(s['started_at'])}    stopped {when(s['stopped_at'])}",
        f"events    {s['events']} ({s['archived']} archived)    usage {s['last_usage'] or '-'} of "
        f"{s['context_window'] or '-'}" + (f" ({s['pressure']:.1%})" if s["pressure"] is not None else ""),
        f"snapshot  {s['snapshot_sha256']}",
    ]


def human_session_show(d: dict[str, Any]) -> str:
    lines = _session_lines(d["session"])
    lines += ["", "compaction coverage:"]
    lines.append(table([(c["from_seq"], c["to_seq"], c["decision_id"], when(c["updated_at"]))
                        for c in d["coverage"]], ["from", "to", "decision", "updated"])
                 if d["coverage"] else "  none")
    lines += ["", "checkpoint decisions:"]
    lines.append(table([(x["id"], x["op"], when(x["decided_at"]), "yes" if x["applied_at"] else "NO")
                        for x in d["checkpoint_decisions"]], ["id", "op", "decided", "applied"])
                 if d["checkpoint_decisions"] else "  none")
    return "\n".join(lines)


def human_session_events(d: dict[str, Any]) -> str:
    if not d["events"]:
        return "No events."
    # The column is named: an unnamed "-" beside every row that is not archived would read as a value of KIND or
    # CONTENT.
    rows = [(e["seq"], e["turn_id"], e["kind"], "yes" if e["archived"] else "no", e["content"])
            for e in d["events"]]
    footer = f"\nmore: --after-seq {d['next_after_seq']}" if d["has_more"] else ""
    return table(rows, ["seq", "turn", "kind", "archived", "content"], max_width=70) + footer


def human_session_history(d: dict[str, Any]) -> str:
    head = f"session {d['session_id']}: {d['rows']} ledger rows kept ({d['archived']} archived)"
    if not d["events"]:
        return head + "\nNo operations recorded."
    rows = [(when(e["ts"], ""), e["op"], e["target"], e["actor"],
             ", ".join(f"{key}={value}" for key, value in sorted(e["metadata"].items())
                       if isinstance(value, (str, int, float, bool))))
            for e in d["events"]]
    page = d["page"]
    footer = f"\n{len(rows)} of {page['total']} shown"
    if page["has_more"]:
        footer += f"; next page: --cursor {page['next_cursor']}"
    return head + "\n" + table(rows, ["time", "operation", "target", "actor", "details"], max_width=60) + footer


def human_session_list(d: dict[str, Any]) -> str:
    if not d["sessions"]:
        return "No sessions."
    rows = [(s["session_id"], s["type"], s["status"], s["agent_name"], s["events"], s["archived"],
             when(s["started_at"], "")) for s in d["sessions"]]
    page = d["page"]
    footer = f"\n{len(rows)} of {page['total']} shown"
    if page["has_more"]:
        footer += f"; next page: --cursor {page['next_cursor']}"
    return table(rows, ["session", "type", "status", "agent", "events", "archived", "started"]) + footer
