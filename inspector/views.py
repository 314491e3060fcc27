"""Inspector pages: each one parses the request into a service's input model, calls the service (origin `http`,
so every change goes through the same controller as the CLI and API) and renders the result. Errors from the
domain are shown on the page with their stable code, and a form that failed keeps what the person typed."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth import login, logout
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from memory.services import (
    UNPRINTABLE,
    CompozyError,
    MemoryType,
    Origin,
    Rejected,
    agents,
    catalog,
    decisions,
    dreams,
    escape_control_characters,
    events,
    extractor,
    jobs,
    memories,
    recall,
    sessions,
    snapshots,
    workspaces,
)
from memory.services.inputs import Caller, Selector

from . import rendering, signin
from .forms import Form, form_of

SELECTORS = tuple(Selector.model_fields)

# What each page leaves out of its input model's form, and why (every other field is a control; see forms.py).
# Health and reindex cover every root of the chosen workspaces: a scope or an agent would narrow nothing.
HEALTH_LEAVES_OUT = frozenset({"scope", "agent_name", "agent_tier"})
REINDEX_LEAVES_OUT = frozenset(SELECTORS)  # the workspace comes from the page it is posted from
# A write goes to the root its scope names: include_system is a read's switch.
WRITE_LEAVES_OUT = frozenset({"include_system"})
# An edit keeps the memory where it is: its root comes from the page's query string, its file from the URL.
EDIT_LEAVES_OUT = frozenset({*SELECTORS, "filename"})
# A session's log is found by its id (unique); the selectors only name the workspace it ran in.
SNAPSHOT_LEAVES_OUT = frozenset({"scope", "agent_name", "agent_tier", "include_system"})
DREAM_TRIGGER_LEAVES_OUT = frozenset({"workspace"})  # posted from the page of the chosen workspace

# Pages load nothing from another host and run no inline script: a memory body can never become code.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


# Every change made from the inspector is a decision with origin http, like one over the API's TCP port.
CALLER = Caller(origin=Origin.HTTP)


def _fields(source: Any, *names: str) -> dict[str, Any]:
    """The non-empty values of the named form or query fields (an empty box means "not given")."""
    return {name: source.get(name) for name in names if source.get(name) not in (None, "")}


def _with_csp(response: HttpResponse) -> HttpResponse:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def _visible_controls(response: HttpResponse) -> HttpResponse:
    """A page shows every character it carries: ESC, NUL or a bidi override from a hand-placed file (the scanner
    refuses them on write) would otherwise be invisible or reorder what an auditor reads. Our templates emit none
    of these characters, so escaping the whole page touches memory text only."""
    if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
        return response
    text = response.content.decode(response.charset)
    if UNPRINTABLE.search(text):
        response.content = escape_control_characters(text).encode(response.charset)
    return response


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Every inspector page: signed in or sent to the sign-in page; domain errors rendered with their code."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return HttpResponseRedirect(f"{reverse('inspector:signin')}?{urlencode({'next': request.get_full_path()})}")
        try:
            response = view(request, *args, **kwargs)
        except CompozyError as exc:
            response = render(request, "inspector/error.html", {"error": exc.to_dict()}, status=exc.http_status)
        return _with_csp(_visible_controls(response))

    return wrapper


def _choices() -> dict[str, Any]:
    """The workspaces this machine knows, for the workspace select, and the agents holding memories anywhere, for
    the agent field's list (every other choice comes from the models)."""
    return {
        "workspaces": workspaces.workspace_list(data=workspaces.WorkspaceListInput(), caller=CALLER).to_json()[
            "workspaces"],
        "agents": [agent.agent_name for agent in agents.agent_list(
            data=agents.AgentListInput(all_workspaces=True), caller=CALLER).agents],
    }


def page_not_found(request: HttpRequest) -> HttpResponse:
    error = {"code": "memory.not_found", "message": f"No inspector page at {request.path}.", "details": {}}
    return _with_csp(render(request, "inspector/error.html", {"error": error}, status=404))


def _render_attempt(request: HttpRequest, template: str, context: dict[str, Any],
                    produce: Callable[[], dict[str, Any]]) -> HttpResponse:
    """A page whose form must survive an error (a bad filter, an unknown workspace): the error and its code are
    shown above the form as the person filled it in."""
    try:
        context.update(produce())
        status = 200
    except CompozyError as exc:
        context["error"] = exc.to_dict()
        status = exc.http_status
    return render(request, template, context, status=status)


