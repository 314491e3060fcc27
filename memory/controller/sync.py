"""`memory sync`: a memory root (the global one, `$COMPOZY_HOME/memory`) kept as a git repository that follows one
person across machines.

One run, in order:
1. What changed on disk unseen becomes decisions first (`freshness.catch_up`, origin `file`).
2. **Commit**: one git commit per decision applied in the root since the last sync (`memory_state`,
   `sync_seq:<hash of the root key>`), in `seq` order, its message naming the decision id, op and file, its tree
   the decision's post content (not whatever the file holds now), written by one `git fast-import` so a thousand
   decisions are one process. A decision that changes nothing git holds (one of origin `sync`, or the watcher's
   record of what the last pull brought) makes no commit. Machine state is never committed: the root's
   `.gitignore` keeps `_system/`, `_inbox/`, `MEMORY.md` and temp files out, and only memory documents are ever
   written into a commit.
3. **Pull with rebase** (`git fetch`, then `git rebase --autostash`): this machine's commits go on top of what the
   remote has. A conflicting file is left with git's markers and committed as it is, so the rebase completes and
   nothing of either side is lost; a file with markers is never memory (health lists it, reason
   `conflict_markers`, and its previous version stays recalled) until `memory resolve` decides it. Before
   `=======` is the remote's version, after it this machine's.
4. **Reconcile** what arrived through the controller: every file that differs from its catalog row becomes a
   decision of origin `sync` (`freshness.catch_up(origin=sync, force=True)`).
5. **Push**, unless a conflict waits for `memory resolve` (the next sync pushes the resolution with it). A push
   refused because another machine pushed meanwhile goes back to 3, a few times.

Git is the system's, as a subprocess (`memory/store/git.py`): Compozy stores and prints no credentials.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from compozy.config import Config
from memory.catalog.state import root_state_key, set_state_value, state_value
from memory.domain.document import conflict_marker_line
from memory.domain.enums import MUTATING_OPS, Op, Origin, Scope
from memory.domain.errors import SyncFailed, ValidationError
from memory.domain.models import ScopeRef
from memory.domain.names import INDEX_FILENAME, is_memory_document_name
from memory.models import Decision
from memory.store import files, git, sharing

from .best_effort import best_effort_write
from .freshness import catch_up
from .lock import sync_lock

BRANCH = "main"
# An agent's global tier ($COMPOZY_HOME/agents/<name>/memory) is the person's too: it syncs with the same remote, in
# a repository of its own whose branch is `agents/<name>`.
AGENT_BRANCHES = "agents/"
REMOTE = "origin"
# What of a memory root stays on this machine (the global root has no checkpoint: that is a workspace's).
IGNORED = ("_system/", "_inbox/", INDEX_FILENAME, f"*{files.TEMP_SUFFIX}")
IGNORE_HEADER = ("# Written by Compozy's memory sync: machine state stays out of git, memory files are synced. Lines\n"
                 "# you add are kept; missing ones are appended on the next sync.\n")
# A push refused because another machine pushed in between is retried after pulling again, this many times.
PUSH_ATTEMPTS = 3


@dataclass
class Commit:
    decision_id: str
    op: str
    filename: str


@dataclass
class SyncConflict:
    filename: str
    # What each side of the markers is: before ======= the remote's version, after it this machine's.
    ours: str
    theirs: str


@dataclass
class SyncReport:
    root_key: str
    path: str
    remote: str
    initialized: bool = False
    hand_edits: list[str] = field(default_factory=list)
    committed: list[Commit] = field(default_factory=list)
    pulled: int = 0
    arrived: list[str] = field(default_factory=list)
    reconciled: list[str] = field(default_factory=list)
    conflicts: list[SyncConflict] = field(default_factory=list)
    pushed: bool = False


def _git(root: Path, *args: str, stdin: bytes | None = None, step: str) -> git.GitResult:
    result = git.run(root, *args, stdin=stdin)
    if not result.ok:
        raise SyncFailed(
            f"git {step} failed in {root}: {(result.stderr or result.stdout).strip()[-600:]}. What was committed "
            "stays committed; run sync again once git can reach the remote.",
            details={"reason": f"git_{step.replace(' ', '_')}", "step": step, "path": str(root)})
    return result


def _state_key(root_key: str) -> str:
    return root_state_key("sync_seq", root_key)


def _last_seq(root_key: str) -> int:
    return state_value(_state_key(root_key)) or 0


def _record_seq(root_key: str, seq: int) -> None:
    best_effort_write(lambda: set_state_value(_state_key(root_key), seq), what="the sync position")


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id, not security


def _committed_tree(root: Path) -> dict[str, str]:
    """path → blob id of HEAD's files (empty on an unborn branch)."""
    listed = git.run(root, "ls-tree", "-r", "-z", "HEAD")
    tree: dict[str, str] = {}
    if listed.ok:
        for entry in listed.stdout.split("\0"):
            if entry:
                meta, path = entry.split("\t", 1)
                tree[path] = meta.split()[2]
    return tree


