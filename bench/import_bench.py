"""`compozy import claude-code` over a large Claude Code folder, beside the same writes made one by one.

    .venv/bin/python bench/import_bench.py                          # 1,000 auto-memory files, 50 transcripts
    .venv/bin/python bench/import_bench.py --files 200 --transcripts 10 --rounds 1

The folder is generated (seeded) in the layout Claude Code writes: one project whose checkout is the bench's
workspace, `--files` auto-memory files of the four types (user and feedback go global, project and reference to the
workspace) and `--transcripts` transcripts of `--lines` lines (user prompts, assistant answers with tool calls,
tool results).

- product: `import_claude_code(sessions=True)` in-process, with its progress callback counting steps (a terminal
  gets the bar from the same callback)
- floor: the same memories written with `memory_write` in-process (the service behind `compozy memory write`),
  and the same transcripts' rows appended with `session_start` / `session_append` / `session_stop`: what the import
  does, without reading the folder, mapping projects or keeping its import records

Each run is a child process with a fresh COMPOZY_HOME; the two alternate for `--rounds` rounds so that both see the
same background load on a shared machine. Target: the product within 3x of the floor.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_RATIO = 3.0
TYPES = ("user", "feedback", "project", "reference")


def build_folder(base: Path, checkout: Path, files: int, transcripts: int, lines: int, seed: int) -> Path:
    """A Claude Code folder: memory files and transcripts with distinct words, so every memory is an `add`."""
    from memory.importers.claude_code import sanitize

    words = common.Words(seed)
    rng = random.Random(seed)
    root = base / "claude"
    project = root / "projects" / sanitize(str(checkout))
    memory = project / "memory"
    memory.mkdir(parents=True)
    index = []
    for number in range(files):
        memory_type = TYPES[number % 4]
        name = " ".join(words.words(3))
        body = " ".join(words.words(rng.randint(20, 60))) + "."
        filename = f"{memory_type}_{number:05d}.md"
        (memory / filename).write_text(
            f"---\nname: {name}\ndescription: {' '.join(words.words(8))}\ntype: {memory_type}\n---\n\n{body}\n")
        index.append(f"- [{name}]({filename}) — {memory_type}")
    (memory / "MEMORY.md").write_text("\n".join(index) + "\n")
    for number in range(transcripts):
        session = f"00000000-0000-4000-8000-{number:012d}"
        out = []
        for step in range(lines):
            uuid = f"{number:08d}-{step:04d}-4000-8000-000000000000"
            ts = f"2026-03-{1 + number % 28:02d}T{9 + step // 60:02d}:{step % 60:02d}:00.000Z"
            head = {"uuid": uuid, "parentUuid": None, "timestamp": ts, "sessionId": session, "cwd": str(checkout),
                    "isSidechain": False, "version": "2.1.1"}
            kind = step % 4
            if kind == 0:
                line = {"type": "user", **head, "message": {"role": "user", "content": " ".join(words.words(12))}}
            elif kind == 1:
                line = {"type": "assistant", **head, "message": {"role": "assistant", "content": [
                    {"type": "text", "text": " ".join(words.words(20))},
                    {"type": "tool_use", "id": f"toolu_{number}_{step}", "name": "Read",
                     "input": {"file_path": f"{checkout}/src/{words.words(1)[0]}.py"}}]}}
            elif kind == 2:
                line = {"type": "user", **head, "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{number}_{step - 1}",
                     "content": " ".join(words.words(30))}]}}
            else:
                line = {"type": "assistant", **head, "message": {"role": "assistant", "content": [
                    {"type": "text", "text": " ".join(words.words(25))}]}}
            out.append(json.dumps(line))
        (project / f"{session}.jsonl").write_text("\n".join(out) + "\n")
    return root


def run_product(env: common.Env, claude: Path) -> dict[str, object]:
    from memory.domain.enums import Origin
    from memory.services.imports import ClaudeCodeImportInput, import_claude_code
    from memory.services.inputs import Caller

    steps: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        steps.append((done, total))
        if done % 100 == 0 or done == total:
            common.log(f"product: {done}/{total}")

    caller = Caller(origin=Origin.CLI, cwd=env.workspace)
    started = time.perf_counter()
    result = import_claude_code(data=ClaudeCodeImportInput.parse({"claude_dir": str(claude), "sessions": True}),
                                caller=caller, progress=progress)
    elapsed = time.perf_counter() - started
    return {"seconds": round(elapsed, 3), "summary": result.summary.model_dump(),
            "progress_calls": len(steps), "progress_total": steps[-1][1] if steps else 0}


def run_floor(env: common.Env, claude: Path) -> dict[str, object]:
    from memory.domain.enums import Origin
    from memory.importers.claude_code import read_projects, transcript_lines
    from memory.services import memories, sessions
    from memory.services.inputs import Caller
    from memory.sessions import claude_code

    caller = Caller(origin=Origin.CLI, cwd=env.workspace)
    projects, _problems = read_projects(claude)  # untimed: the floor only writes
    project = projects[0]
    prepared = []
    for transcript in project.transcripts:
        mapped = claude_code.rows_of(transcript_lines(transcript))  # type: ignore[arg-type]
        events = [row.as_event() for row in mapped.rows] + [claude_code.turn_end(mapped.last_turn).as_event()]
        prepared.append((transcript.session_id, events))
    started = time.perf_counter()
    for memory in project.memories:
        memories.memory_write(data=memories.WriteInput.parse({
            "type": memory.type.value, "name": memory.name, "description": memory.description,
            "content": memory.body}), caller=caller)
    for session_id, events in prepared:
        ids = {"session_id": session_id, "workspace": str(env.workspace)}
        sessions.session_start(data=sessions.SessionStartInput(**ids, agent_name="claude-code"), caller=caller)
        for offset in range(0, len(events), sessions.MAX_BATCH):
            sessions.session_append(data=sessions.SessionAppendInput(**ids, events=events[offset:offset +
                                                                                           sessions.MAX_BATCH]),
                                    caller=caller)
        sessions.session_stop(data=sessions.SessionIdInput(**ids), caller=caller)
    return {"seconds": round(time.perf_counter() - started, 3), "memories": len(project.memories),
            "sessions": len(prepared)}


def worker(kind: str, args) -> None:
    def measure(env: common.Env) -> dict[str, object]:
        claude = build_folder(env.base, env.workspace, args.files, args.transcripts, args.lines, args.seed)
        return (run_product if kind == "product" else run_floor)(env, claude)

    common.worker_process(f"import-{kind}", measure)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--transcripts", type=int, default=50)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261204)
    parser.add_argument("--worker", choices=("product", "floor"), help=argparse.SUPPRESS)
    common.main(parser, coordinate, worker=lambda args: worker(args.worker, args))


def coordinate(_env: None, args: argparse.Namespace) -> dict[str, object]:
    shape = ["--files", str(args.files), "--transcripts", str(args.transcripts), "--lines", str(args.lines),
             "--seed", str(args.seed)]
    runs: dict[str, list[dict[str, object]]] = {"product": [], "floor": []}
    for round_number in range(args.rounds):
        order = ("floor", "product") if round_number % 2 == 0 else ("product", "floor")
        for kind in order:
            common.log(f"round {round_number + 1}: {kind}")
            runs[kind].append(common.run_child([sys.executable, __file__, "--worker", kind, *shape]))
    product = min(float(run["seconds"]) for run in runs["product"])  # type: ignore[arg-type]
    floor = min(float(run["seconds"]) for run in runs["floor"])  # type: ignore[arg-type]
    ratio = round(product / floor, 2)
    return {
        "bench": "import_bench", "machine": common.machine(),
        "shape": {"files": args.files, "transcripts": args.transcripts, "lines": args.lines},
        "runs": runs, "product_best_s": product, "floor_best_s": floor, "ratio": ratio,
        "targets": {"within_3x_of_floor": ratio <= TARGET_RATIO},
    }


if __name__ == "__main__":
    main()