def _across(chosen: dict[str, Any]) -> dict[str, Any]:
    """A page opens on every workspace this machine knows: with no workspace chosen, the service is asked for
    all of them (each row still names its own), never for the global scopes alone."""
    return {} if chosen.get("workspace") else {"all_workspaces": True}


def _default_workspace(known: list[dict[str, Any]]) -> str | None:
    """For a page that works in one workspace (recall, a new memory): the only one there is, else the one seen
    most recently."""
    if not known:
        return None
    return max(known, key=lambda w: (w["last_seen_at"] or "", w["id"]))["id"]


def _listing(request: HttpRequest, template: str, service: Callable[..., Any], input_model: Any,
             fixed: dict[str, Any] | None = None) -> HttpResponse:
    """A paged, filtered list over one service, its filters generated from the service's input model, across
    every workspace unless one is chosen; the filters stay in the page links, the cursor does not."""
    form = form_of(input_model, extra=("cursor",))
    chosen = form.read(request.GET)
    context = {"chosen": chosen, "filters": {k: v for k, v in chosen.items() if k != "cursor"}, "form": form,
               "values": chosen, **_choices()}
    return _render_attempt(request, template, context, lambda: {
        "result": service(data=input_model.parse({**chosen, **_across(chosen), **(fixed or {})}),
                          caller=CALLER).to_json()})


# --- sign-in -------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def signin_view(request: HttpRequest) -> HttpResponse:
    token = request.POST.get("token") or request.GET.get("token") or ""
    next_url = request.POST.get("next") or request.GET.get("next") or reverse("inspector:dashboard")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = reverse("inspector:dashboard")
    if request.method == "POST":
        user = signin.redeem(token) if token else None
        if user is not None:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return HttpResponseRedirect(next_url)
        context = {"token": "", "next": next_url, "error": "This sign-in link was already used or has expired."}
        return _with_csp(render(request, "inspector/signin.html", context, status=403))
    usable = bool(token) and signin.is_usable(token)
    context = {"token": token if usable else "", "next": next_url,
               "error": "This sign-in link was already used or has expired." if token and not usable else None}
    return _with_csp(render(request, "inspector/signin.html", context))


@require_POST
def signout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return HttpResponseRedirect(reverse("inspector:signin"))


# --- health ----------------------------------------------------------------------------------------------------


@page
def dashboard(request: HttpRequest) -> HttpResponse:
    form = form_of(catalog.HealthInput, leave_out=HEALTH_LEAVES_OUT)
    chosen = form.read(request.GET)
    health = catalog.health_get(data=catalog.HealthInput.parse({**chosen, **_across(chosen)}),
                                caller=CALLER).to_json()
    place = _fields(chosen, "workspace")  # activity counts events, which are not split by _system/
    activity = events.event_activity(data=events.ActivityInput.parse({**place, **_across(place)}),
                                     caller=CALLER).to_json()
    chart = rendering.activity_chart(activity, ZoneInfo(settings.DISPLAY_TIME_ZONE))
    context = {"health": health, "activity": activity, "chart": chart, "chosen": chosen,
               "form": form, "values": chosen, "reindex_form": form_of(catalog.ReindexInput,
                                                                       leave_out=REINDEX_LEAVES_OUT),
               **_choices(), "count_types": [*(t.value for t in MemoryType), "ad_hoc"]}
    return render(request, "inspector/dashboard.html", context)


@page
@require_POST
def reindex(request: HttpRequest) -> HttpResponse:
    shown = form_of(catalog.ReindexInput, leave_out=REINDEX_LEAVES_OUT).read(request.POST)
    data = catalog.ReindexInput.parse({**shown, **_fields(request.POST, "workspace", "all_workspaces")})
    job = jobs.reindex_job_start(data=data, caller=CALLER)
    return HttpResponseRedirect(reverse("inspector:job", args=[job.id]))


@page
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = jobs.job_get(data=jobs.JobIdInput.parse({"job_id": job_id}), caller=CALLER).to_json()
    return render(request, "inspector/job.html", {"job": job, "running": job["status"] in ("queued", "running")})