def _ident(root: Path) -> bytes:
    found = git.run(root, "var", "GIT_COMMITTER_IDENT")
    if found.ok and "<" in found.stdout:
        return found.stdout.rsplit(">", 1)[0].encode() + b">"
    return b"Compozy <compozy@localhost>"


def _pending(root_key: str, after: int) -> list[Decision]:
    """Applied decisions of the root after `after`, in seq order, up to the first one not applied yet (a held
    root's decisions wait; committing past one would commit them out of order)."""
    pending: list[Decision] = []
    for decision in (Decision.objects.filter(root_key=root_key, seq__gt=after).order_by("seq")
                     .only("id", "op", "origin", "target_filename", "post_content", "decided_at", "applied_at",
                           "seq", "reason")):
        if decision.applied_at is None:
            break
        pending.append(decision)
    return pending


def branch_of(ref: ScopeRef) -> str:
    return BRANCH if ref.scope is Scope.GLOBAL else AGENT_BRANCHES + ref.agent_name


def remote_agents(root: Path) -> list[str]:
    """The agents whose global tier the remote holds (branches `agents/<name>`), as the last fetch in the global
    root saw them."""
    listed = git.run(root, "for-each-ref", "--format=%(refname)", f"refs/remotes/{REMOTE}/{AGENT_BRANCHES}")
    prefix = f"refs/remotes/{REMOTE}/{AGENT_BRANCHES}"
    return sorted(line[len(prefix):] for line in listed.stdout.split("\n") if line.startswith(prefix))


def remote_url(root: Path) -> str | None:
    """The URL the root syncs with (as given: the input refuses one carrying a password)."""
    found = git.run(root, "remote", "get-url", REMOTE)
    return found.stdout.strip() if found.ok else None


def commit_decisions(ref: ScopeRef, root: Path) -> tuple[list[Commit], int | None]:
    """Step 2: one commit per applied decision since the last sync that changes what git holds. Returns the
    commits and the seq to record as synced (None when nothing was examined)."""
    decisions = _pending(ref.root_key, _last_seq(ref.root_key))
    if not decisions:
        return [], None
    tree = _committed_tree(root)
    head = git.run(root, "rev-parse", "-q", "--verify", "HEAD^{commit}")
    parent = head.stdout.strip() if head.ok else None
    ident = _ident(root)
    stream: list[bytes] = []
    commits: list[Commit] = []
    for decision in decisions:
        filename = decision.target_filename
        if decision.op not in MUTATING_OPS or not filename or not is_memory_document_name(filename) \
                or filename.startswith("_"):
            continue
        if decision.op == Op.DELETE:
            if filename not in tree:
                continue
            del tree[filename]
            change = b"D " + filename.encode() + b"\n"
        else:
            data = decision.post_content.encode("utf-8")
            blob = _blob_id(data)
            if tree.get(filename) == blob:
                continue
            tree[filename] = blob
            change = b"M 100644 inline " + filename.encode() + b"\ndata %d\n" % len(data) + data + b"\n"
        message = f"{decision.id} {decision.op} {filename}\n\n{decision.reason}\n".encode()
        when = int(decision.decided_at.timestamp())
        header = (b"commit refs/heads/" + branch_of(ref).encode() + b"\ncommitter " + ident + b" %d +0000\n" % when
                  + b"data %d\n" % len(message) + message)
        if parent and not commits:
            header += b"from " + parent.encode() + b"\n"
        stream.append(header + change + b"\n")
        commits.append(Commit(decision.id, str(decision.op), filename))
    if stream:
        _git(root, "fast-import", "--quiet", stdin=b"".join(stream) + b"done\n", step="fast-import")
        # The index follows the new commits; the files are already what the decisions wrote.
        _git(root, "reset", "-q", step="reset")
    return commits, decisions[-1].seq


