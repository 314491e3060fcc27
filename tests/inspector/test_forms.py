"""The inspector's forms are generated from the services' input models: every page's controls are its model's
fields (less the ones the page says it leaves out), with the model's choices, required flags and descriptions, and
a field added to a model appears on the page with nothing else edited."""

from __future__ import annotations

import enum
import types
from html.parser import HTMLParser
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import Field

from inspector import views
from inspector.forms import NEVER_SHOWN
from memory.services import catalog, decisions, dreams, events, memories, recall, snapshots
from tests import helpers as h
from tests.inspector.helpers import signed_in_client

pytestmark = pytest.mark.django_db


class Controls(HTMLParser):
    """Each <form> on a page: its visible controls by name (type, required, options, described-by id), and the
    text of every element with an id (where a control's help lives)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self.texts: dict[str, str] = {}
        self._open_ids: list[tuple[str, str]] = []
        self._select: dict[str, Any] | None = None
        self._form: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self._form = {"label": a.get("aria-label") or a.get("action") or "", "controls": {}}
            self.forms.append(self._form)
        if a.get("id"):
            self._open_ids.append((tag, a["id"]))
            self.texts[a["id"]] = ""
        if tag in ("input", "select", "textarea") and self._form is not None and a.get("name"):
            if a.get("type") == "hidden":
                return
            control = {"tag": tag, "type": a.get("type") or tag, "required": "required" in a,
                       "describedby": a.get("aria-describedby"), "options": []}
            self._form["controls"][a["name"]] = control
            if tag == "select":
                self._select = control
        if tag == "option" and self._select is not None:
            self._select["options"].append(a.get("value"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        if tag == "select":
            self._select = None
        if self._open_ids and self._open_ids[-1][0] == tag:
            self._open_ids.pop()

    def handle_data(self, data: str) -> None:
        for _tag, element_id in self._open_ids:
            self.texts[element_id] += data
        if self._select is not None and self._select["options"] and self._select["options"][-1] is None:
            self._select["options"][-1] = data  # <option>text</option>: its value is its text


def controls_of(page: str, label: str) -> tuple[dict[str, Any], dict[str, str]]:
    parser = Controls()
    parser.feed(page)
    found = [form for form in parser.forms if form["label"] == label]
    assert len(found) == 1, f"no single form {label!r} in {[f['label'] for f in parser.forms]}"
    return found[0]["controls"], parser.texts


def _choices_of(annotation: Any) -> list[str] | None:
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [member.value for member in annotation]
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    return None


def assert_form_is_the_model(controls: dict[str, Any], texts: dict[str, str], model: type,
                             leaves_out: frozenset[str] = frozenset()) -> None:
    expected = set(model.model_fields) - NEVER_SHOWN - leaves_out
    assert set(controls) == expected
    for name in expected:
        info, control = model.model_fields[name], controls[name]
        assert control["required"] == info.is_required(), name
        assert control["describedby"], f"{name} has no help"
        assert " ".join(texts[control["describedby"]].split()) == " ".join(info.description.split()), name
        choices = _choices_of(info.annotation)
        if choices is not None:
            assert control["tag"] == "select", name
            assert [value for value in control["options"] if value] == choices, name
        elif info.annotation is bool:
            assert control["type"] == "checkbox", name


@pytest.fixture
def client(ws):
    return signed_in_client()


# (page, form's aria-label or action, input model, what the page leaves out)
PAGES = [
    ("/inspector/", "Choose a workspace", catalog.HealthInput, views.HEALTH_LEAVES_OUT),
    ("/inspector/", "/inspector/reindex", catalog.ReindexInput, views.REINDEX_LEAVES_OUT),
    ("/inspector/memories/", "Filter memories", memories.ListInput, frozenset()),
    ("/inspector/memories/new", "Write a memory", memories.WriteInput, views.WRITE_LEAVES_OUT),
    ("/inspector/recall", "Recall query", recall.SearchInput, frozenset()),
    ("/inspector/decisions/", "Filter decisions", decisions.DecisionListInput, frozenset()),
    ("/inspector/events/", "Filter events", events.EventListInput, frozenset()),
    ("/inspector/snapshots/", "Find a session", snapshots.SnapshotLogInput, views.SNAPSHOT_LEAVES_OUT),
    ("/inspector/dreaming/", "Choose a workspace", dreams.DreamStatusInput, frozenset()),
    ("/inspector/dreaming/", "Trigger dreaming", dreams.DreamTriggerInput, views.DREAM_TRIGGER_LEAVES_OUT),
]


@pytest.mark.parametrize(("path", "label", "model", "leaves_out"), PAGES,
                         ids=[f"{path}:{model.__name__}" for path, _l, model, _o in PAGES])
def test_each_form_offers_exactly_its_input_models_fields_with_their_choices_required_flags_and_help(
        client, path, label, model, leaves_out):
    response = client.get(path)
    assert response.status_code == 200
    controls, texts = controls_of(response.content.decode(), label)
    assert_form_is_the_model(controls, texts, model, leaves_out)


def test_the_edit_form_offers_the_edit_models_fields(client, workspace_dir, ws_id):
    h.write(workspace_dir, type="project", name="Form source", description="d", content="Body text here.")
    response = client.get(f"/inspector/memories/project_form_source.md/edit?workspace={ws_id}")
    assert response.status_code == 200
    controls, texts = controls_of(response.content.decode(), "Edit the memory")
    assert_form_is_the_model(controls, texts, memories.EditInput, views.EDIT_LEAVES_OUT)


def test_what_a_page_leaves_out_is_a_field_of_its_model(client):
    # A leave-out naming no field would hide nothing, and hide that a field was renamed.
    for _path, _label, model, leaves_out in PAGES:
        assert leaves_out <= set(model.model_fields), model.__name__
    assert set(memories.EditInput.model_fields) >= views.EDIT_LEAVES_OUT


def test_a_field_added_to_an_input_model_is_a_control_on_its_page_and_reaches_the_service(
        client, monkeypatch, workspace_dir):
    seen: list[Any] = []
    served = memories.memory_list

    class ColourList(memories.ListInput):
        colour: Literal["red", "green"] | None = Field(default=None, description="Only memories of this colour.")

    def spy(*, data, caller):
        seen.append(data)
        return served(data=data, caller=caller)

    class PinnedWrite(memories.WriteInput):
        pin: bool = Field(default=False, description="Keep this memory at the top of its index.")

    monkeypatch.setattr(memories, "ListInput", ColourList)
    monkeypatch.setattr(memories, "memory_list", spy)
    monkeypatch.setattr(memories, "WriteInput", PinnedWrite)

    listing = client.get("/inspector/memories/?colour=green")
    assert listing.status_code == 200
    controls, texts = controls_of(listing.content.decode(), "Filter memories")
    assert controls["colour"]["options"] == ["", "red", "green"]
    assert texts[controls["colour"]["describedby"]] == "Only memories of this colour."
    assert '<option selected>green</option>' in listing.content.decode()
    assert seen and seen[-1].colour == "green"

    form, texts = controls_of(client.get("/inspector/memories/new").content.decode(), "Write a memory")
    assert form["pin"]["type"] == "checkbox"
    assert texts[form["pin"]["describedby"]] == "Keep this memory at the top of its index."


def test_the_new_memory_forms_help_says_where_a_write_goes_and_nothing_about_reads(client):
    page = client.get("/inspector/memories/new").content.decode()
    parser = Controls()
    parser.feed(page)
    helps = {name: parser.texts.get(control["describedby"] or "", "")
             for form in parser.forms for name, control in form["controls"].items()}
    assert helps["scope"].startswith("Where the memory goes")
    assert not [name for name, text in helps.items() if "read" in text.lower()]