# --- memories --------------------------------------------------------------------------------------------------


@page
def memory_list(request: HttpRequest) -> HttpResponse:
    return _listing(request, "inspector/memory_list.html", memories.memory_list, memories.ListInput,
                    fixed={"detail": True})


@page
def memory_detail(request: HttpRequest, filename: str) -> HttpResponse:
    selectors = _fields(request.GET, *SELECTORS)
    shown = memories.memory_show(data=memories.ShowInput.parse({**selectors, "filename": filename}), caller=CALLER)
    memory = shown.to_json()["memory"]
    ref = rendering.memory_ref(memory["summary"])
    history = decisions.decision_list(data=decisions.DecisionListInput.parse({**ref, "filename": filename}),
                                      caller=CALLER).to_json()
    usage = snapshots.snapshot_usage(data=snapshots.SnapshotUsageInput.parse({**ref, "filename": filename}),
                                     caller=CALLER).to_json()
    context = {"memory": memory, "body_html": rendering.render_markdown(memory["content"]), "ref": ref,
               "ref_query": urlencode(ref), "decisions": history["decisions"], "usage": usage["sessions"],
               "frontmatter": _frontmatter_rows(memory)}
    return render(request, "inspector/memory_detail.html", context)


def _frontmatter_rows(memory: dict[str, Any]) -> list[tuple[str, Any]]:
    summary = memory["summary"]
    keys = ("name", "description", "type", "scope", "agent_name", "agent_tier", "workspace_id", "created_at",
            "updated_at", "size", "content_hash")
    return [(key, summary[key]) for key in keys if summary.get(key) not in (None, "")]


def _write_form() -> Form:
    return form_of(memories.WriteInput, leave_out=WRITE_LEAVES_OUT)


def _edit_form() -> Form:
    return form_of(memories.EditInput, leave_out=EDIT_LEAVES_OUT)


def _form_page(request: HttpRequest, form: Form, values: dict[str, Any], extra: dict[str, Any],
               status: int = 200) -> HttpResponse:
    """The new-memory or edit form: the fields where the memory lives (the selectors) apart from what it says."""
    where = [field for field in form.fields if field.name in SELECTORS]
    what = [field for field in form.fields if field.name not in SELECTORS]
    context = {"form": form, "where": where, "what": what, "values": values, "one": True, "blank": "not set",
               **extra, **_choices()}
    return render(request, "inspector/memory_form.html", context, status=status)


def _form_failure(request: HttpRequest, exc: CompozyError, form: Form, values: dict[str, Any],
                  extra: dict[str, Any]) -> HttpResponse:
    """The form again, holding what the person typed, with the error; a rejection names the rules that failed."""
    context: dict[str, Any] = dict(extra)
    if isinstance(exc, Rejected):
        decision = exc.details["decision"]
        context.update(rejected=decision,
                       failed_rules=[step for step in decision["rule_trace"] if not step.get("passed", True)])
    else:
        context["error"] = exc.to_dict()
    return _form_page(request, form, values, context, status=exc.http_status)


def _decision_page(request: HttpRequest, result: dict[str, Any]) -> HttpResponse:
    return render(request, "inspector/decision_result.html", {"result": result, "decision": result["decision"]})


@page
@require_http_methods(["GET", "POST"])
def memory_create(request: HttpRequest) -> HttpResponse:
    form = _write_form()
    if request.method == "GET":
        known = _choices()["workspaces"]
        return _form_page(request, form, {"workspace": _default_workspace(known), **form.read(request.GET)}, {})
    values = form.read(request.POST)
    try:
        result = memories.memory_write(data=form.model.parse(values), caller=CALLER)
    except CompozyError as exc:
        return _form_failure(request, exc, form, values, {})
    return _decision_page(request, result.to_json())


@page
@require_http_methods(["GET", "POST"])
def memory_edit(request: HttpRequest, filename: str) -> HttpResponse:
    selectors = _fields(request.GET, *SELECTORS)
    extra = {"filename": filename, "ref_query": urlencode(selectors), "editing": True}
    form = _edit_form()
    if request.method == "GET":
        shown = memories.memory_show(data=memories.ShowInput.parse({**selectors, "filename": filename}),
                                     caller=CALLER).to_json()["memory"]
        current = {**shown["summary"], "content": shown["content"]}
        return _form_page(request, form, {name: current.get(name) for name in form.names}, extra)
    values = form.read(request.POST)
    try:
        data = form.model.parse({**selectors, **values, "filename": filename})
        result = memories.memory_edit(data=data, caller=CALLER)
    except CompozyError as exc:
        return _form_failure(request, exc, form, values, extra)
    return _decision_page(request, result.to_json())