def _ensure_repository(root: Path, remote: str | None, branch: str) -> tuple[bool, str]:
    initialized = False
    if not git.is_repository(root):
        if not remote:
            # The request lacks what it needs (a 400, exit 2), not a git step that failed (SyncFailed, a 502).
            raise ValidationError(
                "This memory root is not synced yet: the first sync needs the remote to sync with (a bare "
                "repository's path, or a private repository's URL).",
                details={"field": "remote", "reason": "no_remote"})
        _git(root, "init", "-q", "-b", branch, step="init")
        initialized = True
    sharing.ensure_ignore_file(root / ".gitignore", IGNORED, header=IGNORE_HEADER)
    current = git.run(root, "remote", "get-url", REMOTE)
    if remote and (not current.ok or current.stdout.strip() != git.redact(remote)):
        verb = "set-url" if current.ok else "add"
        _git(root, "remote", verb, REMOTE, remote, step=f"remote {verb}")
    elif not current.ok:
        raise SyncFailed(f"{root} has no remote named {REMOTE}: give the remote to sync with.",
                         details={"field": "remote", "reason": "no_remote"})
    url = git.redact(remote or current.stdout.strip())
    return initialized, url


def _commit_ignore_file(root: Path) -> None:
    """The .gitignore travels too, so every machine keeps the same things out."""
    if git.run(root, "status", "--porcelain", "--", ".gitignore").stdout.strip():
        _git(root, "add", "--", ".gitignore", step="add")
        _git(root, "commit", "-q", "-m", "compozy: keep machine state out of git", "--", ".gitignore", step="commit")


def _rebase_in_progress(root: Path) -> bool:
    return (root / ".git" / "rebase-merge").exists() or (root / ".git" / "rebase-apply").exists()


def _pull(root: Path, branch: str) -> tuple[int, list[str], list[SyncConflict]]:
    """Step 3. Returns (commits pulled, files the pull changed, conflicts left in files)."""
    _git(root, "fetch", "-q", REMOTE, step="fetch")
    upstream = f"refs/remotes/{REMOTE}/{branch}"
    if not git.run(root, "rev-parse", "-q", "--verify", upstream).ok:
        return 0, [], []  # an empty remote: nothing to pull
    before = git.run(root, "rev-parse", "-q", "--verify", "HEAD").stdout.strip()
    if not before:  # no commit here yet: take the remote's history as it is
        _git(root, "reset", "-q", upstream, step="reset")
        _git(root, "checkout", "-q", "--", ".", step="checkout")
        pulled = git.run(root, "rev-list", "--count", upstream).stdout.strip()
        changed = _git(root, "ls-tree", "-r", "--name-only", "HEAD", step="ls-tree").stdout.split("\n")
        return int(pulled or 0), [name for name in changed if name], []
    behind = int(_git(root, "rev-list", "--count", f"HEAD..{upstream}", step="rev-list").stdout.strip() or 0)
    if behind == 0:
        return 0, [], []
    conflicts: list[SyncConflict] = []
    result = git.run(root, "-c", "merge.conflictStyle=merge", "rebase", "-q", "--autostash", upstream)
    for _ in range(10_000):
        if result.ok or not _rebase_in_progress(root):
            break
        unmerged = [name for name in _git(root, "diff", "--name-only", "--diff-filter=U",
                                          step="diff").stdout.split("\n") if name]
        replaying = git.run(root, "log", "-1", "--format=%s", "REBASE_HEAD").stdout.strip()
        for name in unmerged:
            conflicts.append(SyncConflict(name, ours=f"{REMOTE}/{branch} (the remote's version)",
                                          theirs=f"this machine's {replaying or 'commit'}"))
        if unmerged:
            # Committed with its markers: the rebase completes and neither side is lost; the file is invalid
            # (never memory) until `memory resolve` decides it.
            _git(root, "add", "-A", "--", *unmerged, step="add")
            result = git.run(root, "-c", "core.editor=true", "rebase", "--continue")
        else:
            result = git.run(root, "rebase", "--skip")  # the commit became empty: the remote already had it
    if not result.ok or _rebase_in_progress(root):
        git.run(root, "rebase", "--abort")
        raise SyncFailed(f"git rebase onto {upstream} failed in {root}: {result.stderr.strip()[-600:]}",
                         details={"reason": "git_rebase", "step": "rebase", "path": str(root)})
    changed = [name for name in _git(root, "diff", "--name-only", before, "HEAD", step="diff").stdout.split("\n")
               if name]
    return behind, changed, conflicts