@page
@require_http_methods(["GET", "POST"])
def memory_delete(request: HttpRequest, filename: str) -> HttpResponse:
    selectors = _fields(request.GET, *SELECTORS)
    data = memories.DeleteInput.parse({**selectors, "filename": filename})
    if request.method == "GET":
        preview = memories.memory_delete(data=data.model_copy(update={"dry_run": True}), caller=CALLER)
        return render(request, "inspector/confirm_delete.html",
                      {"filename": filename, "preview": preview.to_json(), "ref_query": urlencode(selectors)})
    return _decision_page(request, memories.memory_delete(data=data, caller=CALLER).to_json())


# --- recall ----------------------------------------------------------------------------------------------------


@page
def recall_playground(request: HttpRequest) -> HttpResponse:
    choices = _choices()
    form = form_of(recall.SearchInput, first=("query",))
    # Recall runs in one workspace, as an agent's does (shadowing is decided within it).
    chosen = {"workspace": _default_workspace(choices["workspaces"]), **form.read(request.GET)}
    context: dict[str, Any] = {"chosen": chosen, "form": form, "values": chosen, "one": True, **choices}

    def ranked() -> dict[str, Any]:
        if not chosen.get("query"):
            return {}
        result = recall.memory_search(data=recall.SearchInput.parse(chosen), caller=CALLER, record=False)
        hits = result.to_json()["results"]
        bars = rendering.score_bars(hits)
        rows: list[dict[str, Any]] = []
        for index, hit in enumerate(hits):
            entry = {**hit, "bars": bars[str(index)], "shadowed": []}
            if hit["shadowed_by"] and rows and _identity(rows[-1]) == _identity(hit):
                rows[-1]["shadowed"].append(entry)  # beside the winner that shadows it
            else:
                rows.append(entry)
        return {"result": result.to_json(), "rows": rows, "bar_width": rendering.SCORE_BAR_WIDTH,
                "parts": rendering.SCORE_LABELS.items(), "prompt_text": recall.recall_prompt_text(result.recall)}

    return _render_attempt(request, "inspector/recall.html", context, ranked)


def _identity(hit: dict[str, Any]) -> tuple[str, str]:
    return hit["memory"]["type"], hit["memory"]["filename"]


# --- decisions -------------------------------------------------------------------------------------------------


@page
def decision_list(request: HttpRequest) -> HttpResponse:
    return _listing(request, "inspector/decision_list.html", decisions.decision_list, decisions.DecisionListInput)


@page
def decision_detail(request: HttpRequest, decision_id: str) -> HttpResponse:
    selectors = _fields(request.GET, "workspace")
    data = decisions.DecisionIdInput.parse({**selectors, **_across(selectors), "decision_id": decision_id})
    decision = decisions.decision_show(data=data, caller=CALLER).to_json()["decision"]
    context = {"decision": decision, "diff": rendering.line_diff(decision["prior_content"], decision["post_content"]),
               "ref_query": urlencode(selectors), "workspaces": _choices()["workspaces"]}
    return render(request, "inspector/decision_detail.html", context)


@page
@require_http_methods(["GET", "POST"])
def decision_revert(request: HttpRequest, decision_id: str) -> HttpResponse:
    selectors = _fields(request.GET, "workspace")
    data = decisions.RevertInput.parse({**selectors, **_across(selectors), "decision_id": decision_id})
    context: dict[str, Any] = {"decision_id": decision_id, "ref_query": urlencode(selectors)}
    try:
        if request.method == "POST":
            return _decision_page(request, decisions.decision_revert(data=data, caller=CALLER).to_json())
        context["preview"] = decisions.decision_revert(data=data.model_copy(update={"dry_run": True}),
                                                       caller=CALLER).to_json()
    except CompozyError as exc:
        context["error"] = exc.to_dict()
        return render(request, "inspector/confirm_revert.html", context, status=exc.http_status)
    return render(request, "inspector/confirm_revert.html", context)


# --- events and snapshots --------------------------------------------------------------------------------------


@page
def event_list(request: HttpRequest) -> HttpResponse:
    return _listing(request, "inspector/event_list.html", events.event_list, events.EventListInput)


@page
def snapshot_view(request: HttpRequest) -> HttpResponse:
    form = form_of(snapshots.SnapshotLogInput, leave_out=SNAPSHOT_LEAVES_OUT, first=("session_id",))
    chosen = form.read(request.GET)
    listing = form_of(snapshots.SnapshotListInput, extra=("cursor",)).read(request.GET)
    context: dict[str, Any] = {"chosen": listing, "form": form, "values": chosen, **_choices(),
                               "filters": {k: v for k, v in listing.items() if k != "cursor"}}

    def produce() -> dict[str, Any]:
        if chosen.get("session_id"):
            return {"log": snapshots.snapshot_log(data=snapshots.SnapshotLogInput.parse(chosen),
                                                  caller=CALLER).to_json()}
        # No session chosen: every session with a snapshot, across every workspace unless one is chosen.
        data = snapshots.SnapshotListInput.parse({**listing, **_across(listing)})
        return {"result": snapshots.snapshot_list(data=data, caller=CALLER).to_json()}

    return _render_attempt(request, "inspector/snapshot.html", context, produce)


# --- dreaming --------------------------------------------------------------------------------------------------


def _dream_workspace(source: Any) -> dict[str, Any]:
    """The chosen workspace; with none chosen, the only one there is, else the one seen most recently (dreaming
    is per workspace, like recall: a page that showed nothing until a workspace is chosen would open on nothing)."""
    chosen = _fields(source, "workspace")
    if not chosen:
        default = _default_workspace(_choices()["workspaces"])
        if default:
            chosen = {"workspace": default}
    return chosen


def _dreaming_page(request: HttpRequest, chosen: dict[str, Any], extra: dict[str, Any],
                   status: int = 200) -> HttpResponse:
    context: dict[str, Any] = {"chosen": chosen, "form": form_of(dreams.DreamStatusInput), "values": chosen,
                               "trigger_form": form_of(dreams.DreamTriggerInput, leave_out=DREAM_TRIGGER_LEAVES_OUT),
                               "one": True, **_choices(), **extra}

    def produce() -> dict[str, Any]:
        if not chosen.get("workspace"):
            return {}
        gates = dreams.dream_status(data=dreams.DreamStatusInput.parse(chosen), caller=CALLER).to_json()
        runs = dreams.dream_list(data=dreams.DreamListInput.parse(chosen), caller=CALLER).to_json()
        return {"status": gates, "runs": runs["dreams"], "total": runs["page"]["total"]}

    response = _render_attempt(request, "inspector/dreaming.html", context, produce)
    if status != 200 and response.status_code == 200:
        response.status_code = status
    return response


@page
def dreaming(request: HttpRequest) -> HttpResponse:
    return _dreaming_page(request, _dream_workspace(request.GET), {})


@page
@require_POST
def dream_trigger(request: HttpRequest) -> HttpResponse:
    chosen = _dream_workspace(request.POST)
    shown = form_of(dreams.DreamTriggerInput, leave_out=DREAM_TRIGGER_LEAVES_OUT).read(request.POST)
    data = dreams.DreamTriggerInput.parse({**chosen, **shown})
    result = dreams.dream_trigger(data=data, caller=CALLER).to_json()
    if result["triggered"]:
        url = reverse("inspector:dream", args=[result["dream"]["id"]])
        return HttpResponseRedirect(f"{url}?{urlencode(chosen)}")
    return _dreaming_page(request, chosen, {"blocked": result}, status=409)


@page
def dream_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    chosen = _dream_workspace(request.GET)
    shown = dreams.dream_show(data=dreams.DreamIdInput.parse({**chosen, "run_id": run_id}), caller=CALLER).to_json()
    return render(request, "inspector/dream_detail.html", {"shown": shown, "dream": shown["dream"], "chosen": chosen,
                                                          "ref_query": urlencode(chosen)})