def sync_root(ref: ScopeRef, root: Path, config: Config, *, remote: str | None) -> SyncReport:
    branch = branch_of(ref)
    with sync_lock(config.memory.controller.lock_timeout):
        if not root.is_dir():
            files.make_scope_dirs(root, with_inbox=ref.scope is Scope.GLOBAL)
        initialized, url = _ensure_repository(root, remote, branch)
        report = SyncReport(root_key=ref.root_key, path=str(root), remote=url, initialized=initialized)
        report.hand_edits = catch_up(ref, root, config)
        commits, seq = commit_decisions(ref, root)
        report.committed = commits
        if seq is not None:
            _record_seq(ref.root_key, seq)
        _commit_ignore_file(root)
        for _attempt in range(PUSH_ATTEMPTS):
            pulled, changed, conflicts = _pull(root, branch)
            report.pulled += pulled
            report.arrived.extend(name for name in changed if name not in report.arrived)
            report.conflicts.extend(conflicts)
            if changed:
                report.reconciled.extend(catch_up(ref, root, config, origin=Origin.SYNC, force=True))
            if report.conflicts or _unresolved(root, report):
                return report
            if not git.run(root, "rev-parse", "-q", "--verify", "HEAD").ok:
                return report  # nothing here and nothing there: nothing to push
            pushed = git.run(root, "push", "-q", REMOTE, f"HEAD:refs/heads/{branch}")
            if pushed.ok:
                git.run(root, "branch", "-q", f"--set-upstream-to={REMOTE}/{branch}")
                report.pushed = True
                return report
            if "rejected" not in pushed.stderr and "fetch first" not in pushed.stderr:
                raise SyncFailed(f"git push failed in {root}: {pushed.stderr.strip()[-600:]}",
                                 details={"reason": "git_push", "step": "push", "path": str(root)})
        raise SyncFailed(f"git push was refused {PUSH_ATTEMPTS} times: another machine keeps pushing. Run sync again.",
                         details={"reason": "git_push_rejected", "step": "push", "path": str(root)})


def _unresolved(root: Path, report: SyncReport) -> bool:
    """A file left with markers by an earlier sync and not resolved yet: pushing would spread it. One `git grep`
    finds the candidates; the document parser's own rule confirms each."""
    found = git.run(root, "grep", "-l", "-e", "^<<<<<<< ", "--", "*.md")
    known = {conflict.filename for conflict in report.conflicts}
    for name in (line for line in found.stdout.split("\n") if line and line not in known):
        raw = files.read_bytes(root, name)
        if raw is not None and conflict_marker_line(raw.decode("utf-8", "replace")) is not None:
            report.conflicts.append(SyncConflict(name, ours="the remote's version (before =======)",
                                                 theirs="this machine's (after it)"))
    return bool(report.conflicts)