@page
@require_POST
def dream_retry(request: HttpRequest, run_id: str) -> HttpResponse:
    chosen = _dream_workspace(request.POST)
    result = dreams.dream_retry(data=dreams.DreamIdInput.parse({**chosen, "run_id": run_id}), caller=CALLER).to_json()
    if result["triggered"]:
        url = reverse("inspector:dream", args=[result["dream"]["id"]])
        return HttpResponseRedirect(f"{url}?{urlencode(chosen)}")
    return _dreaming_page(request, chosen, {"blocked": result}, status=409)


# --- the extractor ---------------------------------------------------------------------------------------------


@page
def extractor_view(request: HttpRequest) -> HttpResponse:
    context = {
        "status": extractor.extractor_status(data=extractor.ExtractorStatusInput(), caller=CALLER).to_json(),
        "failures": extractor.extractor_failure_list(data=extractor.FailureListInput(), caller=CALLER).to_json(),
        "failure_sessions": extractor.extractor_failure_sessions(data=extractor.FailureSessionsInput(),
                                                                 caller=CALLER).to_json(),
        "sessions": extractor.extractor_sessions(data=extractor.ExtractorSessionsInput(), caller=CALLER).to_json(),
    }
    return render(request, "inspector/extractor.html", context)


@page
@require_POST
def extractor_drain(request: HttpRequest) -> HttpResponse:
    drained = extractor.extractor_drain(data=extractor.DrainInput(), caller=CALLER).to_json()
    return render(request, "inspector/extractor_result.html", {"title": "Inbox drained", "drain": drained})


@page
@require_POST
def extractor_replay(request: HttpRequest, failure: str) -> HttpResponse:
    data = extractor.ReplayInput.parse({"failure": failure})
    replayed = extractor.extractor_replay(data=data, caller=CALLER).to_json()
    return render(request, "inspector/extractor_result.html",
                  {"title": f"Replayed {failure}", "replay": replayed, "drain": replayed["drain"]})


@page
@require_POST
def extractor_replay_session(request: HttpRequest, session_id: str) -> HttpResponse:
    data = extractor.ReplayInput.parse({"session_id": session_id})
    replayed = extractor.extractor_replay(data=data, caller=CALLER).to_json()
    return render(request, "inspector/extractor_session_replay.html",
                  {"title": f"Replayed the failures of session {session_id}", "replay": replayed,
                   "replayed_count": sum(item["replayed"] for item in replayed["replays"])})


@page
def extractor_session(request: HttpRequest, session_id: str) -> HttpResponse:
    data = extractor.SessionCandidatesInput.parse({"session_id": session_id})
    context = {"session_id": session_id,
               "candidates": extractor.extractor_candidates(data=data, caller=CALLER).to_json()}
    return render(request, "inspector/extractor_session.html", context)


# --- sessions --------------------------------------------------------------------------------------------------


@page
def session_list(request: HttpRequest) -> HttpResponse:
    return _listing(request, "inspector/session_list.html", sessions.session_list, sessions.SessionListInput)


@page
def session_detail(request: HttpRequest, session_id: str) -> HttpResponse:
    selectors = _fields(request.GET, "workspace")
    if not selectors.get("workspace"):
        # An address typed or pasted without its workspace (`/inspector/sessions/s-1`): a session id names one
        # session on this machine, so open it in the workspace it ran in, as a decision opens by its id alone.
        ran_in = sessions.session_workspace(session_id=session_id)
        if ran_in:
            return HttpResponseRedirect(f"{request.path}?{urlencode({**request.GET.dict(), 'workspace': ran_in})}")
    paging = _fields(request.GET, "after_seq", "limit")
    shown = sessions.session_show(data=sessions.SessionIdInput.parse({**selectors, "session_id": session_id}),
                                  caller=CALLER).to_json()
    listed = sessions.session_events(
        data=sessions.SessionEventsInput.parse({**selectors, **paging, "session_id": session_id}),
        caller=CALLER).to_json()
    history = sessions.session_history(
        data=sessions.SessionHistoryInput.parse({**selectors, "session_id": session_id, "limit": 200}),
        caller=CALLER).to_json()
    context = {"shown": shown, "session": shown["session"], "events": listed, "history": history,
               "ref_query": urlencode(selectors),
               "next_query": urlencode({**selectors, "after_seq": listed["next_after_seq"]})
               if listed["has_more"] else None}
    return render(request, "inspector/session_detail.html", context)
